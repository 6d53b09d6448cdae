"""Named interleaving points of the stale sweep, for deterministic race tests.

A sweep calls each hook, when set, at exactly one point of its protocol with
the instance (or dependent file path) it is working on. Tests use them to run a
writer at that instant; production sweeps leave them unset.
"""

from __future__ import annotations

from collections.abc import Callable

import msgspec

Hook = Callable[[str], None] | None


class SweepHooks(msgspec.Struct, frozen=True, kw_only=True):
    """Callbacks at the sweep's interleaving points (each takes an instance or a path).

    * ``after_snapshot(directory)``: the directory scans are done.
    * ``after_stale_read(instance)``: a stale heartbeat was read and its owner judged dead.
    * ``before_audit(instance)``: the heartbeat is pinned; the audit is about to run.
    * ``before_audit_write(instance)``: inside the audit recorder, holding custody,
      between the check after acquiring custody and the final check before the write.
    * ``before_unlink(instance)``: the pin was rechecked; its private unlink is next.
    * ``after_dependent_read(path)``: a pid-map or prompt-hash file was read.
    * ``after_dependent_pin(path)``: that file is pinned; its owner is rechecked next.
    * ``before_dependent_unlink(path)``: that file's pin is confirmed; its private
      unlink is next. Called in the thread that unlinks it (:mod:`.unlinker`), while
      the sweep goes on.
    * ``after_spare_rewrite(name)``: a dropped manifest's file holds the bytes of the
      next manifest ``name`` under its hidden name; the rename that publishes it is
      next (:class:`~.private.ManifestSpares`).
    """

    after_snapshot: Hook = None
    after_stale_read: Hook = None
    before_audit: Hook = None
    before_audit_write: Hook = None
    before_unlink: Hook = None
    after_dependent_read: Hook = None
    after_dependent_pin: Hook = None
    before_dependent_unlink: Hook = None
    after_spare_rewrite: Hook = None

    def call(self, point: str, subject: str) -> None:
        hook = getattr(self, point)
        if hook is not None:
            hook(subject)


NO_HOOKS = SweepHooks()

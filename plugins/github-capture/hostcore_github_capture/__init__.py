"""hostcore-github-capture: the observed-repositories inventory and the GitHub event capture.

The inventory is the set of ``owner/repo`` keys that session evidence, as the
export seam lets it out under the live withholding policy, points at. It grows
incrementally from new rows and is re-derived from scratch (a bounded,
resumable revalidation pass) when the policy fingerprint changes, the store
file is replaced, a partition loses rows, or the last derivation is a week old
(or stamped in the future). Capture polls each
repository's events through the shared ``gh`` runner (:mod:`hostcore_gh.runner`)
and stores them in the ``github_events`` partition.

Modules: :mod:`.remotes` (remote URL → key), :mod:`.state` (the persisted
sidecar and capture state), :mod:`.stamps` (times a wrong clock wrote),
:mod:`.sidecar` (ticks, triggers, revalidation),
:mod:`.capture` (polling GitHub), :mod:`.worker` (the tick step),
:mod:`.commands` (``hostcore capture``), :mod:`.plugin` (registration).
"""

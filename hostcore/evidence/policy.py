"""The withholding policy: which evidence rows may leave the store.

A :class:`Policy` combines every registered policy input (see the
``hostcore_policy_inputs`` hook): a row recorded in ``directory`` by
``source_id`` is withheld when any input withholds that pair. The policy is asked
once per distinct (directory, source) pair per export read, never per row, and it
calls the resolved input objects directly (hooks are not a per-row path).

Verdicts of inputs that publish a fingerprint part are cached per (directory,
source) until the fingerprint changes: such an input promises its part changes
whenever its verdicts can. Inputs without a part (a third party's that cannot
be enumerated) are asked on every evaluation and keep their own caches; while
one is registered the policy is :attr:`Policy.volatile` and readers re-evaluate
it at every chunk, since no fingerprint can tell them it moved.

An input that raises is taken to withhold: when the policy cannot be evaluated,
nothing leaves.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from typing import Any

from hostcore.export.ref import fold

log = logging.getLogger("hostcore.evidence.policy")

# The fingerprint part an input contributes when its fingerprint_part() raises.
UNAVAILABLE_PART = "unavailable"


class Policy:
    """The live withholding policy over a fixed set of inputs (``host.policy``)."""

    def __init__(self, inputs: Sequence[Any]) -> None:
        # Name order is the fingerprint's defined order.
        self.inputs: tuple[Any, ...] = tuple(sorted(inputs, key=lambda i: i.name))
        self._verdicts: dict[tuple[str, str], bool] = {}
        self._verdicts_under: str | None = None
        self.input_errors = 0
        #: True while an input publishes no fingerprint part (set by :meth:`parts`).
        self.volatile = False

    def input(self, name: str) -> Any:
        """The registered input called ``name`` (``KeyError`` when absent)."""
        for item in self.inputs:
            if item.name == name:
                return item
        raise KeyError(name)

    # -- fingerprint -------------------------------------------------------------

    def parts(self) -> list[tuple[str, str | None]]:
        """Each input's name and fingerprint part, in name order."""
        found: list[tuple[str, str | None]] = []
        for item in self.inputs:
            try:
                part = item.fingerprint_part()
                if part is not None and not _foldable(part):
                    raise ValueError("a fingerprint part must be text without NUL or newline")
            except Exception:
                self._input_failed(item, "fingerprint_part")
                part = UNAVAILABLE_PART
            found.append((item.name, part))
        self.volatile = any(part is None for _, part in found)
        return found

    def fingerprint(self) -> str:
        """One stable digest of every non-``None`` part, in input name order.

        It changes exactly when a fingerprinting input's part changes; inputs
        without a part do not enter it. Costs what the parts cost (no row reads).
        """
        return _digest(self.parts())

    # -- verdicts ------------------------------------------------------------------

    def withholds(self, directory: str, source_id: str) -> bool:
        """The verdict for one (directory, source) pair, against the live inputs."""
        return bool(self.withheld([(0, directory, source_id)]))

    def withheld(self, scopes: Iterable[tuple[int, str, str]]) -> list[int]:
        """The ids of the ``(id, directory, source_id)`` scopes the policy withholds.

        Evaluates the policy once per scope against the live inputs.
        """
        parts = self.parts()
        fingerprint = _digest(parts)
        if fingerprint != self._verdicts_under:
            self._verdicts.clear()
            self._verdicts_under = fingerprint
        stable = [i for i, (_, part) in zip(self.inputs, parts, strict=True) if part is not None]
        volatile = [i for i, (_, part) in zip(self.inputs, parts, strict=True) if part is None]
        cache = self._verdicts
        withheld: list[int] = []
        for scope, directory, source_id in scopes:
            key = (directory, source_id)
            verdict = cache.get(key)
            if verdict is None:
                verdict = cache[key] = self._any_withholds(stable, directory, source_id)
            if verdict or (volatile and self._any_withholds(volatile, directory, source_id)):
                withheld.append(scope)
        return withheld

    def _any_withholds(self, inputs: list[Any], directory: str, source_id: str) -> bool:
        for item in inputs:
            try:
                if item.withholds(directory, source_id):
                    return True
            except Exception:
                self._input_failed(item, "withholds")
                return True
        return False

    def _input_failed(self, item: Any, method: str) -> None:
        self.input_errors += 1
        if self.input_errors == 1:
            log.warning("policy input %r raised in %s(); withholding instead", item.name,
                        method, exc_info=True)


def _foldable(part: object) -> bool:
    """Whether ``part`` can enter the fold: text without its separators (NUL, LF)."""
    return isinstance(part, str) and "\0" not in part and "\n" not in part


def _digest(parts: list[tuple[str, str | None]]) -> str:
    # One fold of the parts by input name: the code base's one definition of how
    # named identities combine (hostcore.export.ref.fold). Inputs without a part add nothing.
    return fold({name: part for name, part in parts if part is not None})

"""The conformance suite for withholding-policy inputs (see :mod:`hostcore.testing.kit`)."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

import pytest

from hostcore.testing.kit import (
    FINGERPRINT_BUDGET_SECONDS,
    FINGERPRINT_CALLS,
    FINGERPRINT_MAX_CHARS,
    _PluginSuite,
    contract_failure,
    registered_objects,
    require,
)

ODD_DIRECTORIES = ("", "/", "relative/dir", "/päth/with spaces/ünïcode", "/a" * 2000,
                   "/tmp/new\nline", "C:\\Users\\someone")
ODD_SOURCES = ("", "unknown-source", "codex", "claude", "x" * 500)


class PolicyInputConformance(_PluginSuite):
    """Checks every withholding-policy input the plugin registers.

    Contract: ``withholds(directory, source_id)`` returns a ``bool`` for any
    strings, the same answer every time for the same state; ``fingerprint_part()``
    returns ``None`` or a short string that is stable (same state, same part —
    also across a restart), cheap (no row reads), free of paths and names, and
    that changes when the verdicts change (override ``change_policy``).
    """

    fingerprint_budget_seconds = FINGERPRINT_BUDGET_SECONDS
    fingerprint_max_chars = FINGERPRINT_MAX_CHARS

    @pytest.fixture
    def sample_directories(self) -> tuple[str, ...]:
        """Directories the input knows about (e.g. that its config lists)."""
        return ("/home/someone/projects/secret-client", "/srv/work/payroll-service")

    @pytest.fixture
    def change_policy(self) -> Callable[[Any], None] | None:
        """A callable that changes the input's state in ``host`` so a verdict changes,
        or None for an input whose verdicts never change."""
        return None

    @pytest.fixture
    def policy_host(self, build_host: Callable[..., Any]) -> Any:
        return build_host()

    @pytest.fixture
    def inputs(self, policy_host: Any, plugin: object) -> list[Any]:
        return registered_objects(policy_host, plugin, "policy_input")

    def _part(self, policy_input: Any) -> str | None:
        try:
            part = policy_input.fingerprint_part()
        except Exception as exc:
            contract_failure(f"policy input {policy_input.name!r}: fingerprint_part() raised; "
                             "return None when the input cannot be enumerated cheaply.",
                             raised=exc)
        require(part is None or isinstance(part, str),
                f"policy input {policy_input.name!r}: fingerprint_part() returned "
                f"{type(part).__name__}; it must return a str or None.")
        return cast(str | None, part)

    def _verdicts(self, policy_input: Any, directories: tuple[str, ...]) -> dict[Any, bool]:
        verdicts = {}
        for directory in (*directories, *ODD_DIRECTORIES):
            for source in ODD_SOURCES:
                try:
                    verdict = policy_input.withholds(directory, source)
                except Exception as exc:
                    contract_failure(
                        f"policy input {policy_input.name!r}: withholds({directory[:60]!r}, "
                        f"{source[:40]!r}) raised; it must answer True or False for any "
                        "directory and source.", raised=exc)
                require(isinstance(verdict, bool),
                        f"policy input {policy_input.name!r}: withholds() returned "
                        f"{type(verdict).__name__}; it must return a bool.")
                verdicts[(directory, source)] = verdict
        return verdicts

    def test_withholds_answers_a_bool_for_any_input(self, inputs: list[Any],
                                                    sample_directories: tuple[str, ...]) -> None:
        for policy_input in inputs:
            first = self._verdicts(policy_input, sample_directories)
            again = self._verdicts(policy_input, sample_directories)
            changed = [key for key in first if first[key] != again[key]]
            require(not changed, f"policy input {policy_input.name!r}: withholds() changed its "
                                 f"answer with no change of state for {changed[:3]}")

    def test_fingerprint_part_is_stable(self, inputs: list[Any]) -> None:
        for policy_input in inputs:
            parts = {self._part(policy_input) for _ in range(3)}
            require(len(parts) == 1, f"policy input {policy_input.name!r}: fingerprint_part() "
                                     f"gave {sorted(map(str, parts))} for one state; it must be "
                                     "stable or every export would look like a policy change.")

    def test_fingerprint_part_survives_a_restart(self, inputs: list[Any], plugin: object,
                                                 build_host: Callable[..., Any]) -> None:
        again = {i.name: i for i in registered_objects(build_host(), plugin, "policy_input")}
        for policy_input in inputs:
            before, after = self._part(policy_input), self._part(again[policy_input.name])
            require(before == after,
                    f"policy input {policy_input.name!r}: fingerprint_part() was {before!r} and "
                    f"{after!r} after a restart with the same state; derive it from the "
                    "input's state only (not object ids, times or random values).")

    def test_fingerprint_part_is_cheap(self, inputs: list[Any]) -> None:
        for policy_input in inputs:
            started = time.perf_counter()
            for _ in range(FINGERPRINT_CALLS):
                self._part(policy_input)
            mean = (time.perf_counter() - started) / FINGERPRINT_CALLS
            require(mean <= self.fingerprint_budget_seconds,
                    f"policy input {policy_input.name!r}: fingerprint_part() took "
                    f"{mean * 1000:.2f} ms (budget {self.fingerprint_budget_seconds * 1000:.0f} "
                    "ms); it is read on every export, so keep a digest of the input's state "
                    "and never read rows. Return None if that is impossible.")

    def test_fingerprint_part_is_a_short_path_free_digest(
            self, inputs: list[Any], sample_directories: tuple[str, ...]) -> None:
        words = {part for d in sample_directories for part in Path(d).parts if len(part) > 3}
        for policy_input in inputs:
            part = self._part(policy_input)
            if part is None:
                continue
            require(len(part) <= self.fingerprint_max_chars,
                    f"policy input {policy_input.name!r}: fingerprint_part() is {len(part)} "
                    f"characters (limit {self.fingerprint_max_chars}); return a digest, not "
                    "the input itself.")
            leaked = sorted(w for w in words | set(sample_directories) if w and w in part)
            require(not leaked, f"policy input {policy_input.name!r}: fingerprint_part() "
                                f"contains {leaked}; it travels with exports and telemetry and "
                                "must never carry a path or a name. Hash them.")

    def test_fingerprint_part_moves_when_verdicts_change(
            self, policy_host: Any, inputs: list[Any],
            change_policy: Callable[[Any], None] | None,
            sample_directories: tuple[str, ...]) -> None:
        before_parts = {i.name: self._part(i) for i in inputs}
        before = {i.name: self._verdicts(i, sample_directories) for i in inputs}
        if change_policy is not None:
            change_policy(policy_host)
        moved_any = False
        for policy_input in inputs:  # the live objects: the seam never re-registers them
            name = policy_input.name
            verdicts = self._verdicts(policy_input, sample_directories)
            part = self._part(policy_input)
            moved = verdicts != before[name]
            moved_any = moved_any or moved
            if moved and part is not None:
                require(part != before_parts[name],
                        f"policy input {name!r}: its verdicts changed but fingerprint_part() "
                        f"stayed {part!r}; consumers would keep exports the new policy "
                        "withholds.")
            if not moved and change_policy is None:
                require(part == before_parts[name],
                        f"policy input {name!r}: fingerprint_part() moved from "
                        f"{before_parts[name]!r} to {part!r} with no change of state.")
        if change_policy is not None:
            require(moved_any, "after change_policy no verdict over the sample directories "
                               "changed; the live input must see its new state (or "
                               "change_policy must change a verdict).")

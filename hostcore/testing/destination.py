"""The conformance suite for export destinations (see :mod:`hostcore.testing.kit`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from hostcore.plugin.registration import KINDS, availability, validate
from hostcore.testing.kit import _PluginSuite, contract_failure, registered_objects, require

# Imports inside functions here are lazy on purpose: this module loads with hostcore's
# pytest plugin in every pytest run, and only this suite's tests need the export modules.

# The origins (store identities) the kit's hand-made batches claim to come from.
KIT_ORIGIN = "hostcore-conformance-origin"
OTHER_ORIGIN = "hostcore-conformance-other"
# An instance id no destination ever has: a pusher that resumed from another one.
FOREIGN_INSTANCE = "hostcore-conformance-foreign-instance"


def export_rows(first: int, last: int) -> list[Any]:
    """Hand-made export rows at positions ``first..last`` (inclusive)."""
    import msgspec

    from hostcore.export.batch import ExportRow

    return [ExportRow(position=p, partition="conformance", source_id="kit", session_id="s",
                      ts="2024-01-01T00:00:00.000000Z", directory="/kit", git_remote="",
                      payload=msgspec.Raw(b'{"n": %d}' % p), key=f"k{p}")
            for p in range(first, last + 1)]


class DestinationConformance(_PluginSuite):
    """Checks every export destination the plugin registers.

    Contract (see ``hostcore.plugin.registration.Destination``): ``published(stream, origin)``
    reports the last durably held position (``0`` before any push) and the
    identities published for that origin, without writing; ``push(batch)``
    appends only the rows past that position — so a rerun of an overlapping
    batch holds every row once — and returns the ref it now publishes, which
    ``published`` then agrees with, also after a restart. Before writing
    anything a push checks continuity (a batch naming another instance, or
    resumed from another position, raises
    ``hostcore.export.batch.DestinationChanged``) and governance (a change whose
    expectation does not match what is held, including a create-only
    expectation meeting any value, raises ``hostcore.export.ref.Conflict``
    naming every component that moved). Governance is kept per origin. An
    optional ``instance()`` is non-empty once the destination holds anything and
    stable across restarts. The plugin's ``hostcore_published_ref``, if any,
    answers only for its own destination. The export engine drives it to the end
    of the feed and a second run pushes nothing.

    Fixtures to provide: ``plugin``, usually ``plugin_config``; and
    ``held_positions`` returning a callable ``(host, stream, origin) -> list[int]``
    that reads back the positions the destination holds, in order.
    """

    @pytest.fixture
    def held_positions(self) -> Callable[[Any, str, str], list[int]]:
        contract_failure(
            f"{type(self).__name__} needs a `held_positions` fixture returning a callable "
            "(host, stream, origin) -> list[int] that reads back the row positions your "
            "destination holds, so the suite can check that every row is held once.")

    @pytest.fixture
    def destination_host(self, build_host: Callable[..., Any]) -> Any:
        return build_host()

    @pytest.fixture
    def destinations(self, destination_host: Any, plugin: object) -> list[Any]:
        found = registered_objects(destination_host, plugin, "destination")
        for destination in found:
            reason = availability(destination)
            require(reason is None,
                    f"destination {destination.name!r} is unavailable ({reason}); give the "
                    "suite what it needs through `plugin_config` or `host_env`.")
        return found

    def _published(self, destination: Any, stream: str, origin: str) -> Any:
        from hostcore.export.ref import Ref

        try:
            ref = destination.published(stream, origin)
        except Exception as exc:
            contract_failure(f"destination {destination.name!r}: published({stream!r}, "
                             f"{origin!r}) raised; a destination that never received a push "
                             "publishes Ref() (position 0).", raised=exc)
        require(isinstance(ref, Ref),
                f"destination {destination.name!r}: published() returned "
                f"{type(ref).__name__}; it must return a hostcore.export.ref.Ref.")
        return ref

    def _push(self, destination: Any, batch: Any) -> Any:
        from hostcore.export.ref import Conflict, Ref

        try:
            ref = destination.push(batch)
        except Conflict:
            raise
        except Exception as exc:
            contract_failure(f"destination {destination.name!r}: push() raised "
                             f"{type(exc).__name__} on a valid batch.", raised=exc)
        require(isinstance(ref, Ref),
                f"destination {destination.name!r}: push() returned {type(ref).__name__}; it "
                "must return the hostcore.export.ref.Ref it publishes after the push.")
        return ref

    def _batch(self, rows: list[Any], *, origin: str = KIT_ORIGIN, **governance: Any) -> Any:
        from hostcore.export.batch import ExportBatch
        from hostcore.export.ref import DEFAULT_STREAM

        return ExportBatch(stream=DEFAULT_STREAM, origin=origin, rows=rows, **governance)

    def _instance(self, destination: Any) -> str:
        instance = getattr(destination, "instance", None)
        if not callable(instance):
            return ""
        try:
            found = instance()
        except Exception as exc:
            contract_failure(f"destination {destination.name!r}: instance() raised.",
                             raised=exc)
        require(isinstance(found, str),
                f"destination {destination.name!r}: instance() returned "
                f"{type(found).__name__}; it must return a str ('' before any storage).")
        return str(found)

    def test_destination_is_a_valid_registration(self, destinations: list[Any]) -> None:
        for destination in destinations:
            try:
                validate(KINDS["destination"], destination, "the destination")
            except Exception as exc:
                contract_failure(str(exc))
            key = getattr(destination, "key", None)
            require(key is None or isinstance(key, str),
                    f"destination {destination.name!r}: key must be a str, got {key!r}")

    def test_a_fresh_destination_publishes_position_zero(self, destinations: list[Any]) -> None:
        from hostcore.export.ref import DEFAULT_STREAM

        for destination in destinations:
            ref = self._published(destination, DEFAULT_STREAM, KIT_ORIGIN)
            require(ref.content == 0,
                    f"destination {destination.name!r}: before any push it publishes position "
                    f"{ref.content}; the export would skip rows 1..{ref.content}.")

    def test_an_overlapping_rerun_holds_every_row_once(
            self, destination_host: Any, destinations: list[Any], plugin: object,
            build_host: Callable[..., Any], held_positions: Any) -> None:
        from hostcore.export.ref import DEFAULT_STREAM

        for destination in destinations:
            first = self._push(destination, self._batch(export_rows(1, 5)))
            require(first.content == 5,
                    f"destination {destination.name!r}: after pushing positions 1..5, push() "
                    f"returned position {first.content}; it must return the position it now "
                    "holds.")
            again = self._push(destination, self._batch(export_rows(3, 8)))
            require(again.content == 8,
                    f"destination {destination.name!r}: after a rerun pushing 3..8 it "
                    f"returned position {again.content}, not 8.")
            held = held_positions(destination_host, DEFAULT_STREAM, KIT_ORIGIN)
            require(held == list(range(1, 9)),
                    f"destination {destination.name!r}: it holds positions {held} after "
                    "pushes of 1..5 and 3..8; rows at or below its position must be dropped, "
                    "so a rerun after a kill never duplicates one.")
            require(self._published(destination, DEFAULT_STREAM, KIT_ORIGIN).content == 8,
                    f"destination {destination.name!r}: published() disagrees with the "
                    "position push() returned.")
        restarted = {d.name: d for d in registered_objects(build_host(), plugin, "destination")}
        for destination in destinations:
            ref = self._published(restarted[destination.name], DEFAULT_STREAM, KIT_ORIGIN)
            require(ref.content == 8,
                    f"destination {destination.name!r}: after a restart it publishes position "
                    f"{ref.content}, not 8; the position must be the durable truth, since "
                    "the export resumes from it.")

    def test_a_stale_governance_expectation_is_a_conflict_that_writes_nothing(
            self, destination_host: Any, destinations: list[Any], held_positions: Any) -> None:
        from hostcore.export.ref import DEFAULT_STREAM, Conflict, Ref

        for destination in destinations:
            self._push(destination, self._batch(export_rows(1, 2), sets=Ref(context="c1")))
            before = self._published(destination, DEFAULT_STREAM, KIT_ORIGIN)
            require(before.context == "c1",
                    f"destination {destination.name!r}: a push setting context 'c1' left it "
                    f"publishing context {before.context!r}.")
            stale = self._batch(export_rows(3, 4), sets=Ref(context="c3"),
                                expect=Ref(context="c2"))
            try:
                self._push(destination, stale)
            except Conflict:
                pass
            else:
                contract_failure(
                    f"destination {destination.name!r}: a push expecting context 'c2' while "
                    "it holds 'c1' was accepted. Apply governance with "
                    "hostcore.export.apply_governance before writing, so a moved "
                    "destination refuses it with hostcore.export.ref.Conflict.")
            after = self._published(destination, DEFAULT_STREAM, KIT_ORIGIN)
            held = held_positions(destination_host, DEFAULT_STREAM, KIT_ORIGIN)
            require(after == before and held == [1, 2],
                    f"destination {destination.name!r}: a refused push still changed it "
                    f"(published {after}, holds {held}); a conflict must write nothing.")

    def test_the_export_engine_reaches_the_end_and_a_rerun_pushes_nothing(
            self, destination_host: Any, destinations: list[Any], held_positions: Any) -> None:
        from hostcore.evidence.rows import EvidenceRow
        from hostcore.export.exporter import Exporter
        from hostcore.export.ref import DEFAULT_STREAM

        host = destination_host
        host.store.append([EvidenceRow(partition="conformance", source_id="kit",
                                       directory=f"/kit/{n}", payload={"n": n}, key=str(n))
                           for n in range(7)])
        origin = host.store.instance_id
        for destination in destinations:
            first = Exporter(host, destination, batch_rows=3).run()
            require(first.done and first.rows == 7,
                    f"destination {destination.name!r}: the export pushed {first.rows} of 7 "
                    f"rows (done={first.done}).")
            second = Exporter(host, destination, batch_rows=3).run()
            require(second.rows == 0,
                    f"destination {destination.name!r}: a second export pushed "
                    f"{second.rows} rows again; published() must report the position held.")
            held = held_positions(host, DEFAULT_STREAM, origin)
            require(held == sorted(set(held)) and len(held) == 7,
                    f"destination {destination.name!r}: after two exports of 7 rows it holds "
                    f"positions {held}.")

    def test_the_instance_id_names_the_storage_and_survives_a_restart(
            self, destinations: list[Any], plugin: object,
            build_host: Callable[..., Any]) -> None:
        instances = {}
        for destination in destinations:
            if not callable(getattr(destination, "instance", None)):
                continue  # optional: continuity then rests on the position alone
            self._push(destination, self._batch(export_rows(1, 2)))
            instances[destination.name] = self._instance(destination)
            require(instances[destination.name],
                    f"destination {destination.name!r}: instance() is empty after a push; "
                    "create the id with the storage, so a replaced destination answers a "
                    "new one.")
        restarted = {d.name: d for d in registered_objects(build_host(), plugin, "destination")}
        for name, instance in instances.items():
            again = self._instance(restarted[name])
            require(again == instance,
                    f"destination {name!r}: instance() answered {instance!r}, then {again!r} "
                    "after a restart; it must be stable while the storage is the same.")

    def test_a_push_resumed_from_elsewhere_is_refused_and_writes_nothing(
            self, destination_host: Any, destinations: list[Any], held_positions: Any) -> None:
        from hostcore.export.batch import DestinationChanged
        from hostcore.export.ref import DEFAULT_STREAM, Ref

        for destination in destinations:
            self._push(destination, self._batch(export_rows(1, 3)))
            instance = self._instance(destination)
            before = self._published(destination, DEFAULT_STREAM, KIT_ORIGIN)
            cases = {
                "resumed from position 2 while it holds 3":
                    self._batch(export_rows(3, 5), after=2, destination=instance,
                                sets=Ref(context="c-stale")),
                "naming another instance":
                    self._batch(export_rows(4, 5), after=3, destination=FOREIGN_INSTANCE,
                                sets=Ref(context="c-foreign")),
            }
            for what, batch in cases.items():
                try:
                    destination.push(batch)
                except DestinationChanged:
                    pass
                except Exception as exc:
                    contract_failure(f"destination {destination.name!r}: a push {what} raised "
                                     f"{type(exc).__name__}, not DestinationChanged.",
                                     raised=exc)
                else:
                    contract_failure(
                        f"destination {destination.name!r}: a push {what} was accepted. Call "
                        "hostcore.export.batch.check_continuity(batch, instance, held) under "
                        "your lock before writing: a pusher that resumed from another "
                        "destination (deleted, re-created, restored) would leave a gap.")
                held = held_positions(destination_host, DEFAULT_STREAM, KIT_ORIGIN)
                after = self._published(destination, DEFAULT_STREAM, KIT_ORIGIN)
                require(held == [1, 2, 3] and after == before,
                        f"destination {destination.name!r}: a refused push {what} still "
                        f"changed it (holds {held}, publishes {after}).")
            resumed = self._push(destination, self._batch(export_rows(4, 5), after=3,
                                                          destination=instance))
            require(resumed.content == 5,
                    f"destination {destination.name!r}: a push resumed from the position it "
                    f"holds returned position {resumed.content}, not 5.")

    def test_governance_is_kept_per_origin(self, destinations: list[Any]) -> None:
        from hostcore.export.ref import DEFAULT_STREAM, Conflict, Ref

        for destination in destinations:
            self._push(destination, self._batch(export_rows(1, 1), sets=Ref(context="c-a")))
            self._push(destination, self._batch(export_rows(1, 1), origin=OTHER_ORIGIN,
                                                sets=Ref(context="c-b")))
            try:
                self._push(destination, self._batch([], origin=OTHER_ORIGIN,
                                                    sets=Ref(context="c-b2"),
                                                    expect=Ref(context="c-b")))
            except Conflict:
                contract_failure(f"destination {destination.name!r}: origin B's write "
                                 "expecting its own context 'c-b' conflicted: governance "
                                 "must be kept per (stream, origin), so hosts sharing a "
                                 "destination never fight over it.")
            mine = self._published(destination, DEFAULT_STREAM, KIT_ORIGIN).context
            theirs = self._published(destination, DEFAULT_STREAM, OTHER_ORIGIN).context
            require((mine, theirs) == ("c-a", "c-b2"),
                    f"destination {destination.name!r}: after origin A set context 'c-a' and "
                    f"origin B 'c-b2', it publishes {mine!r} for A and {theirs!r} for B.")

    def test_a_create_only_write_meets_any_value_as_a_conflict(
            self, destination_host: Any, destinations: list[Any], held_positions: Any) -> None:
        from hostcore.export.ref import ABSENT, DEFAULT_STREAM, Conflict, Ref

        for destination in destinations:
            first = self._push(destination, self._batch(
                export_rows(1, 1), sets=Ref(context="c1"), expect=Ref(context=ABSENT)))
            require(first.context == "c1",
                    f"destination {destination.name!r}: a create-only write of context 'c1' "
                    f"into nothing left it publishing {first.context!r}.")
            try:
                self._push(destination, self._batch(export_rows(2, 2), sets=Ref(context="c2"),
                                                    expect=Ref(context=ABSENT)))
            except Conflict:
                pass
            else:
                contract_failure(
                    f"destination {destination.name!r}: a create-only write (expect ABSENT) "
                    "overwrote the context it held. Apply governance with "
                    "hostcore.export.apply_governance: ABSENT expects no value yet.")
            held = held_positions(destination_host, DEFAULT_STREAM, KIT_ORIGIN)
            now = self._published(destination, DEFAULT_STREAM, KIT_ORIGIN).context
            require(held == [1] and now == "c1",
                    f"destination {destination.name!r}: a refused create-only write still "
                    f"changed it (holds {held}, context {now!r}).")

    def test_a_conflict_names_every_component_that_moved(self, destinations: list[Any]) -> None:
        from hostcore.export.ref import Conflict, Ref

        for destination in destinations:
            self._push(destination, self._batch(export_rows(1, 1),
                                                sets=Ref(context="c1", terms="t1")))
            stale = self._batch([], sets=Ref(context="c3", terms="t3"),
                                expect=Ref(context="c0", terms="t0"))
            try:
                self._push(destination, stale)
            except Conflict as conflict:
                named = getattr(conflict, "components", [conflict.component])
                require(named == ["context", "terms"],
                        f"destination {destination.name!r}: a write whose context and terms "
                        f"both moved raised a Conflict naming {named}; name every component "
                        "(hostcore.export.apply_governance does).")
            else:
                contract_failure(f"destination {destination.name!r}: a write with stale "
                                 "expectations for context and terms was accepted.")

    def test_the_published_ref_hook_answers_only_for_its_own_destination(
            self, destination_host: Any, destinations: list[Any]) -> None:
        from hostcore.export.ref import DEFAULT_STREAM

        host = destination_host

        class Elsewhere:
            name = "conformance-elsewhere"
            key = "conformance:elsewhere"

        for destination in destinations:
            self._push(destination, self._batch(export_rows(1, 2)))
        foreign = host.hook.hostcore_published_ref(stream=DEFAULT_STREAM, host=host,
                                                   destination=Elsewhere())
        require(foreign is None,
                f"hostcore_published_ref answered {foreign!r} for a destination that is not "
                "the plugin's; return None unless `destination` is yours, or `hostcore "
                "status` shows your position as another destination's.")
        for destination in destinations:
            answer = host.hook.hostcore_published_ref(stream=DEFAULT_STREAM, host=host,
                                                      destination=destination)
            expected = self._published(destination, DEFAULT_STREAM, host.store.instance_id)
            require(answer is None or answer == expected,
                    f"destination {destination.name!r}: hostcore_published_ref answered "
                    f"{answer!r}, published() {expected!r}; they must agree.")

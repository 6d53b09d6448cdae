"""Heartbeat writers: publish only with a current generation witness, under custody.

A *witness* is the generation id the writer captured when it last looked (a
session's :attr:`~hostcore_file_custody.registry.Session.generation_id`). A
publication is refused when the witness is missing (materialise or repair
first), when the generation record names another generation (it was replaced),
when that generation has ended, or when the heartbeat cache shows another
generation. Custody is reentrant, so a nested call in the same thread can
replace the generation in the middle of a publication: the live-coordination
writer therefore checks again after its projection, just before its rename.
"""

from __future__ import annotations

from collections.abc import Callable

from hostcore.errors import RecordError
from hostcore_file_custody.errors import WitnessError
from hostcore_file_custody.registry import Heartbeat, HeartbeatRegistry


def check_witness(registry: HeartbeatRegistry, instance: str,
                  witness: str | None) -> Heartbeat | None:
    """Raise :class:`WitnessError` unless ``witness`` is the live current generation.

    Returns the current heartbeat cache (``None`` when absent, to be materialised).
    """
    where = registry.generation_path(instance)
    if witness is None:
        raise WitnessError(f"{instance}: no generation witness; repair or materialise first",
                           "missing")
    try:
        record = registry.read_generation(instance)
    except RecordError as exc:
        raise WitnessError(f"{exc}; repair first", "unrecorded") from None
    if record is None:
        raise WitnessError(f"{where}: no generation record; repair first", "unrecorded")
    if record.generation_id != witness:
        raise WitnessError(f"{where}: generation {witness} was replaced", "stale")
    if record.status != "live":
        raise WitnessError(f"{where}: generation {witness} is {record.status}", "ended")
    try:
        current = registry.read_heartbeat(instance)
    except RecordError:
        return None  # a corrupt cache is rebuilt from the witnessed generation
    if current is not None and current.generation_id != witness:
        raise WitnessError(f"{registry.heartbeat_path(instance)}: the cache holds another "
                           "generation", "stale")
    return current


class HeartbeatWriter:
    """Publishes heartbeat mutations by atomic rename, under the instance's custody."""

    def __init__(self, registry: HeartbeatRegistry) -> None:
        self.registry = registry

    def publish(self, instance: str, witness: str | None,
                mutate: Callable[[Heartbeat | None], Heartbeat]) -> Heartbeat:
        """Apply ``mutate`` to the current heartbeat and publish the result."""
        with self.registry.with_generation_custody(instance):
            current = check_witness(self.registry, instance, witness)
            heartbeat = mutate(current)
            _check_output(heartbeat, instance, witness)
            self.registry.write_heartbeat(heartbeat)
            return heartbeat


class LiveCoordinationWriter:
    """Publishes a projection of the heartbeat, checking the witness again after projecting."""

    def __init__(self, registry: HeartbeatRegistry) -> None:
        self.registry = registry

    def publish(self, instance: str, witness: str | None,
                project: Callable[[Heartbeat | None], Heartbeat]) -> Heartbeat:
        with self.registry.with_generation_custody(instance):
            current = check_witness(self.registry, instance, witness)
            heartbeat = project(current)
            # The projection may have run nested work that replaced the generation.
            check_witness(self.registry, instance, witness)
            _check_output(heartbeat, instance, witness)
            self.registry.write_heartbeat(heartbeat)
            return heartbeat


def _check_output(heartbeat: Heartbeat, instance: str, witness: str | None) -> None:
    if heartbeat.instance != instance or heartbeat.generation_id != witness:
        raise WitnessError(f"{instance}: a writer produced a heartbeat for another instance "
                           "or generation", "stale")

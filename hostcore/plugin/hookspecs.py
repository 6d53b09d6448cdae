"""Every hook hostcore calls. Each docstring is that hook's documentation.

Hooks only ever gain arguments; none is renamed or removed. pluggy passes an
implementation only the arguments it names, so an implementation written against
an older release keeps working when a hook gains an argument. Never give a
hookimpl argument a default value to "evolve" it: pluggy does not pass defaults.

Registration hooks (``hostcore_sources`` … ``hostcore_events``) return one object,
an iterable of objects, or ``None``. The host calls them once, when the host is
built, validates what they return (see :mod:`hostcore.plugin.registration`) and reports a bad
object with the plugin's name. They are not a per-row path: the host resolves the
registered objects once and calls them directly afterwards.

The host calls every hook one plugin at a time (:mod:`hostcore.plugin.calls`): an
implementation that raises, or calls ``sys.exit()``, fails its plugin alone (listed
``failed`` with the hook and the error, everything it registered dropped) and the
other plugins' implementations still run; in strict mode it is fatal. What an
implementation prints goes to stderr.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from hostcore.plugin.markers import hookspec

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping
    from pathlib import Path

    import click

    from hostcore.agents.events import AgentEvent
    from hostcore.export.ref import Ref
    from hostcore.host import Host
    from hostcore.plugin.gate import GateVerdict
    from hostcore.plugin.registration import (
        Destination,
        PolicyInput,
        Provider,
        Source,
        TelemetrySink,
        Worker,
    )
    from hostcore.telemetry import EventSpec
    from hostcore.workitems.items import WorkItemEvent


@hookspec
def hostcore_sources(host: Host) -> Source | Iterable[Source] | None:
    """Register evidence sources.

    Each tick the host calls ``source.read(cursor)`` with the cursor it persisted
    for that source (``None`` the first time). ``read`` returns a
    ``hostcore.plugin.SourceBatch`` of new evidence and the cursor to persist with
    it; the host appends the rows and stores the cursor in one transaction, so a
    crash never duplicates or loses a row. Reading the same input twice must add
    nothing. Input that cannot become a row is counted by reason in
    ``SourceBatch.skipped`` (``hostcore status`` shows it per source) and never
    stops the lines after it. A source that raises keeps its cursor and is read
    again next tick; the others still ingest, then the ingest step fails naming
    it, so ``hostcore run --once`` exits 1. Each ``read`` runs on a watched thread
    of its own: one still running past the source's ``deadline_seconds`` (an
    optional positive number, default 60) is left running and counts as a
    failure (``hung``), the source is not read again until it returns, and a
    ``sys.exit()`` in it fails that source alone.

    Example::

        @hookimpl
        def hostcore_sources(host):
            return NotesSource(folder=host.root / "notes")

    .. versionadded:: 0.1
    """


@hookspec
def hostcore_providers(host: Host) -> Provider | Iterable[Provider] | None:
    """Register work-item providers (issue and pull-request trackers).

    A provider answers four questions: ``owns(ref)`` (is this item mine),
    ``scope_of(ref)`` (the scope a listing covers, such as ``owner/repo``),
    ``list_items()`` (a complete, failed, interrupted or degraded listing per
    scope, never a truncated list called complete) and ``closure(ref)`` (closed,
    merged or still open; raises ``hostcore.plugin.ProviderError`` when it
    cannot answer, and nothing else). They run on a watched thread, in a tick and
    in ``hostcore poll`` alike: a cycle past the poll step's deadline is abandoned,
    and a ``sys.exit()`` in them fails it.

    Example::

        @hookimpl
        def hostcore_providers(host):
            return TaskFolderProvider(host.plugin_config("tasks", TasksConfig))

    .. versionadded:: 0.1
    """


@hookspec
def hostcore_policy_inputs(host: Host) -> PolicyInput | Iterable[PolicyInput] | None:
    """Register inputs to the withholding policy of the export seam.

    ``withholds(directory, source_id)`` returns True to keep rows recorded in that
    directory by that source from leaving the store; a row is withheld if any
    input withholds it. ``fingerprint_part()`` returns a short digest of the
    input's current state, or ``None`` when the input cannot be enumerated
    cheaply. It must be cheap (no row reads), stable, change exactly when the
    input's verdicts can change, and contain no path or name.

    Example::

        @hookimpl
        def hostcore_policy_inputs(host):
            return WithholdTmp()   # withholds("/tmp/x", "codex") -> True

    .. versionadded:: 0.1
    """


@hookspec
def hostcore_telemetry_sinks(host: Host) -> TelemetrySink | Iterable[TelemetrySink] | None:
    """Register telemetry sinks.

    ``sink.receive(event)`` is called for every catalogued event with a
    ``hostcore.telemetry.Event``; its attributes are counts, booleans and enums
    only. A sink that raises is counted and logged once; it never fails the
    step that emitted. ``close()``, if defined, is called when the host closes.

    Example::

        @hookimpl
        def hostcore_telemetry_sinks(host):
            return PrintSink()     # receive(event): print(event.name)

    .. versionadded:: 0.1
    """


@hookspec
def hostcore_workers(host: Host) -> Worker | Iterable[Worker] | None:
    """Register workers, run once per tick.

    ``worker.run(host)`` does a bounded slice of work and returns a
    ``hostcore.plugin.registration.WorkerResult``; ``pending=True`` tells the tick loop more
    work is ready now, so the next tick comes at the backlog cadence instead of a
    full interval. Workers run in ascending ``order`` (an optional int attribute,
    default 100), each as its own step: an exception fails that step only and is
    reported with the worker's name. Each step runs on a thread of its own: one still
    running past the worker's ``deadline_seconds`` (an optional positive number,
    default 600), or 5 s after a stop request (``host.stop``), is abandoned and fails,
    and so does one that calls ``sys.exit()``. A step that fails after part of its work
    raises ``hostcore.plugin.StepFailed(counts) from error`` (since 0.2.3), so the
    tick reports ``error`` with what the step did. A worker must be resumable: it may be
    killed at any point and run again.

    Example::

        @hookimpl
        def hostcore_workers(host):
            return Compactor()     # run(host) -> WorkerResult(pending=False)

    .. versionadded:: 0.1
    """


@hookspec
def hostcore_destinations(host: Host) -> Destination | Iterable[Destination] | None:
    """Register export destinations: places the export stream is pushed to.

    ``push(batch)`` appends the rows the export seam permitted past the
    destination's position and returns the ``hostcore.export.ref.Ref`` it publishes
    afterwards; ``published(stream, origin)`` returns that ref without writing.
    See ``hostcore.plugin.registration.Destination`` for the contract and ``hostcore.export``
    for the batch shape and resumability. Pushes run on a watched thread, in a tick
    and in ``hostcore export`` alike: with no batch pushed for the export step's
    deadline, the run is abandoned; a ``sys.exit()`` in them fails it.

    Example::

        @hookimpl
        def hostcore_destinations(host):
            return DirectoryDestination(host.root / "outbox")

    .. versionadded:: 0.1
    """


@hookspec
def hostcore_events() -> EventSpec | Iterable[EventSpec] | None:
    """Add events to the telemetry catalog.

    A plugin that emits events must catalogue them here first; emitting an
    uncatalogued event raises. Names are dotted (``capture.revalidation_started``)
    and unique across plugins.

    Example::

        @hookimpl
        def hostcore_events():
            return EventSpec("notes.read", {"files": int, "ok": bool})

    .. versionadded:: 0.1
    """


@hookspec
def hostcore_commands(cli: click.Group) -> None:
    """Add subcommands to the ``hostcore`` command line.

    Called once while the CLI is built, and by ``hostcore plugins`` to check it
    works. Use ``hostcore.plugin.cli.pass_host`` to get the
    :class:`~hostcore.host.Host` the command runs against. Return nothing.

    Each plugin's implementation is called on its own, built-ins first. One that
    raises fails its plugin, and the commands it added before raising are taken
    back; every other command works. A command under a name hostcore or an
    earlier plugin already uses is refused, with a warning naming the plugin; the
    plugin's other commands stay. Keep the command's code in a module of its own
    and import it inside the hookimpl: the hook runs on every ``--help``.
    ``hostcore.testing.CommandConformance`` checks all of this.

    Example::

        @hookimpl
        def hostcore_commands(cli):
            @cli.command()
            @pass_host
            def notes(host):
                \"\"\"Show how many notes were ingested.\"\"\"

    .. versionadded:: 0.1
    """


@hookspec
def hostcore_work_item_event(event: WorkItemEvent, host: Host) -> None:
    """React to a work item that opened, changed, was commented on or closed.

    ``event`` is a ``hostcore.plugin.WorkItemEvent``. Every implementation is
    called; return values are ignored. An implementation that raises is logged and
    does not stop the poller.

    Example::

        @hookimpl
        def hostcore_work_item_event(event):
            if event.kind == "closed":
                notify(event.ref)

    .. versionadded:: 0.1
    """


@hookspec(firstresult=True)
def hostcore_published_ref(stream: str, host: Host, destination: Destination
                           ) -> Ref | None:
    """Return the ``hostcore.export.ref.Ref`` ``destination`` publishes for ``stream``.

    ``destination`` is the registered destination object being asked about (the
    one ``hostcore status`` reports on). Return ``None`` unless it is yours: the
    first non-``None`` result wins, so answering for another plugin's
    destination would show its position and identities as this one's. The ref's
    ``content`` is the position held from this host's store
    (``host.store.instance_id``), its identities the ones published for that
    store. Only contribute the ref: the comparison is made by
    ``hostcore.export.ref.compare`` so every surface agrees on what moved.
    Implementations are asked one at a time, last registered first; one that
    raises fails its plugin and the next is asked (the destination's own
    ``published()`` when none answers).

    Example::

        @hookimpl
        def hostcore_published_ref(stream, host, destination):
            if destination is not my_destination:
                return None
            return my_destination.published(stream, host.store.instance_id)

    ``destination`` was added in 0.2; an implementation that does not take it
    still receives the other arguments, and should now take it.

    .. versionadded:: 0.1
    """


@hookspec
def hostcore_agent_event(event: AgentEvent, host: Host) -> None:
    """React to an event of a coding agent's session (Claude Code, Codex).

    ``hostcore hook``, which ``hostcore hooks install`` makes each agent run at
    SessionStart, UserPromptSubmit, PreToolUse, PostToolUse, Stop and
    SessionEnd, calls it once per event with a ``hostcore.agents.events.AgentEvent``:
    the agent, the event name, the session id, transcript path and working folder,
    a tool's name and id, and the files a file-writing tool wrote (``written``);
    never the prompt, the rest of a tool's input, or its output. Return
    ``None``; what is printed goes to stderr (stdout is the agent's). Check
    ``event.agent`` and ``event.name`` and return at once for events that are not
    yours: the hook runs on every tool call. Finish within
    ``event.budget_seconds`` (SessionEnd's is under a second) and leave the rest
    to a worker's next tick. An implementation that raises fails its plugin for
    that run only, the other plugins' still run, and the fault is counted in
    ``hostcore status``; the agent is never blocked by it.

    The hook loads only plugins implementing this hook (found once and cached
    under the root, see ``hostcore.agents.index``), and the host it passes has
    them alone: ``host.sources`` holds their sources, not every plugin's.
    ``hostcore.testing.AgentEventConformance`` checks an implementation.

    Example::

        @hookimpl
        def hostcore_agent_event(event, host):
            if event.agent == "claude-code" and event.name == "Stop":
                ingest_now(host, event.transcript_path, event.budget_seconds)

    .. versionadded:: 0.2.5
    """


@hookspec
def hostcore_agent_gate(event: AgentEvent, host: Host) -> GateVerdict | None:
    """Enforce a rule in a coding agent's loop: the one hook that can ask the agent
    to keep working.

    ``hostcore hook`` calls it for every event (or those it declares with
    ``hostcore.plugin.interest.agent_interest``), after every plugin's
    ``hostcore_agent_event`` (so a Stop's transcript is stored first), with the same
    event and host. Return ``None``, or a ``hostcore.plugin.gate.GateVerdict``: at a
    Stop, its ``keep_working`` message makes the hook exit 2 with the messages of
    every gate that set one on stderr, which Claude Code and Codex feed back to
    the model, and the agent continues instead of stopping; at any other event
    it is ignored. A Stop whose ``stop_hook_active`` is true (the agent is already
    continuing because of a Stop hook) is never gated, so a gate cannot hold an
    agent in a loop. ``faults`` names the kinds of items the gate skipped, each
    counted in ``hostcore status``. An implementation that raises is a fault of
    its own, counted, and the hook exits 0: a gate that cannot judge never
    blocks. Keep enforcing here and reporting elsewhere (``status``, a command).

    The built-in staleness gate (``hostcore.governance.hook``) stamps the files a
    PostToolUse wrote and, at Stop, names those of the session whose governance
    moved since.

    Example::

        @hookimpl
        def hostcore_agent_gate(event, host):
            if event.name == "Stop" and unreviewed(host, event.session_id):
                return GateVerdict(keep_working="Review src/a.py before stopping.")
            return None

    .. versionadded:: 0.2.6
    """


@hookspec
def hostcore_governance_inputs(target_dir: Path, repo_root: Path, host: Host
                               ) -> Mapping[str, Mapping[str, str] | None] | None:
    """Contribute governing inputs at one folder of a repository, for the staleness gate.

    ``hostcore stamp``, ``check`` and ``approve`` ask every implementation once per
    folder on the way from the repository's root (``repo_root``, the folder holding
    ``.git``) down to each target's folder, ``target_dir`` (absolute; the root
    itself first). Return ``None``, or a mapping of governance components
    (``context``, ``terms``, ``decisions``) to the members you vouch for *in that
    folder*: ``{member name: digest}`` of text, no NUL or newline, each digest at
    most 256 characters. A target is governed by the members of every folder on its
    path, so a folder's own override counts for what is below it and a sibling's
    never does; say a repository-wide input once, when ``target_dir == repo_root``.
    Map a component to ``None`` when its input cannot be read now: the component is
    then unknown, never current, in that folder and below it. The gate folds each
    component's members with ``hostcore.export.ref.fold`` (a third party's member
    names prefixed with its plugin's name) and compares through
    ``hostcore.export.ref.compare``, so a member that changes moves its component
    and every target stamped under it goes stale. ``decisions`` members are keyed
    by work-item ref: a target counts only its own item's. Be quick: a check of
    10,000 files in 1,000 folders calls it about a thousand times. One that raises
    or returns something else fails its plugin; the gate still answers, and the
    components it had vouched for are unknown.

    Example::

        @hookimpl
        def hostcore_governance_inputs(target_dir, repo_root, host):
            if target_dir != repo_root:
                return None
            return {"terms": {"style": digest_of(repo_root / "STYLE.md")}}

    .. versionadded:: 0.2.6
    """

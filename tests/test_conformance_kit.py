"""The conformance kit: good plugins pass it as an author would run it; broken ones
fail it with a message that names the object, the contract and the fix."""

from __future__ import annotations

import hashlib
import json
import textwrap
from pathlib import Path

import pytest

from hostcore import hookimpl
from hostcore.evidence.store import EvidenceRow, SourceBatch
from hostcore.plugin.registration import WorkerResult
from hostcore.testing import (
    PolicyInputConformance,
    ProviderConformance,
    SourceConformance,
    TelemetrySinkConformance,
    WorkerConformance,
)
from hostcore.workitems.items import (
    Closure,
    Listing,
    ProviderError,
    ScopeListing,
    WorkItem,
    WorkItemRef,
)

pytest_plugins = ["pytester"]

INBOX_BATCH = 3


class InboxWorker:
    """Moves up to INBOX_BATCH files from inbox/ to done/ per run; progress lives on disk."""

    name = "inbox"
    order = 50

    def __init__(self, folder: Path) -> None:
        self.inbox = folder / "inbox"
        self.done = folder / "done"

    def run(self, host):
        self.done.mkdir(parents=True, exist_ok=True)
        waiting = sorted(self.inbox.glob("*")) if self.inbox.exists() else []
        for path in waiting[:INBOX_BATCH]:
            path.rename(self.done / path.name)
        return WorkerResult(pending=len(waiting) > INBOX_BATCH,
                            counts={"moved": min(len(waiting), INBOX_BATCH)})


class InboxPlugin:
    @hookimpl
    def hostcore_workers(self, host):
        return InboxWorker(host.state_dir("inbox"))


def seed_inbox(host, files: int = 10) -> None:
    inbox = host.state_dir("inbox") / "inbox"
    inbox.mkdir(parents=True, exist_ok=True)
    for i in range(files):
        (inbox / f"item-{i:03}").write_text("x")


class TestAWorkerWithABacklogPassesTheKit(WorkerConformance):
    @pytest.fixture
    def plugin(self):
        return InboxPlugin()

    @pytest.fixture
    def seed_work(self):
        return seed_inbox


class CountingSink:
    name = "counting"

    def __init__(self) -> None:
        self.counts: dict[str, int] = {}

    def receive(self, event) -> None:
        self.counts[event.name] = self.counts.get(event.name, 0) + 1

    def close(self) -> None:
        self.counts.clear()


class CountingSinkPlugin:
    @hookimpl
    def hostcore_telemetry_sinks(self, host):
        return CountingSink()


class TestACountingSinkPassesTheKit(TelemetrySinkConformance):
    @pytest.fixture
    def plugin(self):
        return CountingSinkPlugin()


class ListedDirectories:
    """Withholds the directories listed (one per line) in its state file."""

    name = "listed"

    def __init__(self, path: Path) -> None:
        self.path = path

    def _listed(self) -> list[str]:
        return self.path.read_text().splitlines() if self.path.exists() else []

    def withholds(self, directory: str, source_id: str) -> bool:
        return any(directory == d or directory.startswith(d + "/") for d in self._listed())

    def fingerprint_part(self) -> str | None:
        text = "\n".join(sorted(self._listed()))
        return hashlib.sha256(text.encode()).hexdigest()[:16]


class ListedPlugin:
    @hookimpl
    def hostcore_policy_inputs(self, host):
        return ListedDirectories(host.state_dir("listed") / "withheld.txt")


SAMPLE = ("/home/someone/projects/secret-client", "/srv/work/payroll-service")


class TestAListPolicyInputPassesTheKit(PolicyInputConformance):
    @pytest.fixture
    def plugin(self):
        return ListedPlugin()

    @pytest.fixture
    def sample_directories(self):
        return SAMPLE

    @pytest.fixture
    def change_policy(self):
        def withhold_first(host):
            (host.state_dir("listed") / "withheld.txt").write_text(SAMPLE[0] + "\n")

        return withhold_first


class StateFileProvider:
    """Items in one JSON file {"local#1": "open", ...}; scope "local"."""

    name = "statefile"

    def __init__(self, path: Path) -> None:
        self.path = path

    def _states(self) -> dict[str, str]:
        try:
            return json.loads(self.path.read_text())
        except (OSError, ValueError) as exc:
            raise ProviderError(f"cannot read the task file: {exc}") from None

    def owns(self, ref: WorkItemRef) -> bool:
        return ref.ref.startswith("local#")

    def scope_of(self, ref: WorkItemRef) -> str:
        return "local"

    def list_items(self) -> Listing:
        try:
            states = self._states()
        except ProviderError as exc:
            return Listing((ScopeListing(scope="local", status="failed", reason=str(exc)),))
        items = tuple(WorkItem(ref=WorkItemRef(ref)) for ref, state in sorted(states.items())
                      if state == "open")
        return Listing((ScopeListing(scope="local", status="complete", items=items),))

    def closure(self, ref: WorkItemRef) -> Closure:
        state = self._states().get(ref.ref)
        if state is None:
            raise ProviderError(f"{ref.ref}: no such item", ref=ref.ref)
        return Closure(state=state)


class StateFilePlugin:
    @hookimpl
    def hostcore_providers(self, host):
        return StateFileProvider(host.state_dir("statefile") / "items.json")


class TestAStateFileProviderPassesTheKit(ProviderConformance):
    @pytest.fixture
    def plugin(self):
        return StateFilePlugin()

    @pytest.fixture
    def seed_items(self):
        def seed(host):
            (host.state_dir("statefile") / "items.json").write_text(
                json.dumps({"local#1": "open", "local#2": "closed", "local#3": "open"}))
        return seed

    @pytest.fixture
    def break_backend(self):
        return lambda host: (host.state_dir("statefile") / "items.json").unlink()


class JsonLinesSource:
    """One row per JSON line of notes.jsonl; the cursor is the byte offset read to."""

    name = "notes"

    def __init__(self, path: Path) -> None:
        self.path = path
        self.skipped = 0

    def read(self, cursor: str | None) -> SourceBatch:
        offset = int(cursor or 0)
        if not self.path.exists():
            return SourceBatch(rows=[], cursor=cursor)
        with self.path.open("rb") as handle:
            handle.seek(offset)
            data = handle.read()
        rows = []
        for line in data.splitlines(keepends=True):
            if not line.endswith(b"\n"):
                break  # a line still being written: read it next time
            try:
                payload = json.loads(line)
            except ValueError:
                self.skipped += 1
            else:
                rows.append(EvidenceRow(partition="notes", source_id="notes",
                                        payload=payload, key=str(offset)))
            offset += len(line)
        return SourceBatch(rows=rows, cursor=str(offset))


class NotesPlugin:
    @hookimpl
    def hostcore_sources(self, host):
        return JsonLinesSource(host.state_dir("notes") / "notes.jsonl")


def append_note(host, text: bytes) -> None:
    with (host.state_dir("notes") / "notes.jsonl").open("ab") as handle:
        handle.write(text)


class TestAJsonLinesSourcePassesTheKit(SourceConformance):
    @pytest.fixture
    def plugin(self):
        return NotesPlugin()

    @pytest.fixture
    def add_evidence(self):
        return lambda host: append_note(host, b'{"note": "hello"}\n')

    @pytest.fixture
    def add_malformed(self):
        return lambda host: append_note(host, b'{"note": \n')


# -- broken plugins fail, and say why ----------------------------------------------------

HEADER = """
import hashlib, json, time
from pathlib import Path
import pytest
from hostcore import hookimpl
from hostcore.evidence.store import EvidenceRow, SourceBatch
from hostcore.plugin.registration import WorkerResult
from hostcore.workitems.items import (
    Closure, Listing, ProviderError, ScopeListing, WorkItem, WorkItemRef)
from hostcore.testing import (
    DestinationConformance, PolicyInputConformance, ProviderConformance, SourceConformance,
    TelemetrySinkConformance, WorkerConformance)
"""


def says(result, *fragments: str) -> None:
    """Every fragment appears in the inner run's report, in order."""
    text = " ".join(result.stdout.str().split())
    at = 0
    for fragment in fragments:
        found = text.find(fragment, at)
        assert found >= 0, f"{fragment!r} not in the report:\n{result.stdout.str()}"
        at = found + len(fragment)


@pytest.fixture
def run_kit(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch):
    """Run an author's test module (the bodies, after HEADER) in an inner pytest."""
    # Only hostcore's pytest plugin: the other installed ones only slow the inner run.
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")

    def run(*bodies: str):
        source = HEADER + "".join(textwrap.dedent(body) for body in bodies)
        pytester.makepyfile(test_author_plugin=source)
        return pytester.runpytest_inprocess("-q", "-p", "no:cacheprovider",
                                            "-p", "hostcore.testing")

    return run


def test_a_worker_that_is_always_pending_fails_with_the_backlog_explained(run_kit):
    result = run_kit("""
        class Forever:
            name = "forever"
            def run(self, host):
                return WorkerResult(pending=True)

        class Plugin:
            @hookimpl
            def hostcore_workers(self, host):
                return Forever()

        class TestForever(WorkerConformance):
            max_runs_to_drain = 5
            @pytest.fixture
            def plugin(self):
                return Plugin()
    """)
    result.assert_outcomes(passed=3, failed=2)
    says(result, "worker(s) ['forever'] still reported pending=True after 5 runs with no "
                 "new input", "backlog cadence forever")


def test_a_worker_that_returns_a_dict_is_told_what_to_return(run_kit):
    result = run_kit("""
        class Dicty:
            name = "dicty"
            def run(self, host):
                return {"pending": False}

        class Plugin:
            @hookimpl
            def hostcore_workers(self, host):
                return Dicty()

        class TestDicty(WorkerConformance):
            @pytest.fixture
            def plugin(self):
                return Plugin()
    """)
    result.assert_outcomes(passed=1, failed=4)
    says(result, "worker 'dicty': run() returned dict; it must return "
                 "hostcore.plugin.registration.WorkerResult(pending=..., counts={...})")


def test_a_worker_that_keeps_progress_in_memory_fails_the_restart_check(run_kit):
    result = run_kit("""
        class Forgetful:
            name = "forgetful"
            def __init__(self):
                self.left = 5
            def run(self, host):
                self.left -= 1
                return WorkerResult(pending=self.left > 0)

        class Plugin:
            @hookimpl
            def hostcore_workers(self, host):
                return Forgetful()

        class TestForgetful(WorkerConformance):
            max_runs_to_drain = 10
            @pytest.fixture
            def plugin(self):
                return Plugin()
    """)
    result.assert_outcomes(passed=4, failed=1)
    says(result, "TestForgetful.test_a_restarted_host_resumes_and_drains",
         "worker(s) ['forgetful'] still reported pending=True",
         "progress must be kept under the host root, not in memory")


def test_a_plugin_that_registers_nothing_is_told_which_hook_to_implement(run_kit):
    result = run_kit("""
        class Empty:
            @hookimpl
            def hostcore_workers(self, host):
                return None

        class TestEmpty(WorkerConformance):
            @pytest.fixture
            def plugin(self):
                return Empty()
    """)
    result.assert_outcomes(failed=5)
    says(result, "plugin 'Empty' registered no worker: its hostcore_workers hookimpl is "
                 "missing or returned nothing")


def test_a_suite_without_a_plugin_fixture_says_how_to_write_one(run_kit):
    result = run_kit("""
        class TestNoPlugin(WorkerConformance):
            pass
    """)
    result.assert_outcomes(errors=5)
    says(result, "TestNoPlugin needs a `plugin` fixture returning your plugin module or "
                 "object", "def plugin(self):")


def test_a_sink_that_raises_on_an_omitted_attribute_fails_naming_the_event(run_kit):
    result = run_kit("""
        class Fragile:
            name = "fragile"
            def receive(self, event):
                event.attributes["steps"] if event.name == "tick.completed" else None

        class Plugin:
            @hookimpl
            def hostcore_telemetry_sinks(self, host):
                return Fragile()

        class TestFragile(TelemetrySinkConformance):
            @pytest.fixture
            def plugin(self):
                return Plugin()
    """)
    result.assert_outcomes(passed=1, failed=5)
    says(result, "sink 'fragile' raised on event 'tick.completed' with attributes {}",
         "Your code raised:", "KeyError: 'steps'")


def test_a_sink_that_changes_events_is_told_to_copy(run_kit):
    result = run_kit("""
        class Meddler:
            name = "meddler"
            def receive(self, event):
                event.attributes.pop("count", None)

        class Plugin:
            @hookimpl
            def hostcore_telemetry_sinks(self, host):
                return Meddler()

        class TestMeddler(TelemetrySinkConformance):
            @pytest.fixture
            def plugin(self):
                return Plugin()
    """)
    result.assert_outcomes(passed=5, failed=1)
    says(result, "sink 'meddler' changed the attributes of event 'conformance.probe'",
         "copy before you modify")


POLICY_BODY = """
    class Plugin:
        @hookimpl
        def hostcore_policy_inputs(self, host):
            return Input()

    class TestInput(PolicyInputConformance):
        @pytest.fixture
        def plugin(self):
            return Plugin()
"""


def test_a_policy_input_that_puts_paths_in_its_fingerprint_is_told_to_hash(run_kit):
    result = run_kit("""
        class Input:
            name = "leaky"
            listed = ["/home/someone/projects/secret-client"]
            def withholds(self, directory, source_id):
                return directory in self.listed
            def fingerprint_part(self):
                return ",".join(self.listed)
    """, POLICY_BODY)
    result.assert_outcomes(passed=5, failed=1)
    says(result, "policy input 'leaky': fingerprint_part() contains", "secret-client",
         "must never carry a path or a name")


def test_a_policy_input_with_an_unstable_fingerprint_fails_twice(run_kit):
    result = run_kit("""
        class Input:
            name = "clocky"
            def withholds(self, directory, source_id):
                return False
            def fingerprint_part(self):
                return str(time.perf_counter_ns())
    """, POLICY_BODY)
    result.assert_outcomes(passed=3, failed=3)
    says(result, "policy input 'clocky': fingerprint_part() gave", "it must be stable")


def test_a_policy_input_answering_a_non_bool_fails_naming_the_type(run_kit):
    result = run_kit("""
        class Input:
            name = "vague"
            def withholds(self, directory, source_id):
                return None
            def fingerprint_part(self):
                return None
    """, POLICY_BODY)
    result.assert_outcomes(passed=4, failed=2)
    says(result, "policy input 'vague': withholds() returned NoneType; it must return a "
                 "bool.")


def test_a_fingerprint_that_ignores_a_policy_change_fails(run_kit):
    result = run_kit("""
        class Input:
            name = "stuck"
            def __init__(self, path):
                self.path = path
            def withholds(self, directory, source_id):
                return self.path.exists() and directory in self.path.read_text().split()
            def fingerprint_part(self):
                return "v1"

        class Plugin:
            @hookimpl
            def hostcore_policy_inputs(self, host):
                return Input(host.state_dir("stuck") / "list")

        class TestInput(PolicyInputConformance):
            @pytest.fixture
            def plugin(self):
                return Plugin()
            @pytest.fixture
            def change_policy(self):
                def change(host):
                    (host.state_dir("stuck") / "list").write_text("/srv/work/payroll-service")
                return change
    """)
    result.assert_outcomes(passed=5, failed=1)
    says(result, "policy input 'stuck': its verdicts changed but fingerprint_part() "
                 "stayed 'v1'")


PROVIDER_BODY = """
    class Plugin:
        @hookimpl
        def hostcore_providers(self, host):
            return Tasks(host.state_dir("tasks") / "items.json")

    class TestTasks(ProviderConformance):
        @pytest.fixture
        def plugin(self):
            return Plugin()
        @pytest.fixture
        def seed_items(self):
            def seed(host):
                (host.state_dir("tasks") / "items.json").write_text('{"t#1": "open"}')
            return seed
        @pytest.fixture
        def break_backend(self):
            return lambda host: (host.state_dir("tasks") / "items.json").unlink()
"""

PROVIDER_BASE = """
    class Base:
        name = "tasks"
        def __init__(self, path):
            self.path = path
        def owns(self, ref):
            return ref.ref.startswith("t#")
        def scope_of(self, ref):
            return "tasks"
"""


def test_a_provider_returning_a_list_fails_with_the_type_it_must_return(run_kit):
    result = run_kit(PROVIDER_BASE, """
        class Tasks(Base):
            def list_items(self):
                return [{"ref": r} for r in json.loads(self.path.read_text())]
            def closure(self, ref):
                return Closure(state="open")
    """, PROVIDER_BODY)
    result.assert_outcomes(passed=2, failed=4)
    says(result, "provider 'tasks': list_items() returned list; it must return "
                 "hostcore.plugin.Listing(scopes=(ScopeListing(scope=..., "
                 "status='complete', items=(...)), ...)).")


def test_a_provider_raising_the_wrong_error_fails_naming_provider_error(run_kit):
    result = run_kit(PROVIDER_BASE, """
        class Tasks(Base):
            def list_items(self):
                try:
                    states = json.loads(self.path.read_text())
                except OSError as exc:
                    return Listing((ScopeListing(scope="tasks", status="failed",
                                                 reason=str(exc)),))
                items = tuple(WorkItem(ref=WorkItemRef(r)) for r in states)
                return Listing((ScopeListing(scope="tasks", status="complete", items=items),))
            def closure(self, ref):
                return Closure(state=json.loads(self.path.read_text())[ref.ref])
    """, PROVIDER_BODY)
    result.assert_outcomes(passed=5, failed=1)
    says(result, "TestTasks.test_an_unanswerable_closure_raises_provider_error",
         "provider 'tasks': closure('t#1') raised FileNotFoundError; a provider that cannot "
         "answer must raise hostcore.plugin.ProviderError naming the ref (and nothing "
         "else)", "Your code raised:", "FileNotFoundError")


def test_a_provider_calling_a_truncated_listing_complete_fails(run_kit):
    result = run_kit(PROVIDER_BASE, """
        class Tasks(Base):
            def list_items(self):
                states = json.loads(self.path.read_text()) if self.path.exists() else {}
                items = tuple(WorkItem(ref=WorkItemRef(r)) for r in states)
                return Listing((ScopeListing(scope="tasks", status="complete", items=items),))
            def closure(self, ref):
                raise ProviderError("cannot tell", ref=ref.ref)
    """, PROVIDER_BODY)
    result.assert_outcomes(passed=4, failed=2)
    says(result, "provider 'tasks': with its backend broken, scopes ['tasks'] are still "
                 "reported complete")


SOURCE_BODY = """
    class Plugin:
        @hookimpl
        def hostcore_sources(self, host):
            return Lines(host.state_dir("lines") / "in.jsonl")

    def append(host, data):
        with (host.state_dir("lines") / "in.jsonl").open("ab") as handle:
            handle.write(data)

    class TestLines(SourceConformance):
        @pytest.fixture
        def plugin(self):
            return Plugin()
        @pytest.fixture
        def add_evidence(self):
            return lambda host: append(host, b'{"a": 1}\\n')
        @pytest.fixture
        def add_malformed(self):
            return lambda host: append(host, b'not json\\n')
"""


def test_a_source_that_rereads_everything_fails_the_cursor_checks(run_kit):
    result = run_kit("""
        class Lines:
            name = "lines"
            def __init__(self, path):
                self.path = path
            def read(self, cursor):
                lines = self.path.read_bytes().splitlines() if self.path.exists() else []
                rows = [EvidenceRow(partition="lines", source_id="lines",
                                    payload=json.loads(l)) for l in lines if l.startswith(b"{")]
                return SourceBatch(rows=rows, cursor="0")
    """, SOURCE_BODY)
    result.assert_outcomes(passed=1, failed=4)
    says(result, "source 'lines' still returned rows after 1000 reads with no new input")
    says(result, "a second tick over the same input appended rows again")


def test_a_source_that_raises_on_malformed_input_is_told_to_skip_it(run_kit):
    result = run_kit("""
        class Lines:
            name = "lines"
            def __init__(self, path):
                self.path = path
            def read(self, cursor):
                data = self.path.read_bytes()[int(cursor or 0):] if self.path.exists() else b""
                rows = [EvidenceRow(partition="lines", source_id="lines", payload=json.loads(l))
                        for l in data.splitlines()]
                return SourceBatch(rows=rows, cursor=str(int(cursor or 0) + len(data)))
    """, SOURCE_BODY)
    result.assert_outcomes(passed=4, failed=1)
    says(result, "source 'lines': read(", "raised; the host would skip this source every tick",
         "Skip (and count) what you cannot read instead.", "JSONDecodeError")


def test_a_destination_that_appends_a_rerun_again_fails_the_exactly_once_check(run_kit):
    result = run_kit("""
        from hostcore.export.batch import apply_governance
        from hostcore.export.ref import Ref

        class Naive:
            name = "naive"
            def __init__(self, folder):
                self.folder = folder
            def _file(self, stream, origin):
                return self.folder / f"{stream}-{origin}.json"
            def held(self, stream, origin):
                path = self._file(stream, origin)
                return json.loads(path.read_text()) if path.exists() else {"rows": [], "gov": {}}
            def published(self, stream, origin):
                state = self.held(stream, origin)
                return Ref(content=max(state["rows"], default=0), **state["gov"])
            def push(self, batch):
                state = self.held(batch.stream, batch.origin)
                governed = apply_governance(Ref(**state["gov"]), batch)
                state["gov"] = governed.governance()
                state["rows"] += [row.position for row in batch.rows]  # never drops a rerun
                self._file(batch.stream, batch.origin).write_text(json.dumps(state))
                return Ref(content=max(state["rows"], default=0), **state["gov"])

        class Plugin:
            @hookimpl
            def hostcore_destinations(self, host):
                return Naive(host.state_dir("naive"))

        class TestNaive(DestinationConformance):
            @pytest.fixture
            def plugin(self):
                return Plugin()
            @pytest.fixture
            def held_positions(self):
                def read(host, stream, origin):
                    return Naive(host.state_dir("naive")).held(stream, origin)["rows"]
                return read
    """)
    result.assert_outcomes(passed=9, failed=2)
    says(result, "destination 'naive': a push resumed from position 2 while it holds 3 was "
                 "accepted. Call hostcore.export.batch.check_continuity")
    says(result, "destination 'naive': it holds positions [1, 2, 3, 4, 5, 3, 4, 5, 6, 7, 8] "
                 "after pushes of 1..5 and 3..8; rows at or below its position must be "
                 "dropped")

"""What each tool answers, computed from a read-only :class:`~hostcore.host.Host`.

Every answer is read from local state: the status report, the ledger's index,
the export seam and the ref cache. None asks a provider or takes the step lock,
so a tick running beside the server is never held up by it, and none writes.
"""

from __future__ import annotations

import datetime as dt
import os
import sqlite3
import time
from collections import Counter
from collections.abc import Callable
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import msgspec

from hostcore.errors import ConfigError
from hostcore.evidence import usage as usage_report
from hostcore.evidence.prices import UsageSettings, load_prices
from hostcore.evidence.store import STORE_FILE_NAME
from hostcore.export.destinations import select_destination
from hostcore.export.exporter import Exporter
from hostcore.export.ref import Divergence
from hostcore.files import read_report
from hostcore.host import Host
from hostcore.workitems.index import labels_of
from hostcore.workitems.poller import LAST_CYCLE_FILE, PollSummary
from hostcore_mcp.schemas import (
    ComponentState,
    EvidenceAnswer,
    EvidenceGroup,
    FreshnessAnswer,
    ListingAge,
    StatusAnswer,
    UsageAnswer,
    UsageCut,
    WorkItemEntry,
    WorkItemKind,
    WorkItemsAnswer,
    WorkItemState,
)

# The most items one work_items answer holds: an agent pages with ``offset``.
MAX_ITEMS = 1000
# Matches counted at most: a count walks every match, a page only its own rows.
MATCH_COUNT_LIMIT = 10_000
# The name of the policy input that knows each directory's class (hostcore.evidence).
CLASS_LIST_INPUT = "class-list"
UNCLASSIFIED = "unclassified"

# Open items are the index's non-ended entries; entries_unstamped_scope indexes exactly
# those by (scope, absent_since), so filter, order and page all ride one index.
_OPEN = "class != 'ended'"
_ENDED = "class = 'ended'"
_ITEM_COLUMNS = "ref, scope, class, last_polled_at, updated_at, kind, labels"
# The kinds a record can say it is; a record written before kinds were kept says none.
_KINDS: dict[str, WorkItemKind] = {"issue": "issue", "pull_request": "pull_request"}


def status(host: Host) -> StatusAnswer:
    """``hostcore status --json``: the same report, as JSON values."""
    report: dict[str, Any] = msgspec.to_builtins(host.status())
    return StatusAnswer(root=report["root"], components=report["components"],
                        last_tick=report["last_tick"], telemetry=report["telemetry"])


def work_items(host: Host, *, repository: str | None, state: WorkItemState,
               kind: WorkItemKind | None = None, label: str | None = None, limit: int,
               offset: int) -> WorkItemsAnswer:
    """A page of the ledger's items matching the filters, from its index alone."""
    # Filtered by label, the rows come from the index's label table, which holds what
    # the other filters and the order need: the page is one range of its index, and
    # the count reads it alone. Otherwise from the entries and their open-items index.
    table = "entry_labels" if label is not None else "entries"
    where = {"open": _OPEN, "ended": _ENDED, "any": "1"}[state]
    if label is not None:
        where = {"open": "ended = 0", "ended": "ended = 1", "any": "1"}[state]
    args: tuple[Any, ...] = ()
    # Ties in (scope, absent_since) come in the index's own order, which is stable: a
    # third key would make SQLite sort every match to return the first page.
    order = "scope, absent_since"
    if state == "ended" and label is None:
        order = "absent_since, ref"  # entries_class (class, absent_since, ref)
    if label is not None:
        where += " AND label = lower(?)"
        args = (label,)
    if repository is not None:
        where += " AND scope = ?"
        args = (*args, repository)
    if kind is not None:
        where += " AND kind = ?"
        args = (*args, "" if kind == "unknown" else kind)
    # `table`, `where` and `order` are built from the fixed fragments above; values are
    # bound. The page's columns are the entries', joined by slug for a label's rows.
    page_sql = (f"SELECT {_ITEM_COLUMNS} FROM entries WHERE {where} "
                f"ORDER BY {order} LIMIT ? OFFSET ?")
    if label is not None:
        page_sql = (f"SELECT {', '.join(f'e.{c}' for c in _ITEM_COLUMNS.split(', '))} "
                    f"FROM (SELECT slug, scope AS s, absent_since AS a FROM entry_labels "
                    f"WHERE {where} ORDER BY {order} LIMIT ? OFFSET ?) AS l "
                    "JOIN entries AS e ON e.slug = l.slug ORDER BY l.s, l.a")
    count_sql = f"SELECT COUNT(*) FROM (SELECT 1 FROM {table} WHERE {where} LIMIT ?)"

    def query(db: sqlite3.Connection) -> tuple[list[WorkItemEntry], int]:
        rows = db.execute(page_sql, (*args, min(limit, MAX_ITEMS), offset)).fetchall()
        matched = db.execute(count_sql, (*args, MATCH_COUNT_LIMIT)).fetchone()[0]
        return [_entry(*row) for row in rows], int(matched)

    items, matched = host.ledger.index.read(query)
    return WorkItemsAnswer(items=items, matched=matched,
                           matched_capped=matched >= MATCH_COUNT_LIMIT, offset=offset,
                           listing=last_listing(host))


def _entry(ref: str, scope: str, class_: str, last_polled_at: str, updated_at: str,
           kind: str, labels: str) -> WorkItemEntry:
    return WorkItemEntry(ref=ref, repository=scope,
                         state="ended" if class_ == "ended" else "open",
                         kind=_KINDS.get(kind, "unknown"),
                         labels=labels_of(labels), tracking=class_,
                         last_listed_at=last_polled_at, updated_at=updated_at)


def last_listing(host: Host) -> ListingAge:
    """When the last poll cycle on record ran, and whether it listed everything."""
    path = host.ledger.directory / LAST_CYCLE_FILE
    summaries = read_report(path, list[PollSummary])
    try:
        kept = os.stat(path).st_mtime
    except OSError:
        summaries = None
    if not summaries:
        return ListingAge(age_seconds=None, complete=False, providers={})
    providers = {s.provider: s.listing for s in summaries if s.configured}
    return ListingAge(age_seconds=max(0, int(time.time() - kept)),
                      complete=bool(providers) and all(v == "complete"
                                                       for v in providers.values()),
                      providers=providers)


def evidence_summary(host: Host, *, partition: str | None) -> EvidenceAnswer:
    """Counts of the rows the policy permits, every one read through the export seam.

    The seam keeps back each withheld row before it reaches this loop, so no count
    here can include one, whatever the policy did since the rows were stored.
    """
    if not (host.root / STORE_FILE_NAME).exists():
        # Nothing ingested yet: a read-only host creates no store to read.
        return EvidenceAnswer(rows=0, by_source={}, by_directory_class={}, by_day={},
                              groups=[])
    class_of = _class_lookup(host)
    classes: dict[str, str] = {}
    groups: Counter[tuple[str, str, str]] = Counter()
    for _, source, directory, ts in host.seam.read_rows_since_sync(
            partition, 0, ("source_id", "directory", "ts")):
        class_ = classes.get(directory)
        if class_ is None:
            class_ = classes[directory] = class_of(directory)
        groups[(source, class_, _day(ts))] += 1
    by_source: Counter[str] = Counter()
    by_class: Counter[str] = Counter()
    by_day: Counter[str] = Counter()
    for (source, class_, day), count in groups.items():
        by_source[source] += count
        by_class[class_] += count
        by_day[day] += count
    return EvidenceAnswer(
        rows=sum(groups.values()), by_source=dict(sorted(by_source.items())),
        by_directory_class=dict(sorted(by_class.items())), by_day=dict(sorted(by_day.items())),
        groups=[EvidenceGroup(source=s, directory_class=c, day=d, rows=n)
                for (s, c, d), n in sorted(groups.items())])


def _class_lookup(host: Host) -> Callable[[str], str]:
    """``directory -> class`` from the class-per-entry list, when it is registered."""
    for found in host.policy_inputs:
        class_of = getattr(found, "class_of", None)
        if found.name == CLASS_LIST_INPUT and callable(class_of):
            return lambda directory: str(class_of(directory) or UNCLASSIFIED)
    return lambda directory: UNCLASSIFIED


def _day(ts: str) -> str:
    # Stored times are canonical UTC text (YYYY-MM-DDT...) when they parsed at ingest.
    day = ts[:10]
    if len(day) == 10 and day[4] == "-" and day[7] == "-" and day.replace("-", "").isdigit():
        return day
    return "unknown"


def freshness(host: Host) -> FreshnessAnswer:
    """This host's ref against its destination's, as ``hostcore status`` compares them."""
    try:
        destination = select_destination(host)
    except ConfigError as exc:
        return FreshnessAnswer(available=False, reason=str(exc), destination=None,
                               stream="main", position=0, rows_behind=0,
                               rows_behind_capped=False, governance=[],
                               moved_at_destination=[], since_last_push=[],
                               moved_since_last_push=[], conflicts=[])
    report = Exporter(host, destination).report()
    return FreshnessAnswer(
        available=True, reason=None, destination=report.destination, stream=report.stream,
        position=report.position, rows_behind=report.rows_behind,
        rows_behind_capped=report.rows_behind_capped,
        governance=_states(report.governance),
        moved_at_destination=report.governance.moved(),
        since_last_push=_states(report.since_last_push),
        moved_since_last_push=report.since_last_push.moved(),
        conflicts=[c.component for c in report.conflicts])


def _states(divergence: Divergence) -> list[ComponentState]:
    return [ComponentState(component=d.component, status=str(d.status), local=d.local,
                           remote=d.remote) for d in divergence.diffs()]


class UsageWindow(msgspec.Struct, frozen=True):
    """The days and zone a usage report covers, as ``hostcore usage`` takes them."""

    since: dt.date | None
    until: dt.date | None
    zone: ZoneInfo | None


def usage_window(since: str | None, until: str | None, tz: str | None) -> UsageWindow:
    """The tool's text arguments as a window; ValueError naming the one that is not."""
    zone = None
    if tz is not None:
        try:
            zone = ZoneInfo(tz)
        except (ZoneInfoNotFoundError, ValueError):
            raise ValueError(f"tz {tz!r}: not a time zone this machine knows (an IANA "
                             "name such as Europe/Paris)") from None
    return UsageWindow(_usage_day("since", since), _usage_day("until", until), zone)


def _usage_day(name: str, text: str | None) -> dt.date | None:
    if text is None:
        return None
    for layout in ("%Y-%m-%d", "%Y%m%d"):
        try:
            return dt.datetime.strptime(text, layout).date()
        except ValueError:
            continue
    raise ValueError(f"{name} {text!r}: expected a day, YYYY-MM-DD")


def usage(host: Host, *, by: UsageCut, window: UsageWindow, source: str | None,
          exportable: bool) -> UsageAnswer:
    """``hostcore usage --json``: the same report function over the same store, prices
    and policy, so the two never disagree."""
    prices = load_prices(host.plugin_config("usage", UsageSettings).prices)
    report = usage_report.read_report(
        host.store.path, prices, by=by, zone=window.zone, since=window.since,
        until=window.until, source=source,
        withheld=host.policy.withheld if exportable else None)
    answer: UsageAnswer = msgspec.to_builtins(report)
    return answer

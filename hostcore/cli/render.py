"""The text of ``hostcore status``: one screen, as wide as the terminal.

:func:`status_lines` turns the report :meth:`~hostcore.host.Host.status` returns
(the ``--json`` document) into lines no wider than the width asked for: one line
per component with its state, and under one that is not ok the reason and the
command that fixes it; then the last tick, one line per step. Values read as a
person writes them (``yes``, ``-``), never as Python's reprs (``True``, ``None``);
zeros and empty tables are left out, since a screen of zeros hides the one count
that is not.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from hostcore.plugin.terminal import fit

# A painter: (text, state) -> text, coloured for the state or left as it is.
Paint = Callable[[str, str], str]
# Lines of the reason under a component that is not ok; the rest is cut.
REASON_LINES = 2
# Keys of a component's entry the state line already says.
_STATE_KEYS = frozenset(("available", "reason", "error"))
_KIND_LABELS = {"policy_input": "policy", "telemetry_sink": "telemetry", "destination": "dest"}


def plain(text: str, state: str) -> str:
    return text


def value_text(value: Any, *, every: bool = False) -> str:
    """One value as a person reads it (``every``: a table's zeros too)."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return f"{value:,.1f}"
    if isinstance(value, Mapping):
        inner = counts_text(value, every=every)
        return f"({inner})" if inner != "-" else "-"
    if isinstance(value, list | tuple):
        return str(len(value))
    return str(value)


def _worth_showing(value: Any) -> bool:
    if isinstance(value, Mapping):
        return any(_worth_showing(v) for v in value.values())
    return value not in (None, False, 0, "", [], ())


def counts_text(entry: Mapping[str, Any], *, every: bool = False) -> str:
    """``key value`` pairs of what is not zero, empty or off (``every``: all of them);
    ``-`` when nothing is."""
    shown = [f"{key} {value_text(value, every=every)}" for key, value in entry.items()
             if (every or key not in _STATE_KEYS) and (every or _worth_showing(value))]
    return ", ".join(shown) or "-"


def component_state(entry: Mapping[str, Any]) -> str:
    if entry.get("error"):
        return "error"
    return "ok" if entry.get("available", True) else "unavailable"


def fix_for(kind: str, state: str) -> str | None:
    """The command that shows, or mends, what keeps a component from working
    (``None``: an unavailable component, whose reason names the setting to add)."""
    if state == "error":
        return "hostcore -vv status"
    if state == "failed":
        return "hostcore -v run --once"
    return None


def _wrapped(text: str, width: int, indent: int, lines: int) -> Iterator[str]:
    """``text`` over at most ``lines`` lines of ``width``, the first one following
    ``indent`` columns already written, the others indented as much."""
    room = max(10, width - indent)
    words = text.split()
    line = ""
    for at, word in enumerate(words):
        if line and len(line) + 1 + len(word) > room:
            if lines == 1:
                yield fit(" ".join([line, *words[at:]]), room)
                return
            yield line
            lines -= 1
            line = word
        else:
            line = f"{line} {word}" if line else word
    if line:
        yield fit(line, room)


def component_lines(report: Mapping[str, Any], width: int, paint: Paint = plain
                    ) -> Iterator[str]:
    components: Mapping[str, Mapping[str, Mapping[str, Any]]] = report["components"]
    rows = [(_KIND_LABELS.get(kind, kind), kind, name, entry)
            for kind, section in components.items() for name, entry in section.items()]
    label = max((len(f"{k} {n}") for k, _, n, _ in rows), default=10)
    state_width = len("unavailable")
    indent = label + 2 + state_width + 2
    # A source's own entry says whether it can run; whether its last reads failed is
    # kept by the ingest worker, per source (failures in a row, 0 once one succeeds).
    health = components.get("worker", {}).get("ingest", {}).get("sources", {})
    unavailable = 0
    for shown_kind, kind, name, entry in rows:
        state = component_state(entry)
        failing = health.get(name, {}) if kind == "source" else {}
        if state == "ok" and failing.get("failures"):
            state = "failed"
            entry = {**entry, "reason": f"{failing.get('last_error') or 'failed'} "
                                        f"({failing['failures']} in a row)"}
        unavailable += state == "unavailable"
        detail = counts_text(entry) if state == "ok" else str(
            entry.get("error") or entry.get("reason") or "-")
        fix = fix_for(kind, state)
        if fix:
            detail = f"{detail} (fix: {fix})"
        head = f"{f'{shown_kind} {name}':<{label}}  "
        parts = list(_wrapped(detail, width, indent, 1 if state == "ok" else REASON_LINES))
        state_cell = paint(state, state) + " " * (state_width - len(state))
        yield fit(head, width) + state_cell + "  " + parts[0]
        for more in parts[1:]:
            yield " " * indent + more
    if unavailable:
        yield fit(f"{unavailable} unavailable: set what each names in the config "
                  "(`hostcore config` shows it)", width)


def tick_lines(report: Mapping[str, Any], width: int, paint: Paint = plain) -> Iterator[str]:
    last = report.get("last_tick")
    if last is None:
        yield fit("last tick: none yet; fix: hostcore run --once", width)
        return
    state = "ok" if last["ok"] else "failed"
    pending = ", work pending" if last["pending"] else ""
    line = fit(f"last tick: {state}, {age_text(last['age_seconds'])} ago, "
               f"{last['duration_ms']:,} ms{pending}", width)
    yield line.replace(state, paint(state, state), 1)
    steps: Mapping[str, Mapping[str, Any]] = last["steps"]
    label = max((len(n) for n in steps), default=4)
    for name, step in steps.items():
        step_state = "failed" if not step["ok"] else "skipped" if step["skipped"] else "ok"
        counts = {k: v for k, v in step.items() if k not in ("ok", "skipped", "error")}
        detail = str(step.get("error") or "") if step_state == "failed" else counts_text(counts)
        text = fit(f"  {name:<{label}}  {step_state:<7}  {detail}", width)
        yield text.replace(f"  {step_state}", f"  {paint(step_state, step_state)}", 1)
        if step_state == "failed":
            yield fit(f"    fix: {fix_for('step', step_state)}", width)


def age_text(seconds: int) -> str:
    for unit, size in (("d", 86_400), ("h", 3_600), ("min", 60)):
        if seconds >= size:
            return f"{seconds // size} {unit}"
    return f"{seconds} s"


def status_lines(report: Mapping[str, Any], width: int, paint: Paint = plain) -> list[str]:
    """The whole screen: the root, the components, the last tick, sink failures."""
    lines = [fit(f"root: {report['root']}", width)]
    lines.extend(component_lines(report, width, paint))
    lines.extend(tick_lines(report, width, paint))
    failures = report.get("telemetry", {}).get("sink_failures") or {}
    if failures:
        lines.append(fit(f"telemetry sink failures: {counts_text(failures)}", width))
    return lines


def table_lines(rows: Sequence[Sequence[str]], headers: Sequence[str], width: int,
                paint: Paint = plain, state_column: int | None = None) -> list[str]:
    """An aligned table no wider than ``width``: the widest column gives up what
    does not fit (its cells end in an ellipsis). The cells of ``state_column`` are
    painted for their state, after the layout, so colour never shifts a column."""
    cells = [list(headers), *[list(row) for row in rows]]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    over = sum(widths) + 2 * (len(widths) - 1) - width
    if over > 0:
        widest = widths.index(max(widths))
        widths[widest] = max(3, widths[widest] - over)
    lines = []
    for number, row in enumerate(cells):
        texts = [fit(cell, w).ljust(w) for cell, w in zip(row, widths, strict=True)]
        if state_column is not None and number:  # not the header
            cell = texts[state_column]
            texts[state_column] = paint(cell.rstrip(), cell.rstrip()) + cell[len(cell.rstrip()):]
        lines.append(fit("  ".join(texts).rstrip(), width) if state_column is None
                     else "  ".join(texts).rstrip())
    return lines

"""``hostcore usage --html``: the usage reports as one self-contained page.

The page is drawn from the very :class:`~hostcore.evidence.usage.Report` objects
``--json`` prints, one per cut (day, project, session), so a figure on the page
cannot differ from the JSON's. Everything is inline (CSS, SVG charts): no script,
no font, no image and no address of any kind, so the file opens offline and asks
nothing of any server. Each table carries its figures in ``data-*`` attributes too,
exact (integers, and costs as Python's round-tripping ``repr``), so a reader can
check the page against ``--json`` without parsing formatted numbers.

Every value that comes from the store (a model, a directory, a session id) is
escaped, in text and in attributes alike: upstream refuses control characters in
model names, but a directory's name is the user's and may hold anything.
"""

from __future__ import annotations

import html
import re
from collections.abc import Sequence

from hostcore.evidence.usage import Entry, Report, Tokens
from hostcore.evidence.usage_fields import TOKEN_KINDS

__all__ = ["render"]

# Colours of the models, in the order of their names; past the last it starts over.
_PALETTE = ("#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948",
            "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac")
_HEADINGS = {"day": "Per day", "project": "Per project", "session": "Per session",
             "model": "Per model", "machine": "Per machine"}
_KIND_HEADERS = ("Input", "Output", "Cache create", "Cache read")
# Characters HTML cannot carry even as a reference (C0 and C1 controls but tab and
# newline): shown as U+FFFD rather than written into the page.
_UNWRITABLE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")
_CHART_WIDTH = 1100
_BAR_CHART_HEIGHT = 260
_ROW_HEIGHT = 22
# A horizontal chart lists this many entries at most (the largest); the table
# below it lists them all.
_MAX_BARS = 40

_STYLE = """
body { font: 14px/1.4 system-ui, sans-serif; margin: 24px; color: #222; background: #fff; }
h1 { font-size: 22px; margin: 0 0 4px; }
h2 { font-size: 17px; margin: 28px 0 8px; }
p.filters { color: #555; margin: 0 0 12px; }
table { border-collapse: collapse; margin: 8px 0 16px; }
th, td { padding: 2px 8px; border-bottom: 1px solid #e4e4e4; }
td.n, th.n { text-align: right; font-variant-numeric: tabular-nums; }
tr.model td { color: #666; font-size: 12px; }
tr.model td.key { padding-left: 24px; }
tr.total td { font-weight: 600; border-top: 2px solid #999; }
ul.legend { list-style: none; padding: 0; margin: 4px 0; }
ul.legend li { display: inline-block; margin-right: 16px; }
ul.legend span { display: inline-block; width: 12px; height: 12px; margin-right: 4px;
                 vertical-align: -1px; }
svg text { font: 11px system-ui, sans-serif; fill: #333; }
"""


def render(reports: Sequence[Report], *, filters: str, prices_as_of: str) -> str:
    """The page of ``reports``, each a section: a report cut by day gets the columns
    of tokens and of cost, any other the bars; ``filters`` (what the reports were
    limited to) and the prices' date are said at the top."""
    models = sorted({model for report in reports for entry in report.entries
                     for model in entry.models})
    colours = {model: _PALETTE[n % len(_PALETTE)] for n, model in enumerate(models)}
    parts = ["<!DOCTYPE html>", '<html lang="en">', "<head>", '<meta charset="utf-8">',
             "<title>hostcore usage</title>", f"<style>{_STYLE}</style>", "</head>", "<body>",
             "<h1>Agents' usage: tokens and cost</h1>",
             f'<p class="filters">{_text(filters)}; prices as of {_text(prices_as_of)}; '
             "counts only, no prompt or answer.</p>", _legend(models, colours)]
    for report in reports:
        parts.append(f'<section data-by="{_text(report.by)}">')
        parts.append(f"<h2>{_text(_HEADINGS.get(report.by, report.by))}</h2>")
        if report.by == "day":
            parts.append(_columns(report, colours, "tokens"))
            parts.append(_columns(report, colours, "cost"))
        else:
            parts.append(_bars(report, colours))
        parts.append(_table(report))
        parts.append("</section>")
    parts += ["</body>", "</html>", ""]
    return "\n".join(parts)


def _text(value: str) -> str:
    """``value`` escaped for HTML text and for a quoted attribute."""
    return html.escape(_UNWRITABLE.sub("\ufffd", value), quote=True)


def _all_tokens(tokens: Tokens) -> int:
    return (tokens.input_tokens + tokens.output_tokens + tokens.cache_creation_input_tokens
            + tokens.cache_read_input_tokens)


def _cost(tokens: Tokens) -> float:
    return tokens.cost_usd or 0.0


def _shown_cost(cost: float | None) -> str:
    # Under a dollar the cost shows to a hundredth of a cent, as the text table does.
    return "-" if cost is None else f"{cost:,.2f}" if cost >= 1 else f"{cost:.4f}"


def _legend(models: list[str], colours: dict[str, str]) -> str:
    items = "".join(f'<li><span style="background:{colours[m]}"></span>{_text(m)}</li>'
                    for m in models)
    return f'<ul class="legend">{items}</ul>'


def _columns(report: Report, colours: dict[str, str], measure: str) -> str:
    """Days side by side, each a column stacked by model, of tokens or of cost."""
    value = _all_tokens if measure == "tokens" else _cost
    top = max((value(entry) for entry in report.entries), default=0) or 1
    left, bottom, height = 70, 40, _BAR_CHART_HEIGHT
    plot = _CHART_WIDTH - left - 10
    step = plot / max(1, len(report.entries))
    label = "Tokens per day" if measure == "tokens" else "Cost per day (USD)"
    out = [f'<svg role="img" aria-label="{label}, stacked by model" '
           f'width="{_CHART_WIDTH}" height="{height + bottom + 20}" '
           f'viewBox="0 0 {_CHART_WIDTH} {height + bottom + 20}">',
           f'<text x="{left}" y="12">{label}, stacked by model</text>']
    for tick in range(5):
        y = 20 + height - height * tick / 4
        amount = top * tick / 4
        shown = f"{amount:,.0f}" if measure == "tokens" else f"{amount:,.2f}"
        out.append(f'<line x1="{left}" x2="{_CHART_WIDTH - 10}" y1="{y:.1f}" y2="{y:.1f}" '
                   'stroke="#ddd"/>')
        out.append(f'<text x="{left - 4}" y="{y + 4:.1f}" text-anchor="end">{shown}</text>')
    every = max(1, round(len(report.entries) / 15))  # at most 15 day labels fit
    for n, entry in enumerate(report.entries):
        x = left + n * step
        y = 20.0 + height
        for model in sorted(entry.models):
            part = value(entry.models[model])
            if part <= 0:
                continue
            tall = height * part / top
            y -= tall
            out.append(f'<rect x="{x + step * 0.1:.1f}" y="{y:.1f}" width="{step * 0.8:.1f}" '
                       f'height="{tall:.1f}" fill="{colours[model]}">'
                       f"<title>{_text(entry.key)} {_text(model)}: "
                       f"{_tip(entry.models[model], measure)}</title></rect>")
        if n % every == 0:
            out.append(f'<text x="{x + step / 2:.1f}" y="{20 + height + 16}" '
                       f'text-anchor="middle">{_text(entry.key)}</text>')
    out.append("</svg>")
    return "\n".join(out)


def _tip(tokens: Tokens, measure: str) -> str:
    if measure == "tokens":
        return f"{_all_tokens(tokens):,} tokens"
    return f"{_shown_cost(tokens.cost_usd)} USD"


def _bars(report: Report, colours: dict[str, str]) -> str:
    """One horizontal bar of tokens per entry, stacked by model, its cost beside it;
    the largest :data:`_MAX_BARS` only (the table lists every entry)."""
    shown = sorted(report.entries, key=lambda e: (-_all_tokens(e), e.key))[:_MAX_BARS]
    top = max((_all_tokens(entry) for entry in shown), default=0) or 1
    left, right = 330, 170
    plot = _CHART_WIDTH - left - right
    height = _ROW_HEIGHT * len(shown) + 24
    out = [f'<svg role="img" aria-label="Tokens per {_text(report.by)}, stacked by model" '
           f'width="{_CHART_WIDTH}" height="{height}" viewBox="0 0 {_CHART_WIDTH} {height}">',
           f'<text x="0" y="12">Tokens per {_text(report.by)}, stacked by model; '
           "cost on the right</text>"]
    for n, entry in enumerate(shown):
        y = 24 + n * _ROW_HEIGHT
        out.append(f'<text x="{left - 6}" y="{y + 14}" text-anchor="end">'
                   f"{_text(_tail(entry.key))}</text>")
        x = float(left)
        for model in sorted(entry.models):
            part = _all_tokens(entry.models[model])
            if part <= 0:
                continue
            wide = plot * part / top
            out.append(f'<rect x="{x:.1f}" y="{y + 3}" width="{wide:.1f}" '
                       f'height="{_ROW_HEIGHT - 6}" fill="{colours[model]}">'
                       f"<title>{_text(model)}: {part:,} tokens</title></rect>")
            x += wide
        out.append(f'<text x="{x + 6:.1f}" y="{y + 14}">{_all_tokens(entry):,} tokens, '
                   f"{_shown_cost(entry.cost_usd)} USD</text>")
    out.append("</svg>")
    return "\n".join(out)


def _tail(key: str) -> str:
    """A long key's end (a path's last folders, a session id's tail) fits the labels."""
    return key if len(key) <= 48 else "…" + key[-47:]


def _table(report: Report) -> str:
    """Every entry and its models, then the totals, with their exact figures in data-*."""
    head = "".join(f'<th class="n">{h}</th>' for h in (*_KIND_HEADERS, "Cost (USD)"))
    rows = [f'<table class="figures" data-by="{_text(report.by)}">',
            f"<thead><tr><th>{_text(report.by.capitalize())}</th>{head}</tr></thead>",
            "<tbody>"]
    for entry in report.entries:
        rows.append(_row(entry, 'class="entry"', entry.key))
        for model in sorted(entry.models):
            rows.append(_row(entry.models[model],
                             f'class="model" data-entry="{_text(entry.key)}"', model))
    rows.append("</tbody><tfoot>")
    rows.append(_row(report.totals, 'class="total"', "Total"))
    rows.append("</tfoot></table>")
    return "\n".join(rows)


def _row(tokens: Tokens | Entry, attributes: str, key: str) -> str:
    cost = "" if tokens.cost_usd is None else repr(tokens.cost_usd)
    cells = "".join(f'<td class="n" data-kind="{kind}" data-value="{getattr(tokens, kind)}">'
                    f"{getattr(tokens, kind):,}</td>" for kind in TOKEN_KINDS)
    return (f'<tr {attributes} data-key="{_text(key)}" data-cost="{cost}">'
            f'<td class="key">{_text(key)}</td>{cells}'
            f'<td class="n">{_shown_cost(tokens.cost_usd)}</td></tr>')

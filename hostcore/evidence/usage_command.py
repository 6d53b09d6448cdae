"""``hostcore usage``: tokens and cost per day, session, project, model or machine.

A module-level click command (the evidence built-in plugin adds it to the CLI),
kept apart from :mod:`hostcore.evidence.commands` so the report's code loads only
when this command runs.
"""

from __future__ import annotations

import datetime as dt
import shutil
from pathlib import Path
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import click

from hostcore.evidence.prices import UsageSettings, load_prices
from hostcore.evidence.usage import BY, Entry, Report, Tokens, read_report
from hostcore.evidence.usage_html import render
from hostcore.files import atomic_write
from hostcore.host import Host
from hostcore.plugin.cli import emit_json, json_option, pass_host
from hostcore.plugin.terminal import refuse

__all__ = ["usage_command"]

# The narrowest a key column is cut to before the models column is left out.
_MIN_KEY_WIDTH = 12
_HEADERS = ("Input", "Output", "Cache create", "Cache read", "Cost (USD)")
# When even that does not fit: short headings and numbers (1.2M), a narrower key.
_SHORT_HEADERS = ("In", "Out", "CWrite", "CRead", "USD")
_SHORT_MIN_KEY_WIDTH = 8
# The cuts the --html page shows, whatever --by says (its own cut is added when other).
_PAGE_CUTS = ("day", "project", "session")


def _date(ctx: click.Context, param: click.Parameter, value: str | None) -> dt.date | None:
    """Click callback: a day as ``YYYY-MM-DD`` or ``YYYYMMDD``."""
    if value is None:
        return None
    for layout in ("%Y-%m-%d", "%Y%m%d"):
        try:
            return dt.datetime.strptime(value, layout).date()
        except ValueError:
            continue
    raise click.BadParameter(f"{value!r}: expected a day, YYYY-MM-DD")


def _zone(ctx: click.Context, param: click.Parameter, value: str | None) -> ZoneInfo | None:
    """Click callback: an IANA zone; none given means the local zone (``TZ`` honoured)."""
    if value is None:
        return None
    try:
        return ZoneInfo(value)
    except (ZoneInfoNotFoundError, ValueError):
        raise click.BadParameter(f"{value!r}: not a time zone this machine knows "
                                 "(an IANA name such as Europe/Paris)") from None


@click.command("usage")
@click.option("--by", type=click.Choice(BY), default="day", show_default=True,
              help="What each line of the report is.")
@click.option("--since", callback=_date, help="From this day (YYYY-MM-DD, in --tz).")
@click.option("--until", callback=_date, help="To this day, included.")
@click.option("--source", "source_id", help="Only usage of this source id.")
@click.option("--tz", "zone", callback=_zone,
              help="The zone days are cut in (default: the local zone, TZ honoured).")
@click.option("--exportable", is_flag=True,
              help="Only usage the withholding policy lets leave this machine.")
@click.option("--html", "page", type=click.Path(dir_okay=False, path_type=Path),
              help="Also write one self-contained page (inline SVG charts per day, "
                   "project and session; no script) to this file.")
@json_option
@pass_host(read_only=True)
def usage_command(host: Host, by: str, since: dt.date | None, until: dt.date | None,
                  source_id: str | None, zone: ZoneInfo | None, exportable: bool,
                  page: Path | None, as_json: bool) -> None:
    """Show tokens and cost of agents' sessions per day, session, project, model or
    machine, from the evidence store (counts only: no prompt, no answer).

    One API response counts once, however many transcript lines repeat it. Cost
    comes from the price table shipped with hostcore (dated; [plugins.usage.prices]
    in the config replaces or adds a model's prices): a model without a price shows
    its tokens and no cost. Keys of --json: by, entries[].{key, input_tokens,
    output_tokens, cache_creation_input_tokens, cache_read_input_tokens, cost_usd,
    models.<model>.{the same five}}, totals.{the same five}.
    """
    settings = host.plugin_config("usage", UsageSettings)
    prices = load_prices(settings.prices)

    def cut(by: str) -> Report:
        return read_report(host.store.path, prices, by=by, zone=zone, since=since,
                           until=until, source=source_id,
                           withheld=host.policy.withheld if exportable else None)

    report = cut(by)
    if page is not None:
        cuts = [report if name == by else cut(name) for name in _PAGE_CUTS]
        if by not in _PAGE_CUTS:
            cuts.append(report)
        text = render(cuts, filters=_filters(since, until, source_id, zone, exportable),
                      prices_as_of=prices.as_of)
        try:
            # Private (0600) like the store: the page names projects and sessions.
            atomic_write(page, text.encode())
        except OSError as exc:
            refuse(f"could not write the page {page} ({exc.strerror or exc})",
                   "give --html a file in a folder this user may write to")
    if as_json:
        emit_json(report)
        return
    _print(report)


def _filters(since: dt.date | None, until: dt.date | None, source_id: str | None,
             zone: ZoneInfo | None, exportable: bool) -> str:
    """What the page's reports are limited to, in words."""
    said = [f"days from {since or 'the first'} to {until or 'the last'}",
            f"cut in {zone.key if zone is not None else 'the local zone'}",
            f"source {source_id}" if source_id else "every source"]
    if exportable:
        said.append("only what may leave this machine")
    return ", ".join(said)


def _print(report: Report) -> None:
    """The report as a table cut to the terminal's width."""
    width = shutil.get_terminal_size((100, 24)).columns
    for short in (False, True):
        headers = [report.by.capitalize(), *(_SHORT_HEADERS if short else _HEADERS), "Models"]
        columns = [headers, *[_cells(entry.key, entry, ", ".join(sorted(entry.models)), short)
                              for entry in report.entries],
                   _cells("Total", report.totals, "", short)]
        widths = [max(len(row[i]) for row in columns) for i in range(len(headers))]
        fixed = sum(widths[1:-1]) + 2 * (len(widths) - 1)
        least = _SHORT_MIN_KEY_WIDTH if short else _MIN_KEY_WIDTH
        if fixed - 2 + min(widths[0], least) <= width:
            break
    if fixed + widths[0] + widths[-1] > width:
        widths[-1] = max(0, width - fixed - max(least, min(widths[0], width // 3)))
        if widths[-1] < len("Models"):
            widths.pop()  # no room: the models column goes
    spacing = 2 * (len(widths) - 1)
    widths[0] = max(min(widths[0], width - sum(widths[1:]) - spacing), min(widths[0], least))
    for row in columns:
        cut = [_fit(cell, w) for cell, w in zip(row, widths, strict=False)]
        line = [cut[0].ljust(widths[0]), *(c.rjust(w) for c, w in
                                           zip(cut[1:6], widths[1:6], strict=True))]
        if len(widths) > 6:
            line.append(cut[6])
        click.echo("  ".join(line).rstrip())


def _cells(key: str, tokens: Tokens | Entry, models: str, short: bool) -> list[str]:
    number = _short if short else "{:,}".format
    cost = tokens.cost_usd
    # Cents hide a short session's cost: under a dollar it shows to a hundredth of one.
    shown = ("-" if cost is None else f"{cost:,.0f}" if short and cost >= 100
             else f"{cost:,.2f}" if cost >= 1 else f"{cost:.4f}")
    return [key, number(tokens.input_tokens), number(tokens.output_tokens),
            number(tokens.cache_creation_input_tokens), number(tokens.cache_read_input_tokens),
            shown, models]


def _short(n: int) -> str:
    """``n`` in at most five characters or so: 950, 12.3k, 4.5M, 1.2B."""
    for size, suffix in ((10**9, "B"), (10**6, "M"), (10**3, "k")):
        if n >= size:
            return f"{n / size:.1f}{suffix}"
    return str(n)


def _fit(cell: str, width: int) -> str:
    """``cell`` within ``width`` characters; a long one keeps its end (a path's
    last folders, a session id's tail)."""
    if len(cell) <= width:
        return cell
    return "…" + cell[len(cell) - width + 1:] if width > 1 else cell[:width]

"""``hostcore usage --html``: the page as real headless Chromium renders and reads it.

Real Claude Code transcripts (the generator of contrib/claude-code's usage tests)
go through real ``hostcore`` processes; the page is loaded by Debian's
``chromium`` from a ``file://`` address. Its screenshot must not be blank, and the
figures of the DOM Chromium built (``--dump-dom``) must equal ``--json``'s for the
same filters. Without Chromium these tests skip, or fail where
``$HOSTCORE_REQUIRED_TOOLS`` says it must be there (CI installs it).
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import struct
import subprocess
import sys
import zlib
from collections import Counter
from html.parser import HTMLParser
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from hostcore.evidence.usage import Entry, Report, Tokens
from hostcore.evidence.usage_html import render
from hostcore.testing import require_tool

HOSTCORE = str(Path(sys.executable).parent / "hostcore")
REPO = Path(__file__).resolve().parents[1]
KINDS = ("input_tokens", "output_tokens", "cache_creation_input_tokens",
         "cache_read_input_tokens")
# A model name HTML must escape: upstream keeps it (short printable ASCII).
HOSTILE_MODEL = "local<&\"'>x"
CHROMIUM_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                  "--no-first-run", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync",
                  # A container's /dev/shm is small: Chromium's shared memory goes to /tmp.
                  "--disable-dev-shm-usage")


def _transcripts() -> ModuleType:
    """contrib/claude-code's generator of transcripts in the real format."""
    path = REPO / "contrib" / "claude-code" / "tests" / "test_claude_code_usage.py"
    spec = importlib.util.spec_from_file_location("claude_code_usage_transcripts", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


TRANSCRIPTS = _transcripts()


@pytest.fixture(scope="module")
def chromium() -> str:
    found = shutil.which("chromium")
    require_tool("chromium", "apt-get install -y chromium", found=found is not None)
    assert found is not None
    return found


@pytest.fixture
def projects(tmp_path: Path) -> dict[str, str]:
    """Two project folders, one named with every character HTML must escape."""
    return {"-work-alpha": str(tmp_path / "work" / "a<b & \"c\" 'd'>"),
            "-work-beta": str(tmp_path / "work" / "beta")}


@pytest.fixture
def root(tmp_path: Path, projects: dict[str, str]) -> Path:
    """A store that read the transcripts, one model renamed to need escaping."""
    home = tmp_path / "home"
    TRANSCRIPTS.write_home(home, projects)
    for path in home.rglob("*.jsonl"):
        path.write_text(path.read_text().replace("local-model-x",
                                                 json.dumps(HOSTILE_MODEL)[1:-1]))
    folder = tmp_path / "root"
    folder.mkdir()
    (folder / "hostcore.toml").write_text(f'[plugins.claude-code]\nhome = "{home}"\n')
    done = _hostcore(folder, "run", "--once")
    assert done.returncode == 0, done.stderr
    return folder


def _env() -> dict[str, str]:
    return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "TZ": "America/Los_Angeles",
            "HOSTCORE_LOAD_PLUGINS": "claude-code"}


def _hostcore(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([HOSTCORE, "--root", str(root), *args], env=_env(),
                          capture_output=True, text=True, timeout=120)


def _json(root: Path, *args: str) -> dict[str, Any]:
    done = _hostcore(root, "usage", "--json", *args)
    assert done.returncode == 0, done.stderr
    found: dict[str, Any] = json.loads(done.stdout)
    return found


def _page(root: Path, page: Path, *args: str) -> dict[str, Any]:
    """Write the page with ``args``; returns what ``--json`` printed in the same run."""
    done = _hostcore(root, "usage", "--json", "--html", str(page), *args)
    assert done.returncode == 0, done.stderr
    found: dict[str, Any] = json.loads(done.stdout)
    return found


def _run_chromium(chromium: str, tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    profile = tmp_path / "chromium-profile"
    done = subprocess.run(
        [chromium, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", *args],
        env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(tmp_path)},
        capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    return done


class _Figures(HTMLParser):
    """The figures tables of a page: per ``data-by``, entries (with models) and totals."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tables: dict[str, dict[str, Any]] = {}
        self._by: str | None = None
        self._row: dict[str, Any] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = {name: value or "" for name, value in attrs}
        if tag == "table" and "figures" in found.get("class", ""):
            self._by = found["data-by"]
            self.tables[self._by] = {"entries": [], "totals": None}
        elif tag == "tr" and self._by is not None and "data-key" in found:
            cost = found["data-cost"]
            self._row = {"key": found["data-key"], "class": found["class"],
                         "entry": found.get("data-entry"),
                         "cost_usd": float(cost) if cost else None}
        elif tag == "td" and self._row is not None and "data-kind" in found:
            self._row[found["data-kind"]] = int(found["data-value"])

    def handle_endtag(self, tag: str) -> None:
        if tag == "table":
            self._by = None
        elif tag == "tr" and self._row is not None and self._by is not None:
            row, table = self._row, self.tables[self._by]
            figures = {k: row[k] for k in (*KINDS, "cost_usd")}
            if row["class"] == "entry":
                table["entries"].append({"key": row["key"], **figures, "models": {}})
            elif row["class"] == "model":
                assert table["entries"][-1]["key"] == row["entry"]
                table["entries"][-1]["models"][row["key"]] = figures
            else:
                table["totals"] = figures
            self._row = None


def _figures(dom: str) -> dict[str, dict[str, Any]]:
    parser = _Figures()
    parser.feed(dom)
    parser.close()
    return parser.tables


def _png_pixels(data: bytes) -> tuple[int, int, list[bytes], int]:
    """(width, height, rows of pixels, bytes a pixel) of an 8-bit RGB or RGBA PNG."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    at, idat, header = 8, [], b""
    while at < len(data):
        (size,), kind = struct.unpack(">I", data[at:at + 4]), data[at + 4:at + 8]
        body = data[at + 8:at + 8 + size]
        at += 12 + size
        if kind == b"IHDR":
            header = body
        elif kind == b"IDAT":
            idat.append(body)
    width, height, depth, colour, _, _, interlace = struct.unpack(">IIBBBBB", header)
    assert depth == 8 and interlace == 0 and colour in (2, 6), (depth, colour, interlace)
    step = 3 if colour == 2 else 4
    raw = zlib.decompress(b"".join(idat))
    stride = width * step
    previous = bytearray(stride)
    rows = []
    for y in range(height):
        start = y * (stride + 1)
        kind, line = raw[start], bytearray(raw[start + 1:start + 1 + stride])
        if kind == 1:
            for i in range(step, stride):
                line[i] = (line[i] + line[i - step]) & 255
        elif kind == 2:
            line = bytearray((a + b) & 255 for a, b in zip(line, previous, strict=True))
        elif kind == 3:
            for i in range(stride):
                left = line[i - step] if i >= step else 0
                line[i] = (line[i] + ((left + previous[i]) >> 1)) & 255
        elif kind == 4:
            for i in range(stride):
                a = line[i - step] if i >= step else 0
                b = previous[i]
                c = previous[i - step] if i >= step else 0
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)
                           ) & 255
        rows.append(bytes(line))
        previous = line
    return width, height, rows, step


def _as_report(figures: dict[str, Any], by: str) -> dict[str, Any]:
    return {"by": by, "entries": figures["entries"], "totals": figures["totals"]}


def test_the_page_chromium_reads_shows_the_figures_json_prints_per_day_project_and_session(
        chromium, root, tmp_path, projects):
    page = tmp_path / "usage.html"
    printed = _page(root, page)
    dom = _run_chromium(chromium, tmp_path, "--dump-dom", page.as_uri()).stdout
    tables = _figures(dom)
    assert set(tables) == {"day", "project", "session"}
    assert _as_report(tables["day"], "day") == printed
    for by in ("project", "session"):
        assert _as_report(tables[by], by) == _json(root, "--by", by), by
    assert len(tables["day"]["entries"]) >= 3
    # Chromium read the escaped names back as they are.
    assert [e["key"] for e in tables["project"]["entries"]] == sorted(projects.values())
    assert all(HOSTILE_MODEL in e["models"] for e in tables["day"]["entries"])
    assert tables["day"]["entries"][0]["models"][HOSTILE_MODEL]["cost_usd"] is None


def test_the_page_honours_the_same_filters_as_json_and_leaves_withheld_usage_out(
        chromium, root, tmp_path, projects):
    alpha = projects["-work-alpha"]
    done = _hostcore(root, "policy", "local-only", alpha, "--force")
    assert done.returncode == 0, done.stderr
    days = [e["key"] for e in _json(root, "--tz", "Asia/Kolkata")["entries"]]
    filters = ("--exportable", "--tz", "Asia/Kolkata", "--since", days[1], "--until", days[-1],
               "--source", "claude-code")
    page = tmp_path / "filtered.html"
    printed = _page(root, page, *filters, "--by", "model")
    tables = _figures(_run_chromium(chromium, tmp_path, "--dump-dom", page.as_uri()).stdout)
    assert set(tables) == {"day", "project", "session", "model"}, "--by's cut is added"
    assert _as_report(tables["model"], "model") == printed
    for by in ("day", "project", "session"):
        assert _as_report(tables[by], by) == _json(root, *filters, "--by", by), by
    shown = [e["key"] for e in tables["day"]["entries"]]
    assert shown and days[0] not in shown and set(shown) <= set(days[1:])
    assert [e["key"] for e in tables["project"]["entries"]] == [projects["-work-beta"]]
    assert alpha not in page.read_text()
    whole = _json(root, "--tz", "Asia/Kolkata")["totals"]
    assert tables["day"]["totals"]["input_tokens"] < whole["input_tokens"]


def test_the_screenshot_of_the_page_is_not_blank(chromium, root, tmp_path):
    page = tmp_path / "usage.html"
    _page(root, page)
    shot = tmp_path / "usage.png"
    _run_chromium(chromium, tmp_path, f"--screenshot={shot}", "--window-size=1200,1600",
                  page.as_uri())
    width, height, rows, step = _png_pixels(shot.read_bytes())
    assert (width, height) == (1200, 1600)
    colours = Counter(row[i:i + 3] for row in rows for i in range(0, len(row), step))
    background, most = colours.most_common(1)[0]
    assert background == b"\xff\xff\xff", "the page's white background fills the most"
    assert len(colours) > 10, "charts in several colours, text, rules"
    # The charts' bars alone cover far more than a twentieth of the window.
    assert width * height - most > width * height // 20


def test_the_page_is_self_contained_and_escapes_every_name(root, tmp_path, projects):
    page = tmp_path / "usage.html"
    _page(root, page)
    text = page.read_text("utf-8")
    lowered = text.lower()
    for outside in ("<script", "://", "url(", "@import", "src=", "href=", "<link", "<img",
                    "<iframe", "<object"):
        assert outside not in lowered, outside
    assert text.count("<svg") == 4, "tokens and cost per day, then per project and session"
    assert HOSTILE_MODEL not in text and "local&lt;&amp;&quot;&#x27;&gt;x" in text
    assert projects["-work-alpha"] not in text
    assert [name for name in os.listdir(tmp_path) if name.startswith(".usage.html")] == [], \
        "the atomic write left no temp file"
    assert page.stat().st_mode & 0o777 == 0o600, "private, as the store: it names projects"


def test_the_page_replaces_an_older_one_whole(root, tmp_path):
    page = tmp_path / "usage.html"
    page.write_text("an older page")
    _page(root, page, "--since", "2100-01-01")
    text = page.read_text("utf-8")
    assert "an older page" not in text and text.rstrip().endswith("</html>")
    tables = _figures(text)
    assert tables["day"]["entries"] == [] and tables["day"]["totals"]["input_tokens"] == 0


def test_a_page_that_cannot_be_written_is_one_line_and_exit_2(root, tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    done = _hostcore(root, "usage", "--html", str(blocker / "usage.html"))
    assert done.returncode == 2
    assert done.stderr.startswith("hostcore: could not write the page ")
    assert len(done.stderr.splitlines()) == 1 and "Traceback" not in done.stderr


def test_a_control_character_in_a_name_is_shown_replaced_never_written_raw():
    tokens = Tokens(input_tokens=5, output_tokens=1, cost_usd=0.25)
    entry = Entry(key="/w/a\x1b[31m\x00b", input_tokens=5, output_tokens=1, cost_usd=0.25,
                  models={"m\x07": tokens})
    text = render([Report("project", [entry], tokens)], filters="every source",
                  prices_as_of="2026-11-01")
    assert "\x1b" not in text and "\x00" not in text and "\x07" not in text
    tables = _figures(text)
    (shown,) = tables["project"]["entries"]
    assert shown["key"] == "/w/a\ufffd[31m\ufffdb"
    assert shown["models"] == {"m\ufffd": {"input_tokens": 5, "output_tokens": 1,
                                          "cache_creation_input_tokens": 0,
                                          "cache_read_input_tokens": 0, "cost_usd": 0.25}}

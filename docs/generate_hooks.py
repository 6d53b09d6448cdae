"""Write ``docs/hooks.md`` from the hookspec docstrings in :mod:`hostcore.plugin.hookspecs`.

The docstrings are the contract; this page is their rendering. Run it after
changing a hookspec (``tests/test_docs_hooks.py`` fails until you do)::

    python docs/generate_hooks.py
"""

from __future__ import annotations

import inspect
import re
import sys
import textwrap
from pathlib import Path

OUTPUT = Path(__file__).with_name("hooks.md")

INTRO = """\
# Hook reference

Every hook hostcore calls, generated from the docstrings in `hostcore/hookspecs.py`
by `python docs/generate_hooks.py` (a test fails when this page and the docstrings
disagree). Implement a hook with `@hostcore.hookimpl` on a function or method of
the same name; take only the arguments you use.

Hooks evolve by gaining arguments, never by renaming or removing one: pluggy passes
an implementation just the arguments it names, so an implementation written for an
older release keeps working. See [plugins.md](plugins.md) for the rest of the plugin
author's contract.

Registration hooks (`hostcore_sources` … `hostcore_events`) are called once, while a
`Host` is built; the host validates what they return and reports a bad object with
the plugin's name. Unless a hook says otherwise, every implementation is called and
the results are collected.
"""

_ROLE = re.compile(r":[a-z]+:`~?([^`]+)`")
_VERSION = re.compile(r"^\s*\.\. versionadded:: (\S+)\s*$", re.MULTILINE)


def hookspecs() -> list[tuple[str, object]]:
    from hostcore.plugin import hookspecs as module

    return sorted(
        (name, fn) for name, fn in vars(module).items()
        if name.startswith("hostcore_") and callable(fn)
    )


def signature(name: str, fn: object) -> str:
    sig = inspect.signature(fn)  # type: ignore[arg-type]
    params = ", ".join(
        f"{p.name}: {p.annotation}" if p.annotation is not p.empty else p.name
        for p in sig.parameters.values()
    )
    returns = f" -> {sig.return_annotation}" if sig.return_annotation is not sig.empty else ""
    return f"{name}({params}){returns}"


def since(doc: str) -> str | None:
    match = _VERSION.search(doc)
    return match.group(1) if match else None


def is_firstresult(fn: object) -> bool:
    opts = getattr(fn, "hostcore_spec", {}) or {}
    return bool(opts.get("firstresult"))


def to_markdown(doc: str) -> str:
    """The docstring body as Markdown: roles unwrapped, ``Example::`` blocks fenced."""
    text = _VERSION.sub("", inspect.cleandoc(doc))
    text = _ROLE.sub(lambda m: f"``{m.group(1).rsplit('.', 1)[-1]}``"
                     if m.group(0).startswith(":class:`~") else f"``{m.group(1)}``", text)
    out: list[str] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.rstrip().endswith("::"):
            out.append(line.rstrip()[:-1].replace("``", "`"))
            i += 1
            block: list[str] = []
            while i < len(lines) and (not lines[i].strip() or lines[i].startswith(" ")):
                block.append(lines[i])
                i += 1
            out += ["", "```python", textwrap.dedent("\n".join(block)).strip("\n"), "```", ""]
            continue
        out.append(line.replace("``", "`"))
        i += 1
    return re.sub(r"\n{3,}", "\n\n", "\n".join(out)).strip()


def render() -> str:
    parts = [INTRO]
    for name, fn in hookspecs():
        doc = fn.__doc__ or ""
        if is_firstresult(fn):
            result = "The first non-`None` result wins; later implementations are not called."
        elif inspect.signature(fn).return_annotation == "None":
            result = "Every implementation is called; return values are ignored."
        else:
            result = "Every implementation is called; the host merges their results."
        parts.append(
            f"## {name}\n\n```python\n{signature(name, fn)}\n```\n\n"
            f"*Since {since(doc)}.* {result}\n\n{to_markdown(doc)}\n"
        )
    return "\n".join(parts)


def main() -> int:
    OUTPUT.write_text(render(), encoding="utf-8")
    print(f"wrote {OUTPUT}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

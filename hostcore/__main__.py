"""The ``hostcore`` console script.

``hostcore --version`` is answered before anything is imported: it needs no
plugin manager, and it is what scripts call most often.
"""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    if args == ["--version"]:
        # Free: running this module already loaded the hostcore package; nothing else loads.
        from hostcore import __version__

        print(f"hostcore {__version__}")
        raise SystemExit(0)
    # click, pluggy and the plugins load only past --version (see the docstring).
    from hostcore.cli.app import run_cli

    raise SystemExit(run_cli(args))


if __name__ == "__main__":
    main()

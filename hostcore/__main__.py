"""The ``hostcore`` console script.

``hostcore --version`` is answered before anything is imported: it needs no
plugin manager, and it is what scripts call most often. ``hostcore hook``, run by
agents on every tool call, is handed to :mod:`hostcore.cli.hook` before click loads;
``run --once`` and ``status --json`` to :mod:`hostcore.cli.lean`, which never loads it.
"""

from __future__ import annotations

import os
import sys


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    if args == ["--version"]:
        # Free: running this module already loaded the hostcore package; nothing else loads.
        from hostcore import __version__

        print(f"hostcore {__version__}")
        raise SystemExit(0)
    # A hook runs on every tool call of an agent: it takes a lean path that never
    # builds the click application (hostcore.cli.hook).
    from hostcore.cli import hook

    hook_args = hook.parse(args)
    if hook_args is not None:
        raise SystemExit(hook.main(hook_args))
    # cron's `run --once` and a script's `status --json` take a lean path too, which
    # never imports click (hostcore.cli.lean); the rest goes through click.
    from hostcore.cli.argv import lean_command

    lean = lean_command(args, os.environ)
    # pluggy and the plugins load only past --version (see the docstring);
    # contextlib and threading only past the hook's path too.
    import contextlib
    import gc

    # The cyclic collector stays off while the command line and the plugins load;
    # run_cli (or the lean path) turns it back on before the command runs (see its
    # freeze_loaded).
    gc.disable()
    from hostcore.msgspec_import import import_msgspec

    import_msgspec()  # without typing_extensions: see hostcore.msgspec_import
    if lean is not None:
        from hostcore.cli import lean as lean_path

        status = lean_path.main(lean)
    else:
        from hostcore.cli.app import run_cli

        status = run_cli(args, freeze_loaded=True)
    if _lingering_threads():
        # Plugin code left a thread that is no daemon: the interpreter would wait for
        # it at exit, forever if it never ends. The host is closed by now (run_cli
        # closed it), so only the streams need flushing before leaving.
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(OSError, ValueError):
                stream.flush()
        os._exit(status)
    raise SystemExit(status)


def _lingering_threads() -> bool:
    import threading

    current = threading.current_thread()
    return any(t.is_alive() and not t.daemon and t is not current
               for t in threading.enumerate())


if __name__ == "__main__":
    main()

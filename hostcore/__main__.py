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
    _open_standard_streams()
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


def _open_standard_streams() -> None:
    """Give a standard descriptor that was closed (cron's ``>&-``, a service started
    without one) ``/dev/null``, and the stream Python left as None a file on it.

    Otherwise the next file hostcore opens takes its number, and what a plugin or a
    child process writes to "stdout" lands in that file; and the guards that route
    plugin output would fail on a None stream. Output to it is dropped, as the
    caller asked by closing it. Three fstat calls when all is well."""
    for fd, name in ((0, "stdin"), (1, "stdout"), (2, "stderr")):
        try:
            os.fstat(fd)
        except OSError:
            opened = os.open(os.devnull, os.O_RDWR)  # the lowest free number: fd's
            if opened != fd:
                os.dup2(opened, fd)
                os.close(opened)
        if getattr(sys, name) is None:
            # The process's own stream from here on: never closed before exit.
            stream = open(fd, "r" if fd == 0 else "w", encoding="utf-8",  # noqa: SIM115
                          closefd=False)
            setattr(sys, name, stream)


def _lingering_threads() -> bool:
    import threading

    current = threading.current_thread()
    return any(t.is_alive() and not t.daemon and t is not current
               for t in threading.enumerate())


if __name__ == "__main__":
    main()

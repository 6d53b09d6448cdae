"""Runs ``gh api -i`` and turns what it prints into a :class:`GhResponse`.

``gh`` exits 1 for every HTTP error status (a ``304 Not Modified`` included) and
can exit 0 while printing an error body, so its exit code says little. With
``-i`` it prints the HTTP status line and the response headers before the body;
the runner decides from those, and from nothing else:

* an HTTP status line was printed → a :class:`GhResponse`, whatever the exit code;
* nothing parseable was printed → a :class:`GhError` subclass saying why
  (:class:`GhAuthError` when gh asks for a login, :class:`GhTransportError` when
  no response arrived, :class:`GhProtocolError` for anything else).

Transient failures — a 5xx status or no response at all — are retried with
tenacity, at most ``attempts`` times in total; after that the last 5xx response
is returned (the caller decides what it means) or the transport error raised.
Nothing else is retried: a 4xx answer will not change by asking again.

A call may carry a ``deadline`` (on :func:`time.monotonic`'s clock) that bounds
every run and the waits between them, and a ``cancel`` event: while gh runs the
runner looks at both every :data:`CANCEL_CHECK_SECONDS` and kills gh (its whole
process group) when either says stop, raising :class:`GhTimeout` or
:class:`GhCancelled`.

This module is shared: the GitHub capture plugin imports it and never runs
``gh`` itself.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode

import msgspec

if TYPE_CHECKING:
    import subprocess

    import tenacity

# At most this many runs of gh per api() call (the first try included).
GH_ATTEMPTS = 3
# Backoff between those runs: exponential from GH_RETRY_WAIT_MIN s, never more than
# GH_RETRY_WAIT_MAX s. (tenacity is imported when a call retries, not when the plugin
# loads: building a Host must not import it.)
GH_RETRY_WAIT_MIN = 0.5
GH_RETRY_WAIT_MAX = 4.0

# How often a running gh is checked against the call's deadline and cancel event.
CANCEL_CHECK_SECONDS = 0.1
# GitHub's rule for a rate limit that names no time: wait at least a minute.
RATE_LIMIT_MIN_WAIT = timedelta(seconds=60)

_LOGIN_HINT = "gh auth login"


class GhError(Exception):
    """gh did not produce an HTTP response the runner could read."""


class GhUnavailable(GhError):
    """gh is not installed, or does not run."""


class GhTransportError(GhError):
    """No HTTP response arrived (connection refused, DNS, timeout)."""


class GhTimeout(GhTransportError):
    """No HTTP response arrived before the call's deadline (gh was killed)."""


class GhCancelled(GhError):
    """The call's cancel event was set (a stop was requested); gh was killed."""


class GhAuthError(GhError):
    """gh has no usable credentials for the host; the message says to run ``gh auth login``."""


class GhProtocolError(GhError):
    """gh printed something that is neither an HTTP response nor a known error."""


class GhResponse(msgspec.Struct):
    """One HTTP response as ``gh api -i`` printed it.

    ``headers`` has lower-case keys; a header sent more than once keeps its
    values joined with ``", "``.
    """

    status: int
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        """The body parsed as JSON; :class:`GhProtocolError` if it is not JSON."""
        try:
            return msgspec.json.decode(self.body)
        except (ValueError, UnicodeDecodeError) as exc:
            raise GhProtocolError(
                f"HTTP {self.status} response body is not JSON: {exc}"
            ) from None

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 300

    @property
    def rate_limited(self) -> bool:
        """A rate limit, primary or secondary, as GitHub documents them: 429; or 403
        with ``x-ratelimit-remaining: 0``, a ``retry-after``, or a message saying
        so (a secondary limit may come with neither header)."""
        if self.status == 429:
            return True
        if self.status != 403:
            return False
        return (self.headers.get("x-ratelimit-remaining") == "0"
                or "retry-after" in self.headers or "rate limit" in self.message().lower())

    @property
    def auth_failed(self) -> bool:
        """401, or a 403 that is not a rate limit: the credentials are missing or too weak."""
        return self.status == 401 or (self.status == 403 and not self.rate_limited)

    def rate_limit_reset(self, now: float | None = None) -> datetime | None:
        """When a rate-limited request may be retried (UTC), from ``retry-after``
        (seconds from ``now``) or ``x-ratelimit-reset`` (epoch seconds)."""
        retry_after = self.headers.get("retry-after", "")
        if retry_after.strip().isdigit():
            base = time.time() if now is None else now
            return datetime.fromtimestamp(base + int(retry_after), UTC)
        reset = self.headers.get("x-ratelimit-reset", "")
        if reset.strip().isdigit():
            return datetime.fromtimestamp(int(reset), UTC)
        return None

    def retry_at(self, now: datetime) -> datetime:
        """When a rate-limited request may be asked again, by GitHub's documented
        rules: after ``retry-after`` seconds; else, with no request left, at
        ``x-ratelimit-reset``; else no sooner than a minute from ``now``."""
        retry_after = self.headers.get("retry-after", "").strip()
        if retry_after.isdigit():
            return now + timedelta(seconds=int(retry_after))
        reset = self.headers.get("x-ratelimit-reset", "").strip()
        if self.headers.get("x-ratelimit-remaining") == "0" and reset.isdigit():
            return max(datetime.fromtimestamp(int(reset), UTC), now)
        return now + RATE_LIMIT_MIN_WAIT

    def message(self) -> str:
        """GitHub's ``message`` field when the body has one, else a short reason."""
        try:
            data = msgspec.json.decode(self.body)
        except (ValueError, UnicodeDecodeError):
            data = None
        if isinstance(data, dict) and isinstance(data.get("message"), str):
            return str(data["message"])
        return f"HTTP {self.status}"


def parse_output(stdout: bytes) -> GhResponse | None:
    """Parse ``gh api -i`` output; ``None`` when it does not start with a status line.

    gh ends the status line with ``\\n`` and header lines with ``\\r\\n``; both
    are accepted. The body is everything after the first empty line.
    """
    head, body = _split_head(stdout)
    if head is None:
        return None
    lines = head.decode("latin-1").splitlines()
    parts = lines[0].split(" ", 2) if lines else []
    if len(parts) < 2 or not parts[0].startswith("HTTP/") or not parts[1].isdigit():
        return None
    headers: dict[str, str] = {}
    for line in lines[1:]:
        name, sep, value = line.partition(":")
        if not sep:
            return None
        key = name.strip().lower()
        value = value.strip()
        headers[key] = f"{headers[key]}, {value}" if key in headers else value
    return GhResponse(status=int(parts[1]), headers=headers, body=body)


def _split_head(stdout: bytes) -> tuple[bytes | None, bytes]:
    found = [(i, sep) for sep in (b"\r\n\r\n", b"\n\r\n", b"\n\n")
             if (i := stdout.find(sep)) != -1]
    if found:
        index, sep = min(found)
        return stdout[:index], stdout[index + len(sep):]
    if stdout.startswith(b"HTTP/"):
        return stdout.rstrip(b"\r\n"), b""  # a status line and headers, no body
    return None, stdout


def _is_transient(outcome: GhResponse) -> bool:
    return outcome.status >= 500


class GhRunner:
    """Runs ``gh`` as a subprocess.

    :param executable: the gh command (looked up on ``env``'s ``PATH``).
    :param env: the environment for gh (default: this process's); the runner adds
        variables that stop gh prompting or checking for updates.
    :param timeout: seconds one gh run may take before it counts as a transport error.
    :param attempts: runs per :meth:`api` call, the first included (tests inject 1).
    :param wait: tenacity wait strategy between runs (default: exponential between
        :data:`GH_RETRY_WAIT_MIN` and :data:`GH_RETRY_WAIT_MAX`; tests inject
        ``wait_none()``).
    """

    def __init__(
        self,
        executable: str = "gh",
        env: Mapping[str, str] | None = None,
        timeout: float = 30,
        *,
        attempts: int = GH_ATTEMPTS,
        wait: Callable[..., float] | tenacity.wait.wait_base | None = None,
    ) -> None:
        self.executable = executable
        base = dict(os.environ if env is None else env)
        base.setdefault("GH_PROMPT_DISABLED", "1")
        base.setdefault("GH_NO_UPDATE_NOTIFIER", "1")
        base.setdefault("NO_COLOR", "1")
        self.env = base
        self.timeout = timeout
        self.attempts = attempts
        self.wait = wait
        self._version_ok = False  # set once `gh --version` succeeded; never re-checked after
        self._broken: str | None = None  # why gh does not run, once a run showed it
        self.runs = 0  # gh subprocesses started, for status and tests

    def availability(self) -> str | None:
        """``None`` when gh is installed (and did not fail to run), else why not.

        Spawns nothing: hostcore asks this whenever plugins are listed or a host
        reports status. Whether gh actually runs is checked by the first
        :meth:`api` call, once, and remembered here.
        """
        if self._broken is not None:
            return self._broken
        if _which(self.executable, self.env.get("PATH")) is None:
            return (f"the GitHub CLI ({self.executable!r}) is not installed or not on PATH; "
                    "install gh to use this provider")
        return None

    def _verify(self) -> None:
        """Run ``gh --version`` once, before the first request; :class:`GhUnavailable`
        (remembered for :meth:`availability`) when gh is missing or does not run."""
        if self._version_ok:
            return
        missing = self.availability()
        if missing is not None:
            raise GhUnavailable(missing)  # not remembered: gh may be installed later
        self._broken = self._version_problem()
        if self._broken is not None:
            raise GhUnavailable(self._broken)
        self._version_ok = True

    def _version_problem(self) -> str | None:
        import subprocess  # only a process that asks GitHub pays for it

        path = _which(self.executable, self.env.get("PATH"))
        if path is None:
            return (f"the GitHub CLI ({self.executable!r}) is not installed or not on PATH; "
                    "install gh to use this provider")
        try:
            done = subprocess.run([path, "--version"], capture_output=True, env=self.env,
                                  timeout=self.timeout, check=False)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return f"the GitHub CLI ({path}) does not run: {type(exc).__name__}: {exc}"
        if done.returncode != 0 or not done.stdout.startswith(b"gh version"):
            return f"the GitHub CLI ({path}) does not run: `gh --version` failed"
        return None
        return None

    def api(
        self,
        path: str,
        *,
        method: str = "GET",
        headers: Mapping[str, str] = {},  # read only, never mutated
        params: Mapping[str, str] | None = None,
        deadline: float | None = None,
        cancel: threading.Event | None = None,
    ) -> GhResponse:
        """Request ``path`` (``repos/o/r/issues``) through ``gh api -i``.

        Returns the response for any HTTP status, after retrying 5xx ones; raises
        :class:`GhUnavailable`, :class:`GhAuthError`, :class:`GhTransportError`
        (after retries; :class:`GhTimeout` when ``deadline`` passed),
        :class:`GhCancelled` (``cancel`` set) or :class:`GhProtocolError` when
        there is no response. ``deadline`` is a :func:`time.monotonic` instant
        bounding every run and wait of the call.
        """
        self._verify()
        target = path.lstrip("/")
        if params:
            target = f"{target}{'&' if '?' in target else '?'}{urlencode(dict(params))}"
        argv = [self.executable, "api", "-i", "-X", method.upper(), target]
        for name, value in headers.items():
            argv += ["-H", f"{name}: {value}"]

        def pause(seconds: float) -> None:
            if deadline is not None:
                seconds = min(seconds, max(0.0, deadline - time.monotonic()))
            if cancel is not None:
                cancel.wait(seconds)
            else:
                time.sleep(seconds)

        import tenacity

        stop: tenacity.stop.stop_base = tenacity.stop_after_attempt(self.attempts)
        if deadline is not None:
            stop = tenacity.stop_any(
                stop, tenacity.stop_after_delay(max(0.0, deadline - time.monotonic())))
        retrying = tenacity.Retrying(
            stop=stop,
            wait=self.wait or tenacity.wait_exponential(multiplier=GH_RETRY_WAIT_MIN,
                                                        min=GH_RETRY_WAIT_MIN,
                                                        max=GH_RETRY_WAIT_MAX),
            sleep=pause,
            retry=(tenacity.retry_if_exception_type(GhTransportError)
                   | tenacity.retry_if_result(_is_transient)),
            # Out of attempts: hand back the last 5xx response, or re-raise the
            # last transport error; never tenacity's RetryError.
            retry_error_callback=_last_outcome,
            reraise=True,
        )
        return retrying(self._run_once, argv, deadline, cancel)

    def _run_once(self, argv: list[str], deadline: float | None,
                  cancel: threading.Event | None) -> GhResponse:
        if cancel is not None and cancel.is_set():
            raise GhCancelled("a stop was requested; gh was not run")
        timeout = self.timeout if deadline is None \
            else min(self.timeout, deadline - time.monotonic())
        if timeout <= 0:
            raise GhTimeout("no time was left to ask GitHub")
        self.runs += 1
        try:
            # A session of its own: a stop kills gh and anything it started, and a
            # terminal's Ctrl-C reaches hostcore only, which then decides.
            import subprocess  # imported on first use: a cold start spawns nothing

            proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, env=self.env,
                                    start_new_session=True)
        except FileNotFoundError:
            raise GhUnavailable(
                f"the GitHub CLI ({self.executable!r}) is not installed or not on PATH"
            ) from None
        except PermissionError as exc:
            raise GhUnavailable(f"the GitHub CLI ({self.executable!r}) does not run: {exc}") \
                from None
        stdout, stderr = _wait(proc, timeout, cancel)
        response = parse_output(stdout)
        if response is not None:
            return response
        text = stderr.decode("utf-8", "replace").strip()
        if _LOGIN_HINT in text or "authentication" in text.lower():
            raise GhAuthError(f"gh is not logged in: run `gh auth login` ({_first_line(text)})")
        if proc.returncode != 0:
            raise GhTransportError(
                f"gh got no HTTP response (exit {proc.returncode}): {_first_line(text)}"
            )
        printed = _first_line(stdout.decode("utf-8", "replace"))
        raise GhProtocolError(f"gh exited 0 without an HTTP status line: {printed}")


def _last_outcome(state: tenacity.RetryCallState) -> GhResponse:
    """The last attempt's response, or its exception raised again."""
    assert state.outcome is not None  # called only after an attempt
    response: GhResponse = state.outcome.result()
    return response


def _which(name: str, path: str | None) -> str | None:
    """Where ``name`` runs from on ``path``, as ``shutil.which`` finds it on POSIX.

    Written out because ``shutil`` drags in the compression modules, and this is
    asked whenever plugins are listed (benchmarks/startup.py).
    """
    if os.sep in name:
        return name if os.access(name, os.X_OK) and not os.path.isdir(name) else None
    for folder in (path if path is not None else os.defpath).split(os.pathsep):
        candidate = os.path.join(folder or os.curdir, name)
        if os.access(candidate, os.X_OK) and not os.path.isdir(candidate):
            return candidate
    return None


def _wait(proc: subprocess.Popen[bytes], timeout: float,
          cancel: threading.Event | None) -> tuple[bytes, bytes]:
    """gh's output once it exits; kills it (:class:`GhTimeout`, :class:`GhCancelled`)
    when ``timeout`` seconds pass or ``cancel`` is set first. ``communicate`` keeps
    reading across its own timeouts, so a large answer never fills the pipe."""
    import subprocess  # loaded by the Popen that started proc

    ends = time.monotonic() + timeout
    while True:
        try:
            return proc.communicate(
                timeout=max(0.0, min(CANCEL_CHECK_SECONDS, ends - time.monotonic())))
        except subprocess.TimeoutExpired:
            if cancel is not None and cancel.is_set():
                _kill(proc)
                raise GhCancelled("a stop was requested; gh was stopped") from None
            if time.monotonic() >= ends:
                _kill(proc)
                raise GhTimeout(f"gh did not answer within {timeout:.3g} s") from None


def _kill(proc: subprocess.Popen[bytes]) -> None:
    """Kill gh's process group and reap it (gh leads a session of its own)."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.communicate()


def _first_line(text: str) -> str:
    line = text.strip().splitlines()[0] if text.strip() else "(no output)"
    return line[:300]

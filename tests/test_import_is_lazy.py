"""``import hostcore`` is cheap and loads no plugin: checked in a fresh interpreter."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys

HEAVY = ("pluggy", "click", "msgspec", "sqlite3", "importlib_metadata", "platformdirs",
         "tenacity")


def modules_after(code: str) -> set[str]:
    script = f"import json, sys\n{code}\nprint(json.dumps(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", script], check=True, capture_output=True,
                         text=True)
    return set(json.loads(out.stdout.splitlines()[-1]))


def test_import_hostcore_imports_no_plugin_machinery_or_plugin():
    loaded = modules_after("import hostcore\nhostcore.__version__")
    assert {m for m in loaded if m.split(".")[0] in HEAVY} == set()
    assert {m for m in loaded if m.startswith("hostcore")} == {"hostcore"}


def test_import_hostcore_and_the_hook_command_line_import_not_even_typing():
    # A hook no plugin is due for imports only these on its way to the dispatcher
    # (tests/test_agent_hook_dispatch.py runs it whole): typing alone is a fifth of
    # what such a hook may cost.
    loaded = modules_after("import hostcore.__main__, hostcore.cli.hook, hostcore.plugin\n"
                           "import hostcore.agents.dispatch")
    assert {"typing", "contextlib", "threading", "pathlib", "logging"} & loaded == set()


def test_importing_the_host_class_still_loads_no_plugin():
    loaded = modules_after("from hostcore import Host")
    assert "pluggy" in loaded  # the host module itself did load
    plugin_modules = {m for m in loaded if m.startswith("hostcore_")}
    assert plugin_modules == set()
    assert "hostcore.plugin.core" not in loaded


def test_version_flag_loads_no_plugin_machinery():
    script = (
        "import json, sys\n"
        "from hostcore.__main__ import main\n"
        "try:\n    main(['--version'])\nexcept SystemExit:\n    pass\n"
        "print(json.dumps(sorted(sys.modules)))"
    )
    out = subprocess.run([sys.executable, "-c", script], check=True, capture_output=True,
                         text=True)
    version_line, modules_line = out.stdout.splitlines()
    assert version_line.startswith("hostcore ")
    loaded = set(json.loads(modules_line))
    assert {m for m in loaded if m.split(".")[0] in HEAVY} == set()


# What building a Host, with every installed plugin, must not do: each of these is a
# cost every hook call from a coding agent would pay (benchmarks/startup.py).
NOT_AT_BUILD = ("asyncio", "ssl", "tenacity", "http", "urllib3", "requests")


def test_building_a_host_with_every_plugin_spawns_nothing_and_imports_nothing_heavy(
        tmp_path):
    script = (
        "import json, sys\n"
        "spawned = []\n"
        "def audit(event, args):\n"
        "    if event in ('subprocess.Popen', 'os.posix_spawn', 'os.exec', 'os.fork',\n"
        "                 'os.system', 'socket.connect'):\n"
        "        spawned.append(event)\n"
        "sys.addaudithook(audit)\n"
        "from hostcore import Host\n"
        f"host = Host(root={str(tmp_path / 'root')!r}, env={{}})\n"
        "loaded = sorted(i.name for i in host.plugins.infos.values() if i.status == 'loaded')\n"
        "host.plugin_infos()\n"
        "print(json.dumps([spawned, sorted(sys.modules), loaded]))\n"
    )
    out = subprocess.run([sys.executable, "-c", script], check=True, capture_output=True,
                         text=True)
    spawned, modules, loaded = json.loads(out.stdout.splitlines()[-1])
    assert len(loaded) >= 8, loaded  # every first-party and contrib plugin is installed
    assert spawned == []
    assert sorted(m for m in modules if m.split(".")[0] in NOT_AT_BUILD) == []


def test_listing_plugins_with_a_configured_gh_spawns_nothing(tmp_path):
    """Whether gh runs is learnt from the first request, not from a listing."""
    root = tmp_path / "root"
    root.mkdir(mode=0o700)
    (root / "hostcore.toml").write_text('[plugins.gh]\nrepos = ["octo/tool"]\n')
    script = (
        "import json, sys\n"
        "spawned = []\n"
        "sys.addaudithook(lambda e, a: spawned.append(e) if e in "
        "('subprocess.Popen', 'os.posix_spawn', 'os.exec') else None)\n"
        "from hostcore import Host\n"
        f"host = Host(root={str(root)!r}, env={{'HOSTCORE_LOAD_PLUGINS': 'hostcore-gh'}})\n"
        "infos = host.plugin_infos(); host.status()\n"
        "regs = [r.available for i in infos for r in i.registrations if r.kind == 'provider']\n"
        "print(json.dumps([spawned, regs]))\n"
    )
    out = subprocess.run([sys.executable, "-c", script], check=True, capture_output=True,
                         text=True)
    spawned, available = json.loads(out.stdout.splitlines()[-1])
    assert available == [True] and spawned == []


# Modules these commands have no use for on an empty root, each a millisecond or
# more of every start: json, tomllib and dataclasses are replaced by msgspec or
# imported where a file needs them; hashlib loads OpenSSL, though a digest (a status
# and a tick fold the export policy's fingerprint) is CPython's own _sha256; random
# seeds itself, and only a failed poll question draws a jitter; a capture's status
# is counted without the capture commands (click's code for `hostcore capture`).
# shutil (and the compression modules it imports): the terminal's width comes from os.
# platform: msgspec's uuid asks it one question at import (hostcore.msgspec_import).
COLD_UNUSED = ("json", "tomllib", "dataclasses", "shutil", "bz2", "lzma", "hashlib",
               "_hashlib", "random", "platform")
# The poll machinery too: on an empty root no provider is usable (gh has no repos),
# so a tick's poll step and status need only the last cycle's summary.
# status --json and run --once take the lean path, without click (hostcore.cli.lean).
UNUSED_ON_A_COLD_COMMAND = {
    ("status", "--json"): (*COLD_UNUSED, "hostcore_github_capture.commands",
                           "hostcore.workitems.poller", "click"),
    ("plugins", "--json"): COLD_UNUSED,
    # A tick's --json lines are written by msgspec too (plugin.output.json_text).
    ("run", "--once", "--json"): (*COLD_UNUSED, "hostcore_github_capture.commands",
                                  "hostcore.workitems.poller", "click"),
}


def test_status_plugin_listing_and_a_tick_on_an_empty_root_skip_modules_they_do_not_use(
        tmp_path):
    for command, unused in UNUSED_ON_A_COLD_COMMAND.items():
        script = (
            "import sys\n"
            "from hostcore.__main__ import main\n"
            f"try:\n    main({list(command)!r})\nexcept SystemExit:\n    pass\n"
            "print(sorted(sys.modules))\n"
        )
        out = subprocess.run([sys.executable, "-c", script], check=True, capture_output=True,
                             text=True, env={**os.environ, "HOSTCORE_ROOT": str(tmp_path)})
        printed, _, modules_line = out.stdout.rstrip("\n").rpartition("\n")
        assert json.loads(printed)  # the command's own output, complete
        loaded = set(ast.literal_eval(modules_line))
        assert sorted(loaded.intersection(unused)) == [], command


def test_the_identity_of_an_empty_set_is_the_digest_of_no_bytes():
    import hashlib

    from hostcore.export.ref import EMPTY_IDENTITY, identity

    assert EMPTY_IDENTITY == hashlib.sha256(b"").hexdigest() == identity()
    assert identity("a") == hashlib.sha256(b"a").hexdigest()


def test_reading_and_storing_transcript_lines_never_loads_openssl(tmp_path):
    # Evidence keys and file digests are BLAKE2b, CPython's own code: hashlib would
    # load OpenSSL (2-3 ms) in every run --once that reads a new line.
    home = tmp_path / "home" / ".codex" / "sessions" / "2025" / "09" / "14"
    home.mkdir(parents=True)
    (home / "rollout-2025-09-14T10-00-00-x.jsonl").write_text(
        '{"timestamp":"2025-09-14T10:00:00.000Z","type":"session_meta",'
        '"payload":{"id":"x","cwd":"/w"}}\n'
        '{"timestamp":"2025-09-14T10:00:01.000Z","type":"event_msg","payload":{}}\n')
    modules = modules_after(
        "import hostcore_codex.plugin as codex\n"
        "from hostcore import Host\n"
        "from hostcore.tick import drain\n"
        f"host = Host(root={str(tmp_path / 'root')!r}, plugins=[codex], "
        "load_entrypoints=False, env={}, config={'plugins': {'codex': "
        f"{{'home': {str(tmp_path / 'home')!r}}}}}}})\n"
        "rows = sum(r.count('ingest', 'rows') for r in drain(host, budget_seconds=60))\n"
        "host.close()\n"
        "assert rows == 2, rows\n")
    assert {"hashlib", "_hashlib"} & set(modules) == set()

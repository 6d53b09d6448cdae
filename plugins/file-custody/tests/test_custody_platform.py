"""Where custody cannot run (Windows: no fcntl), the plugin still imports and says
"unavailable on this platform" instead of failing. Tested in a child interpreter in
which importing fcntl fails, as it does on Windows."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap


def test_without_fcntl_the_plugin_imports_and_reports_unavailable(tmp_path):
    script = textwrap.dedent(f"""
        import json, sys, types
        sys.modules["fcntl"] = None  # what Windows has: importing fcntl fails
        import hostcore_file_custody as custody
        import hostcore_file_custody.plugin as plugin
        from hostcore_file_custody.status import custody_status
        from hostcore_file_custody.worker import CustodyWorker

        seen = {{"available": custody.AVAILABLE, "events": len(plugin.hostcore_events())}}
        registry = custody.HeartbeatRegistry({str(tmp_path)!r})
        for name, call in (("start", lambda: registry.start_session("alpha")),
                           ("capture", lambda: custody.capture_file_revision(json.__file__)),
                           ("sweep", lambda: custody.StaleSweep(registry).run())):
            try:
                call()
                seen[name] = "ran"
            except custody.CustodyUnavailable as exc:
                seen[name] = str(exc)
        seen["matches"] = custody.file_revision_matches(json.__file__, None)
        seen["status"] = custody_status(registry)["message"]
        # hostcore's own Host needs fcntl too, so the worker is driven without one.
        worker = CustodyWorker.__new__(CustodyWorker)
        worker.path = registry.root
        seen["worker"] = worker.run(types.SimpleNamespace()).counts
        print(json.dumps(seen))
    """)
    result = subprocess.run([sys.executable, "-W", "ignore", "-c", script], capture_output=True,
                            text=True, timeout=60, cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    seen = json.loads(result.stdout)
    assert seen["available"] is False and seen["events"] == 4
    for name in ("start", "capture", "sweep"):
        assert seen[name].startswith("file custody is unavailable on this platform"), name
    assert seen["matches"] is False
    assert seen["status"] == "file custody is unavailable on this platform"
    assert seen["worker"] == {"registries": 0, "unavailable": 1}

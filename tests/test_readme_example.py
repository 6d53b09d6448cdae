"""The README's plugin example and quickstart commands are real."""

from __future__ import annotations

import re
import types
from pathlib import Path

README = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")


def test_plugin_example_is_at_most_15_lines_of_code_and_runs(make_host, collected_events):
    (source,) = re.findall(r"```python\n(.*?)```", README, re.DOTALL)
    code_lines = [line for line in source.splitlines()
                  if line.strip() and not line.lstrip().startswith("#")]
    assert len(code_lines) <= 15
    module = types.ModuleType("acme_hello.plugin")
    exec(compile(source, "README.md", "exec"), module.__dict__)
    report = make_host(module).tick()
    (step,) = [s for s in report.steps if s.name == "greeter"]
    assert step.ok and step.counts == {"greeted": 1}
    assert collected_events.named("acme.greeted")[0].attributes == {"people": 1}


def test_quickstart_is_two_one_line_commands_using_the_dev_requirements():
    section = README.split("## Quickstart", 1)[1].split("\n## ", 1)[0]
    commands = re.findall(r"```\n(.*?)\n```", section, re.DOTALL)
    assert len(commands) == 2
    assert all("\n" not in c for c in commands)
    run, test = commands
    assert run.startswith("python3 -m venv .venv && ") and run.endswith("run --once")
    assert test.endswith(".venv/bin/python -m pytest -n auto")
    assert all("pip install -r requirements-dev.txt" in c for c in commands)

"""``hostcore.HOOK_API_VERSION`` names the hooks as they are, and the hook API only grows.

Every version of the hook API is recorded below: each hook's argument names and whether
it stops at the first result. Changing a hookspec without recording a new version, or
recording one that removes or renames a hook or an argument, fails here. The rules
are in docs/releasing.md.
"""

from __future__ import annotations

import inspect

import hostcore
from hostcore.plugin import hookspecs

Hook = tuple[tuple[str, ...], bool]  # (argument names, firstresult)

_V1: dict[str, Hook] = {
    "hostcore_commands": (("cli",), False),
    "hostcore_destinations": (("host",), False),
    "hostcore_events": ((), False),
    "hostcore_policy_inputs": (("host",), False),
    "hostcore_providers": (("host",), False),
    "hostcore_published_ref": (("stream", "host"), True),
    "hostcore_sources": (("host",), False),
    "hostcore_telemetry_sinks": (("host",), False),
    "hostcore_work_item_event": (("event", "host"), False),
    "hostcore_workers": (("host",), False),
}

HOOK_API: dict[int, dict[str, Hook]] = {
    1: _V1,  # hostcore 0.1
    2: {**_V1,  # hostcore 0.2
        "hostcore_published_ref": (("stream", "host", "destination"), True)},
}
HOOK_API[3] = {**HOOK_API[2],  # hostcore 0.2.5
               "hostcore_agent_event": (("event", "host"), False)}
HOOK_API[4] = {**HOOK_API[3],  # hostcore 0.2.6
               "hostcore_governance_inputs": (("target_dir", "repo_root", "host"), False),
               "hostcore_agent_gate": (("event", "host"), False)}


def current_hooks() -> dict[str, Hook]:
    found = {}
    for name in dir(hookspecs):
        if name.startswith("hostcore_"):
            function = getattr(hookspecs, name)
            options = function.hostcore_spec
            found[name] = (tuple(inspect.signature(function).parameters),
                           bool(options.get("firstresult")))
    return found


def test_hook_api_version_names_the_hookspecs_as_they_are():
    recorded = HOOK_API[hostcore.HOOK_API_VERSION]
    assert current_hooks() == recorded, (
        "the hookspecs changed: record them as HOOK_API_VERSION + 1 in this file and raise "
        "hostcore.HOOK_API_VERSION (docs/releasing.md)")


def test_hook_api_versions_count_up_from_one_to_the_current_one():
    assert sorted(HOOK_API) == list(range(1, hostcore.HOOK_API_VERSION + 1))


def test_each_hook_api_version_only_adds_hooks_or_arguments():
    for version in sorted(HOOK_API)[1:]:
        before, after = HOOK_API[version - 1], HOOK_API[version]
        assert before != after, f"version {version} changes nothing"
        for name, (arguments, firstresult) in before.items():
            assert name in after, f"version {version} removes {name}"
            new_arguments, new_firstresult = after[name]
            dropped = set(arguments) - set(new_arguments)
            assert not dropped, f"version {version} drops {sorted(dropped)} from {name}"
            assert firstresult == new_firstresult, f"version {version} changes {name}'s result"


def test_built_ins_show_the_hook_api_version(make_host):
    host = make_host()
    builtins = [i for i in host.plugin_infos() if i.status == "builtin"]
    assert builtins and {i.hook_api for i in builtins} == {hostcore.HOOK_API_VERSION}
    assert {i.hook_api for i in host.plugin_infos() if i.status != "builtin"} <= {None}

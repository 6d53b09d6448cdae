"""Governance: the staleness gate that tells which files were written under rules that moved.

* :mod:`~hostcore.governance.inputs` — a target's governance point, and the inputs
  every plugin's ``hostcore_governance_inputs`` contributes there, once per folder;
* :mod:`~hostcore.governance.stamps` — stamps and verdicts, ``<root>/governance/stamps.sqlite3``;
* :mod:`~hostcore.governance.gate` — stamping, approving, and the check against
  the governance in force (through :func:`hostcore.export.ref.compare`);
* :mod:`~hostcore.governance.plugin` — the built-in: the default inputs (context,
  terms, decisions) and the commands;
* :mod:`~hostcore.governance.commands` — ``hostcore stamp``, ``check`` and ``approve``.

Imports. A domain package like the others: at module level only the foundation
modules, :mod:`hostcore.plugin` (not :mod:`hostcore.plugin.cli`), :mod:`hostcore.export.ref`
and itself; its commands module only inside the plugin's ``hostcore_commands``. The
names below resolve on first use, so the host loading the built-in plugin imports
neither SQLite nor the gate.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from hostcore.governance.gate import TargetStatus, approve_targets, check_targets, stamp_targets

__all__ = ["TargetStatus", "approve_targets", "check_targets", "stamp_targets"]

_HOME = "hostcore.governance.gate"


def __getattr__(name: str) -> Any:
    # Lazy: the built-in plugin is loaded with every host; the gate only when used.
    if name not in __all__:
        raise AttributeError(f"module 'hostcore.governance' has no attribute {name!r}")
    return getattr(importlib.import_module(_HOME), name)

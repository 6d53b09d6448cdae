"""hostcore-mcp: ``hostcore mcp``, the ledger, evidence counts and freshness over MCP.

* :mod:`~hostcore_mcp.plugin` — the entry point (adds the command);
* :mod:`~hostcore_mcp.commands` — ``hostcore mcp`` and its options;
* :mod:`~hostcore_mcp.server` — the tools and the resource, on the MCP SDK's ``MCPServer``;
* :mod:`~hostcore_mcp.answers` — what each tool answers, from a read-only host;
* :mod:`~hostcore_mcp.schemas` — the shapes of those answers (their output schemas);
* :mod:`~hostcore_mcp.session` — the served root and each session's staleness note;
* :mod:`~hostcore_mcp.stdio` — stdio: ``initialize`` answered while the SDK loads;
* :mod:`~hostcore_mcp.handshake` — that answer, made without the SDK;
* :mod:`~hostcore_mcp.http` — streamable HTTP: loopback by default, a bearer token otherwise.
"""

"""The ``hostcore mcp`` command: serve the root over stdio, or streamable HTTP."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

import click
from click.core import ParameterSource

from hostcore.host import Host, resolve_root
from hostcore.plugin.cli import HostFactory

if TYPE_CHECKING:
    from mcp.server.mcpserver import MCPServer

    from hostcore_mcp.session import ServedRoot

# Where the token is read from when --token is not given (kept out of `ps` output).
ENV_TOKEN = "HOSTCORE_MCP_TOKEN"


@click.command("mcp")
@click.option("--http", "address", metavar="HOST:PORT",
              help="Serve streamable HTTP at http://HOST:PORT/mcp instead of stdio. HOST "
                   "must be a loopback address unless --allow-remote is given; port 0 "
                   "picks a free one.")
@click.option("--allow-remote", is_flag=True,
              help="Accept a non-loopback HOST for --http; a token is then required.")
@click.option("--token", metavar="TOKEN",
              help=f"Require 'Authorization: Bearer TOKEN' on every HTTP request (at least "
                   f"16 characters; default ${ENV_TOKEN}).")
@click.pass_context
def mcp_command(ctx: click.Context, address: str | None, allow_remote: bool,
                token: str | None) -> None:
    """Serve this root to agents over the Model Context Protocol (read-only).

    Tools: status, work_items, evidence_summary, freshness, usage; resource:
    hostcore://status. Answers come from local state only: no provider is asked,
    the step lock is never taken, nothing under the root is written. Over stdio
    (the default) the client starts the command and the session ends with it;
    with --http the URL is printed on stderr and the server runs until SIGINT or
    SIGTERM. A tool result's _meta["hostcore/staleness"] names the governance
    components that moved since the session's previous answer, once.
    """
    factory = ctx.find_object(HostFactory)
    if factory is None:
        raise click.UsageError("this command must run under the hostcore CLI")
    token = token if token is not None else factory.env.get(ENV_TOKEN) or None
    # What serves loads here, not at the top: `hostcore --help` imports this module to
    # list the command. The MCP SDK takes a second or more to import: over stdio it
    # loads once the client's initialize is answered (hostcore_mcp.stdio), over HTTP at once.
    from hostcore_mcp.session import ServedRoot

    if address is None and (allow_remote or ctx.get_parameter_source("token")
                            is ParameterSource.COMMANDLINE):
        raise click.UsageError("--allow-remote and --token apply to --http only")

    def build() -> Host:
        return Host(root=factory.root, config=factory.config, env=factory.env,
                    plugin_set=factory.plugin_set, read_only=True)

    served = ServedRoot(resolve_root(factory.root, factory.env), build)
    try:
        if address is None:
            _serve_stdio(served)
        else:
            _serve_http(served, address, allow_remote=allow_remote, token=token)
    finally:
        served.close()


def _serve_stdio(served: ServedRoot) -> None:
    from hostcore_mcp import stdio

    def load() -> MCPServer[Any]:
        from hostcore_mcp.server import build_server

        return build_server(served)

    stdio.serve(sys.stdin.buffer, sys.stdout.fileno(), load)


def _serve_http(served: ServedRoot, address: str, *, allow_remote: bool,
                token: str | None) -> None:
    from hostcore_mcp.http import AddressError, check_listen, parse_address, serve
    from hostcore_mcp.server import build_server

    try:
        host, port = parse_address(address)
        check_listen(host, allow_remote=allow_remote, token=token)
    except AddressError as exc:
        raise click.UsageError(str(exc)) from None
    app = build_server(served).streamable_http_app(host=host)
    try:
        serve(app, host, port, token=token,
              announce=lambda url: click.echo(f"hostcore mcp: serving {url}", err=True))
    except AddressError as exc:
        raise click.ClickException(str(exc)) from None

"""The ``hostcore mcp`` command: serve the root over stdio, or streamable HTTP."""

from __future__ import annotations

import click
from click.core import ParameterSource

from hostcore.host import Host, resolve_root
from hostcore.plugin.cli import HostFactory

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
    # The MCP SDK loads here, not at the top: importing it takes a second or more, and
    # `hostcore --help` imports this module to list the command.
    from hostcore_mcp.http import AddressError, check_listen, parse_address, serve
    from hostcore_mcp.server import build_server
    from hostcore_mcp.session import ServedRoot

    listen = None
    if address is not None:
        try:
            listen = parse_address(address)
            check_listen(listen[0], allow_remote=allow_remote, token=token)
        except AddressError as exc:
            raise click.UsageError(str(exc)) from None
    elif allow_remote or ctx.get_parameter_source("token") is ParameterSource.COMMANDLINE:
        raise click.UsageError("--allow-remote and --token apply to --http only")

    def build() -> Host:
        return Host(root=factory.root, config=factory.config, env=factory.env,
                    plugin_set=factory.plugin_set, read_only=True)

    served = ServedRoot(resolve_root(factory.root, factory.env), build)
    server = build_server(served)
    try:
        if listen is None:
            server.run("stdio")
            return
        app = server.streamable_http_app(host=listen[0])
        try:
            serve(app, *listen, token=token,
                  announce=lambda url: click.echo(f"hostcore mcp: serving {url}", err=True))
        except AddressError as exc:
            raise click.ClickException(str(exc)) from None
    finally:
        served.close()

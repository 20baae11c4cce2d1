"""``lifebot mcp serve`` (lifebot as an MCP server over stdio) and ``lifebot mcp list``.

``serve`` speaks the protocol on stdin/stdout, so nothing else may print there: logs go to
stderr (or LIFEBOT_LOG_FILE), and problems are one line on stderr with exit code 2.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Annotated

import typer

from bot.app.cli.runtime import find_user, group, run_with_app, settings_or_exit

if TYPE_CHECKING:
    from bot.app.build import App
    from bot.mcp.principal import Principal, PrincipalOf

mcp_app = group(
    "lifebot and the Model Context Protocol: serve your memory to other AI agents, and list "
    "the MCP servers whose tools lifebot uses."
)


def register_mcp_cli(app: typer.Typer) -> None:
    """Add ``lifebot mcp ...``."""
    app.add_typer(mcp_app, name="mcp")


@mcp_app.command("serve")
def serve(
    user: Annotated[
        str | None, typer.Option("--user", "-u", help="Serve this user's memory (id or name)")
    ] = None,
    token: Annotated[
        str | None,
        typer.Option("--token", help="Act as this personal API token (or set LIFEBOT_MCP_TOKEN)"),
    ] = None,
    write: Annotated[
        bool,
        typer.Option("--write", help="With --user: also allow remember, forget, set_reminder"),
    ] = False,
) -> None:
    """Serve one person's memory over stdio to an MCP client (Claude Desktop, an IDE agent).

    With --user it is read-only unless --write is given; with a token, the token's scope
    decides (tokens are made on the web page's Settings page), and the token is read again
    for every request: once it is revoked, every request gets an error saying so.
    """
    from bot.app.logs import setup_logging

    settings = settings_or_exit()
    token = token or settings.mcp_token
    if (user is None) == (token is None):
        typer.echo("Give --user U, or --token T (or LIFEBOT_MCP_TOKEN), not both.", err=True)
        raise typer.Exit(2)
    if token is not None and write:
        typer.echo(
            "--write goes with --user; a token's own scope decides what it may do.", err=True
        )
        raise typer.Exit(2)
    setup_logging(settings)  # stderr (or LIFEBOT_LOG_FILE): stdout carries the protocol

    async def go(application: App) -> None:
        principal_of = await _principal_of(application, user, token, write=write)
        await application.mcp.stdio_server(principal_of).run_stdio_async()

    run_with_app(go, settings)


async def _principal_of(
    app: App, user: str | None, token: str | None, *, write: bool
) -> PrincipalOf:
    """Whom the server acts for: a fixed user, or the token's user while the token lives."""
    from bot.mcp.principal import Principal, fixed, live

    if user is not None:
        found = await find_user(app, user)
        assert found.id is not None
        return fixed(Principal(found.id, write, "stdio"))

    async def of_token() -> Principal | None:
        return await _token_principal(app, token)

    if await of_token() is None:
        typer.echo(
            "That token is unknown or revoked: make one on the web page's Settings page.",
            err=True,
        )
        raise typer.Exit(2)
    return live(of_token)


async def _token_principal(app: App, token: str | None) -> Principal | None:
    """The principal of a live token whose user exists, else None (one or two queries)."""
    from bot.mcp.principal import WRITE, Principal

    row = await app.web.auth.api_token(f"Bearer {token}")
    if row is None or row.id is None or await app.web.service.accounts.user(row.user_id) is None:
        return None
    return Principal(row.user_id, row.scope == WRITE, f"token #{row.id}")


def _dump(value: object) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False, default=str)


@mcp_app.command("list")
def list_servers(
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON")] = False,
) -> None:
    """The MCP servers lifebot may use (LIFEBOT_MCP_SERVERS): their tools and their health.

    Each server is started (or reached) once, its tools listed, then stopped. Exit 1 when
    one is broken or the file has problems.
    """
    import asyncio

    from bot.app.features import intent_words
    from bot.app.options import mcp_client_settings
    from bot.mcp.client.hub import group_for
    from bot.mcp.client.status import probe_all

    settings = settings_or_exit()
    known = intent_words()
    config, statuses = asyncio.run(probe_all(mcp_client_settings(settings, frozenset(known))))
    pairs = list(zip(config.servers, statuses, strict=True))
    if as_json:
        rows = [
            {
                "name": spec.name,
                "transport": spec.transport,
                "runs": spec.target,
                "state": status.state,
                "detail": status.detail,
                "tools": list(status.tools),
                "intent": group_for(spec, (), known)[0],
                "users": list(spec.users),
                "timeout": spec.timeout or settings.mcp_call_timeout,
            }
            for spec, status in pairs
        ]
        typer.echo(_dump({"servers": rows, "problems": config.problems}))
    else:
        if settings.mcp_servers_file is None:
            typer.echo("No MCP servers: set LIFEBOT_MCP_SERVERS to a TOML or JSON file (README).")
        for spec, status in pairs:
            typer.echo(f"{spec.name}: {status.state} - {status.detail}")
            typer.echo(f"    {spec.transport}: {spec.target}")
            seconds = spec.timeout or settings.mcp_call_timeout
            users = ", ".join(str(u) for u in spec.users)
            typer.echo(
                f"    intent {group_for(spec, (), known)[0]}; users {users}; {seconds:g} s per call"
            )
            if status.tools:
                typer.echo(f"    tools: {', '.join(status.tools)}")
        for problem in config.problems:
            typer.echo(f"problem: {problem}", err=True)
    broken = config.problems or any(status.state != "up" for _, status in pairs)
    raise typer.Exit(1 if broken else 0)

"""``lifebot web login --user U``: a one-time sign-in link for the web page."""

from __future__ import annotations

from typing import Annotated

import typer

web_app = typer.Typer(help="The web page: sign-in links.", no_args_is_help=True)


@web_app.command("login")
def login(
    user: Annotated[str, typer.Option("--user", "-u", help="User id or display name")],
) -> None:
    """Print a one-time sign-in link (valid 10 minutes) for a user."""
    from bot.app.build import App
    from bot.app.cli import run_with_app
    from bot.app.cli.runtime import find_user
    from bot.web.auth import LinkRateLimited

    async def go(application: App) -> None:
        found = await find_user(application, user)  # by id or name, as everywhere
        assert found.id is not None
        try:
            url = await application.web.auth.issue_link(found.id)
        except LinkRateLimited as exc:
            typer.echo("Too many sign-in links just now; wait a few minutes.", err=True)
            raise typer.Exit(1) from exc
        typer.echo(f"Sign-in link for {found.display_name} (works once, for 10 minutes):")
        typer.echo(url)

    run_with_app(go)


def register_web_cli(app: typer.Typer) -> None:
    """Add ``lifebot web``."""
    app.add_typer(web_app, name="web")

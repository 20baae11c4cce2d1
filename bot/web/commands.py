"""The /web chat command: a one-time sign-in link, only in a private chat."""

from __future__ import annotations

from bot.chat import CommandContext, CommandReply, CommandTable
from bot.web.auth import LINK_TTL, LinkRateLimited, WebAuth


def register_web_commands(commands: CommandTable, auth: WebAuth) -> None:
    """Add /web to the command table."""

    async def web(ctx: CommandContext) -> CommandReply:
        if not ctx.msg.private:
            return CommandReply(
                "Sign-in links are personal: send /web to me in a private chat instead."
            )
        try:
            url = await auth.issue_link(ctx.user_id)
        except LinkRateLimited:
            return CommandReply(
                "You asked for several sign-in links just now; wait a few minutes and try again."
            )
        minutes = int(LINK_TTL.total_seconds() // 60)
        return CommandReply(
            f"Open this link to sign in to your lifebot page (works once, for {minutes} "
            f"minutes; don't share it):\n{url}"
        )

    commands.register("web", web, "a one-time link to sign in to your lifebot web page")

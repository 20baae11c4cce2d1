"""The chat commands over contacts: /contacts and /contact add|del."""

from __future__ import annotations

from bot.agent.contact_offer import settle_offer
from bot.agent.contacts import too_long
from bot.agent.people import describe
from bot.chat import CommandContext, CommandReply, CommandTable, row_id
from storage.db import Database
from storage.repos.people import ContactRepo

USAGE = (
    "Usage: /contact add NAME | other names | relationship | how to reach them "
    "(e.g. /contact add Ana Silva | Ana, Aninha | sister), or /contact del ID"
)


def register_people_commands(commands: CommandTable, db: Database) -> None:
    """Add /contacts and /contact to the command table."""

    async def contacts(ctx: CommandContext) -> CommandReply:
        async with db.session() as s:
            found = await ContactRepo(s).every(ctx.user_id)
        if not found:
            return CommandReply("No contacts yet. " + USAGE)
        return CommandReply("\n".join(f"#{c.id} {describe(c)}" for c in found))

    async def contact(ctx: CommandContext) -> CommandReply:
        verb, _, rest = ctx.args.partition(" ")
        if verb == "add" and rest.strip():
            fields = [f.strip() for f in rest.split("|")] + ["", "", ""]
            name, aliases, relationship, reach = fields[:4]
            if not name:
                return CommandReply(USAGE)
            said = too_long(name=name, aliases=aliases, relationship=relationship, reach=reach)
            if said is not None:
                return CommandReply(f"Not saved: {said}")
            async with db.session() as s:
                # a blank part is not given: adding someone again keeps what was there
                saved = await ContactRepo(s).add(
                    ctx.user_id,
                    name,
                    aliases=aliases or None,
                    relationship=relationship or None,
                    reach=reach or None,
                )
            return CommandReply(f"Saved #{saved.id}: {describe(saved)}")
        ident = row_id(rest)
        if verb in ("yes", "no") and ident is not None:  # the buttons under an offer
            said = await settle_offer(db, ctx.user_id, ident, yes=verb == "yes")
            return CommandReply(said)
        if verb == "del" and ident is not None:
            async with db.session() as s:
                gone = await ContactRepo(s).remove(ctx.user_id, ident)
            return CommandReply(f"Removed: {gone.name}" if gone else "You have no such contact.")
        return CommandReply(USAGE)

    commands.register("contacts", contacts, "list the people I know of")
    commands.register("contact", contact, "add or remove a person (/contact add NAME | aliases)")

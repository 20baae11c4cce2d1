"""The Settings page's and API's operations: the user's settings and linked channels."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field

from bot.adapters.base import ChannelAdapter
from bot.agent.accounts import Accounts
from bot.clock import Clock, parse_hhmm
from bot.dispatch.identity import confirm_link, issue_link_code
from bot.errors import ChannelError
from bot.jobs.localtime import hhmm
from bot.jobs.zones import ZONES
from bot.messages import Address, InboundMessage
from storage.db import Database
from storage.models import ChannelIdentity, PairingRequest, User

log = logging.getLogger(__name__)


@dataclass(slots=True)
class SettingsChange:
    """Fields to change; None leaves a field as it is."""

    timezone: str | None = None
    briefing_time: str | None = None
    briefing_enabled: bool | None = None
    quiet: str | None = None
    """``HH:MM-HH:MM`` or ``off``."""
    preferred_channel: str | None = None
    """A linked channel name, or ``auto``."""
    echo: bool = True
    """Repeat a refused value in its error (a person's own form); the API never does."""
    errors: list[str] = field(default_factory=list)
    found: str | None = None
    """The zone the time zone field was read as, in words (``Europe/Lisbon (Porto, ...)``)."""


class WebSettings:
    """Settings and channel links of one user at a time."""

    def __init__(
        self,
        db: Database,
        clock: Clock,
        accounts: Accounts,
        channels: Mapping[str, ChannelAdapter],
    ) -> None:
        self.db = db
        self.clock = clock
        self.accounts = accounts
        self.channels = channels
        """Where a linked (or refused) chat is told the answer."""

    async def identities(self, user: User) -> list[ChannelIdentity]:
        """The user's linked channels."""
        assert user.id is not None
        return await self.accounts.identities(user.id)

    async def change_settings(  # noqa: PLR0912  # one branch per setting reads plainly
        self, user: User, change: SettingsChange, *, partly: bool = True
    ) -> User:
        """Apply every valid field; problems are added to ``change.errors`` in plain words.

        With ``partly=False`` (the API) nothing is applied when any field is refused, so a 422
        has changed nothing.
        """
        assert user.id is not None
        now = self.clock.now()
        values: dict[str, object] = {}
        if change.timezone:
            found = await asyncio.to_thread(ZONES.find, change.timezone)
            if found is None:
                what = change.timezone if change.echo else "The time zone"
                change.errors.append(
                    f"{what} is neither a time zone nor a town I know: try a bigger "
                    "town nearby, or a zone such as Europe/Lisbon."
                )
            else:
                change.found = found.words
                if found.zone != user.timezone:
                    values.update(timezone=found.zone, briefing_set_at=now)
        if change.briefing_time:
            try:
                at = hhmm(parse_hhmm(change.briefing_time))
            except ValueError as exc:
                change.errors.append(f"Briefing time: {_said(exc, change.echo)}.")
            else:
                if at != user.briefing_time:
                    values.update(briefing_time=at, briefing_set_at=now)
        if change.briefing_enabled is not None and change.briefing_enabled != user.briefing_enabled:
            values.update(briefing_enabled=change.briefing_enabled, briefing_set_at=now)
        if change.quiet is not None:
            self._quiet(change, values)
        if change.preferred_channel:
            wanted = change.preferred_channel.strip().lower()
            mine = {i.channel for i in await self.identities(user)}
            if wanted == "auto":
                values["preferred_channel"] = None
            elif wanted in mine:
                values["preferred_channel"] = wanted
            else:
                change.errors.append(
                    f"You have no {wanted} channel linked."
                    if change.echo
                    else f"That is not a linked channel ({', '.join(sorted(mine))} or auto)."
                )
        if change.errors and not partly:
            return user
        return await self.accounts.save(user.id, values)

    @staticmethod
    def _quiet(change: SettingsChange, values: dict[str, object]) -> None:
        text = (change.quiet or "").strip().lower()
        if text in ("", "off", "none"):
            values.update(quiet_start=None, quiet_end=None)
            return
        start, sep, end = text.replace("\u2013", "-").partition("-")
        if not sep:
            change.errors.append("Quiet hours: write them as 22:00-07:00, or off.")
            return
        try:
            a, b = hhmm(parse_hhmm(start.strip())), hhmm(parse_hhmm(end.strip()))
        except ValueError as exc:
            change.errors.append(f"Quiet hours: {_said(exc, change.echo)}.")
            return
        if a == b:
            change.errors.append("Quiet hours need a start and an end that differ.")
            return
        values.update(quiet_start=a, quiet_end=b)

    async def link_questions(self, user: User) -> list[PairingRequest]:
        """Chats waiting for this user's Yes or No before they are linked."""
        assert user.id is not None
        return await self.accounts.link_questions(user.id, self.clock.now())

    async def answer_link(self, user: User, code: str, *, yes: bool) -> str:
        """Link (or refuse) a chat that sent this user's link code; tell that chat."""
        assert user.id is not None
        async with self.db.session() as s:
            said, tell = await confirm_link(s, user.id, code, yes=yes, now=self.clock.now())
        for out in tell:
            adapter = self.channels.get(out.address.channel)
            if adapter is None:
                continue
            try:
                await adapter.send(out)
            except ChannelError as exc:  # the answer stands; the other chat just isn't told
                log.warning("could not tell the %s chat about the link: %s", out.address, exc)
        return said

    async def link_code(self, user: User) -> str:
        """A code to send from another channel to link it to this user."""
        assert user.id is not None
        now = self.clock.now()
        here = InboundMessage(
            Address("web", "web", f"user:{user.id}"), f"user:{user.id}", "", "", now
        )
        async with self.db.session() as s:
            return await issue_link_code(s, user.id, here, now)


def _said(exc: ValueError, echo: bool) -> str:
    # parse_hhmm's words quote the text it refused; without echo, the same words without it
    return str(exc) if echo else "not a time of day; write it like 07:30"

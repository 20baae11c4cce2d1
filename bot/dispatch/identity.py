"""Identity and access: who is writing, pairing for strangers, linking channels.

Strangers never reach the agent: they get one reply with a pairing code, and nothing but the
pairing request is stored. The owner approves codes; ``/link`` joins two channels into one user.

A link is a takeover risk, so it has three locks: the code is only given in a private chat;
it is single-use, short-lived and replaced by a newer one; and sending it from the new channel
only *asks* the account being linked into ("Link Slack Ana to your account? Yes/No"). The
identity is added on Yes alone. Every use of a code is one conditional UPDATE, so two senders
racing with the same code get at most one question.
"""

from __future__ import annotations

import logging
import re
import secrets
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from sqlmodel.ext.asyncio.session import AsyncSession

from bot.adapters.console import CONSOLE_ACCOUNT, CONSOLE_SENDER
from bot.messages import Address, Button, InboundMessage, OutboundMessage
from storage.models import ChannelIdentity, PairingRequest, User
from storage.repos.messages import MessageRepo
from storage.repos.outbox import OutboxRepo, Push
from storage.repos.pairing import PairingRepo
from storage.repos.users import UserRepo

log = logging.getLogger(__name__)

CODE_ALPHABET = "ABCDEFGHJKMNPQRSTUVWXYZ23456789"
"""No 0/O, 1/I/L: codes are read aloud and typed on phones."""
CODE_LENGTH = 8
CODE_TTL = timedelta(hours=1)
MAX_GUESSES = 10
GUESS_WINDOW = timedelta(hours=1)
LINK_TTL = timedelta(minutes=10)
"""Link codes and link questions live briefly: they are used within a minute or not at all."""
MAX_PENDING_PER_CHANNEL = 200
"""Only a bound on stored rows: each sender has one pending request at most (asking again
shows the same code), so a few strangers can no longer lock every newcomer out."""
_CODE_IN_TEXT = re.compile(
    rf"^\s*(?:/link\s+)?([{CODE_ALPHABET}]{{{CODE_LENGTH}}})\s*$", re.IGNORECASE
)


def new_code() -> str:
    """A fresh random code."""
    return "".join(secrets.choice(CODE_ALPHABET) for _ in range(CODE_LENGTH))


@dataclass(slots=True)
class Resolution:
    """The result of looking up a sender."""

    user: User | None
    identity: ChannelIdentity | None = None
    reply: str | None = None
    """What to tell a sender who is not (yet) let in, or who just linked."""
    notify: list[OutboundMessage] = field(default_factory=list)
    """Messages for other people (the link question to the account being linked into)."""


async def resolve(
    session: AsyncSession, msg: InboundMessage, *, allowlist: set[str], timezone: str, now: datetime
) -> Resolution:
    """Map the sender to a user, or run the link / allowlist / pairing flow."""
    a = msg.address
    users = UserRepo(session)
    ident = await users.find_identity(a.channel, a.account, msg.sender_id)
    if ident is not None:
        user = await users.get(ident.user_id)
        return Resolution(user, ident)

    if _CODE_IN_TEXT.match(msg.text or "") and await _guessing(session, msg, now):
        return Resolution(
            None, reply="Too many codes were tried from here. Wait an hour, then try again."
        )
    linked = await _try_link(session, msg, now)
    if linked is not None:
        return linked

    if f"{a.channel}:{msg.sender_id}" in allowlist:
        owner = await users.owner()
        # Insert-or-get: the same person's first messages may reach two processes at once.
        user, ident = await users.create_with_identity(
            msg.sender_name or msg.sender_id,
            a.channel,
            a.account,
            msg.sender_id,
            is_owner=owner is None,
            timezone=timezone,
            chat_id=a.chat_id,
            identity_name=msg.sender_name,
        )
        log.info("allowlisted sender let in as user %s", user.id)
        return Resolution(user, ident)

    return Resolution(None, reply=await _pairing_reply(session, msg, now))


async def _guessing(session: AsyncSession, msg: InboundMessage, now: datetime) -> bool:
    """True once a stranger has sent MAX_GUESSES refused messages within the last hour.

    Codes have 31**8 values, but nothing should let anyone try them at the channel's speed.
    """
    a = msg.address
    tries = await MessageRepo(session).refused_since(
        a.channel, a.account, msg.sender_id, now - GUESS_WINDOW
    )
    if tries >= MAX_GUESSES:
        log.warning("throttled link-code guesses from a %s sender", a.channel)
        return True
    return False


async def _try_link(session: AsyncSession, msg: InboundMessage, now: datetime) -> Resolution | None:
    m = _CODE_IN_TEXT.match(msg.text or "")
    if not m:
        return None
    pairing = PairingRepo(session)
    req = await pairing.claim(m.group(1), now, purpose="link", status="used")
    if req is None or req.user_id is None:
        return None
    a = msg.address
    who = msg.sender_name or msg.sender_id
    question = await pairing.add(
        _request_from(msg, "link_confirm", now, LINK_TTL, user_id=req.user_id)
    )
    ask = OutboundMessage(
        Address(req.channel, req.account, req.chat_id),
        f"Link {a.channel.capitalize()} {who} to your account? They would see everything I "
        "know about you. Say yes only if you just sent your link code from there yourself.",
        buttons=[
            Button("Yes, link it", f"/link yes {question.code}"),
            Button("No", f"/link no {question.code}"),
        ],
        kind="notice",
    )
    log.info("link code used from %s; asking user %s to confirm", a.channel, req.user_id)
    return Resolution(
        None,
        reply="Almost done: confirm the link in the chat where you asked for the code.",
        notify=[ask],
    )


async def confirm_link(
    session: AsyncSession, user_id: int, code: str, *, yes: bool, now: datetime
) -> tuple[str, list[OutboundMessage]]:
    """Answer a link question: (reply to the account owner, messages for the other chat)."""
    pairing = PairingRepo(session)
    req = await pairing.claim(
        code, now, purpose="link_confirm", status="used" if yes else "declined", user_id=user_id
    )
    if req is None:
        return "That link request has expired or was already answered.", []
    there = Address(req.channel, req.account, req.chat_id)
    who = req.display_name or req.sender_id
    if not yes:
        return (
            f"Not linked: {req.channel} {who} gets no access.",
            [OutboundMessage(there, "The link was declined.", kind="notice")],
        )
    users = UserRepo(session)
    if await users.find_identity(req.channel, req.account, req.sender_id) is not None:
        return f"{req.channel} {who} is already linked to an account.", []
    await users.add_identity(
        user_id,
        req.channel,
        req.account,
        req.sender_id,
        chat_id=req.chat_id,
        display_name=req.display_name,
    )
    log.info("linked a %s identity to user %s", req.channel, user_id)
    done = f"Linked. This {req.channel} chat now shares one memory with your other chats."
    return f"Linked {req.channel} {who} to your account.", [
        OutboundMessage(there, done, kind="notice")
    ]


def _request_from(
    msg: InboundMessage, purpose: str, now: datetime, ttl: timedelta, user_id: int | None = None
) -> PairingRequest:
    """A new request with a fresh code, about the sender of ``msg``."""
    a = msg.address
    return PairingRequest(
        code=new_code(),
        purpose=purpose,
        channel=a.channel,
        account=a.account,
        sender_id=msg.sender_id,
        chat_id=a.chat_id,
        display_name=msg.sender_name,
        user_id=user_id,
        created_at=now,
        expires_at=now + ttl,
    )


async def _pairing_reply(session: AsyncSession, msg: InboundMessage, now: datetime) -> str:
    a = msg.address
    pairing = PairingRepo(session)
    req = await pairing.pending_for_sender(a.channel, a.account, msg.sender_id, now)
    if req is None:
        if await pairing.count_pending(a.channel, now) >= MAX_PENDING_PER_CHANNEL:
            return (
                "Hi! I'm a private assistant and I don't know you yet. Too many pairing "
                "requests are waiting right now; please try again in an hour."
            )
        req = await pairing.add(_request_from(msg, "pair", now, CODE_TTL))
    minutes = max(1, int((req.expires_at - now).total_seconds() // 60))
    return (
        "Hi! I'm a private assistant and I don't know you yet.\n"
        f"Your pairing code is {req.code} (valid for {minutes} minutes).\n"
        f"Ask my owner to approve it with: lifebot pairing approve {req.code}\n"
        "(or /approve CODE in their chat with me)."
    )


WELCOME = (
    "You're approved: I'm yours to talk to now. Ask me anything, tell me what to remember, "
    "or send /help to see what I can do."
)


async def approve(
    session: AsyncSession, code: str, now: datetime, timezone: str
) -> PairingRequest | None:
    """Approve a pairing code: the requester becomes a user. None if the code is not valid."""
    pairing = PairingRepo(session)
    req = await pairing.by_code(code, now, purpose="pair")
    if req is None:
        return None
    users = UserRepo(session)
    if await users.find_identity(req.channel, req.account, req.sender_id) is None:
        owner = await users.owner()
        user = await users.create(
            req.display_name or req.sender_id, is_owner=owner is None, timezone=timezone
        )
        assert user.id is not None
        await users.add_identity(
            user.id,
            req.channel,
            req.account,
            req.sender_id,
            chat_id=req.chat_id,
            display_name=req.display_name,
        )
        req.user_id = user.id
        # Through the outbox, so it arrives even when a CLI in another process approved.
        await OutboxRepo(session).enqueue(
            [Push(user.id, "notice", f"welcome:{user.id}", now, text=WELCOME, urgent=True)], now
        )
    await pairing.close(req, "approved")
    return req


async def issue_link_code(
    session: AsyncSession, user_id: int, msg: InboundMessage, now: datetime
) -> str:
    """A one-time code the user sends from another channel to link it (older ones stop working)."""
    a = msg.address
    pairing = PairingRepo(session)
    await pairing.replace_links(user_id)
    req = await pairing.add(
        PairingRequest(
            code=new_code(),
            purpose="link",
            channel=a.channel,
            account=a.account,
            sender_id=msg.sender_id,
            chat_id=a.chat_id,
            user_id=user_id,
            created_at=now,
            expires_at=now + LINK_TTL,
        )
    )
    return req.code


def code_in(text: str) -> str | None:
    """The code in a message made of a code alone (or "/link CODE"), upper-cased; else None."""
    m = _CODE_IN_TEXT.match(text)
    return m.group(1).upper() if m else None


async def is_own_link_code(session: AsyncSession, user_id: int, code: str, now: datetime) -> bool:
    """Whether ``code`` is a live link code this user asked for (nobody else's is told)."""
    req = await PairingRepo(session).by_code(code, now, purpose="link")
    return req is not None and req.user_id == user_id


async def known_chat_link_reply(session: AsyncSession, user: User, code: str, now: datetime) -> str:
    """What to tell a known sender who sends "/link CODE": the code is never used from here.

    A link adds a chat lifebot does not know yet; this chat already has an account (a second
    one, approved or allowlisted on its own), and joining two accounts is not what a link
    does. The code is left as it was: it still works from the chat it was meant for. Only the
    sender's own codes are looked up, so nobody learns here whether another code is valid.
    """
    assert user.id is not None
    req = await PairingRepo(session).by_code(code, now, purpose="link")
    if req is not None and req.user_id == user.id:
        minutes = max(1, int((req.expires_at - now).total_seconds() // 60))
        return (
            "That code links a new chat to your account, and this chat is already part of "
            "it: send the code to me from the other channel (Telegram, Slack, ...) you want "
            f"to link. It works there for {minutes} more minutes."
        )
    name = user.display_name or str(user.id)
    return (
        "This chat already has a lifebot account of its own, so I can't link it into another "
        "one: a link code works only when sent from a chat I don't know yet. To link a new "
        "chat to this account instead, send /link alone here and send the code it gives you "
        "from there. To use this chat with your other account, this one has to be deleted "
        f'first (the owner runs: lifebot users delete "{name}"; that erases everything it '
        "holds); then a new code from your other account, sent here, links it."
    )


async def ensure_console_owner(
    session: AsyncSession, timezone: str, as_user: User | None = None
) -> User:
    """The person at the console: ``as_user`` when given, else the owner (made on first use)."""
    users = UserRepo(session)
    ident = await users.find_identity("console", CONSOLE_ACCOUNT, CONSOLE_SENDER)
    if as_user is not None:
        assert as_user.id is not None
        if ident is None:
            await users.add_identity(
                as_user.id, "console", CONSOLE_ACCOUNT, CONSOLE_SENDER, chat_id="console"
            )
        elif ident.user_id != as_user.id:
            await users.move_identity(ident, as_user.id)
        return as_user
    if ident is not None:
        user = await users.get(ident.user_id)
        if user is not None:
            return user
    owner = await users.owner()
    if owner is None:
        owner = await users.create("owner", is_owner=True, timezone=timezone)
    assert owner.id is not None
    await users.add_identity(
        owner.id, "console", CONSOLE_ACCOUNT, CONSOLE_SENDER, chat_id="console"
    )
    return owner

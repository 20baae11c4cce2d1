"""handle(inbound): dedupe → identity → access → per-conversation lock → agent → store → send.

The only path from any channel to the agent. Nothing here knows a wire format, nor any
feature's input: a shared location, a document or a photo goes to the handler its feature
declared (``bot.feature.Input``, ``bot.chat.InputHandler``), registered in ``bot/app``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from sqlmodel.ext.asyncio.session import AsyncSession

from bot import logctx
from bot.adapters.base import ChannelAdapter, ReplyStream, StreamingAdapter
from bot.agent.loop import AgentEvent, TextDelta, ToolStarted
from bot.agent.turn import Agent, TurnOutcome, TurnReads
from bot.chat import InputContext, InputHandler
from bot.clock import Clock, zone
from bot.dispatch.commands import Commands
from bot.dispatch.identity import Resolution, resolve
from bot.dispatch.metrics import observe_turn
from bot.dispatch.receipts import send_and_record
from bot.errors import AgentError, ChannelError, LLMInputTooLong, LLMNotConfigured, Unreachable
from bot.locks import ConversationLock, KeyedLocks
from bot.messages import (
    Address,
    Button,
    Citation,
    Image,
    InboundMessage,
    OutboundMessage,
    Receipt,
    StoredTurn,
    clean_text,
)
from storage.db import Database
from storage.models import Conversation, Message, User
from storage.repos.deliveries import DeliveryRepo
from storage.repos.messages import ConversationRepo, MessageRepo
from storage.repos.users import UserRepo

log = logging.getLogger(__name__)


@dataclass(slots=True)
class DispatchResult:
    """What happened to one inbound message (for logs, tests and benchmarks)."""

    status: str
    """duplicate, pairing, linking, command, answered, llm_down, failed, location, ignored."""
    reply: str | None = None
    receipt: Receipt | None = None
    turn: StoredTurn | None = None
    """The stored turn, for the hooks (run once the conversation lock is released)."""


@dataclass(slots=True, frozen=True)
class _TurnStart:
    """What a plain message's turn reads first (in a unit of work it shares)."""

    taken: str | None
    """The command line it answers (a question we asked), if it does."""
    reads: TurnReads | None
    """What the agent's prompt is built from (None when it answers our question)."""


TurnHook = Callable[[StoredTurn], Awaitable[None]]

ORDER_WAIT = 3.0
"""Seconds a message may step back for an earlier one of its conversation (then it goes)."""


def llm_down_text(exc: AgentError) -> str:
    """Plain words for a user when the LLM cannot answer."""
    if isinstance(exc, LLMInputTooLong):
        return (
            "That is more than my language model can read at once. Send it in shorter parts, "
            "or as a PDF, which I read page by page. I kept your message."
        )
    if isinstance(exc, LLMNotConfigured):
        return (
            "I can't think right now: no language model is configured. The owner can set "
            "OPENAI_API_KEY (or OPENAI_BASE_URL for Ollama or another OpenAI-compatible "
            "server) and restart me. I kept your message; send /retry once that's done."
        )
    return (
        f"I can't reach my language model right now ({exc}). I kept your message; "
        "send /retry in a moment and I'll answer it."
    )


class Dispatcher:
    """Routes every inbound message from every channel."""

    def __init__(
        self,
        *,
        db: Database,
        agent: Agent,
        commands: Commands,
        clock: Clock,
        adapters: dict[str, ChannelAdapter] | None = None,
        hooks: Sequence[TurnHook] = (),
        allowlist: set[str] | None = None,
        default_timezone: str = "UTC",
        locks: ConversationLock[int] | None = None,
        inputs: Sequence[InputHandler] = (),
    ) -> None:
        self.db = db
        self.agent = agent
        self.commands = commands
        self.clock = clock
        self.allowlist = allowlist or set()
        self.default_timezone = default_timezone
        self.adapters = adapters if adapters is not None else {}
        """Channels by name: the way back to each (shared with the outbox)."""
        self.hooks = tuple(hooks)
        """Awaited after every stored turn; a failing hook is logged, never fatal."""
        # In-process by default (SQLite: one process); across processes on PostgreSQL.
        self._locks: ConversationLock[int] = locks if locks is not None else KeyedLocks[int]()
        """Serialises the turns of one conversation (by conversation id)."""
        self._arriving: dict[tuple[str, str, str, str], int] = {}
        """Messages being handled per chat address, in this process (see ``_alone``)."""
        self.early = tuple(h for h in inputs if h.before_storing)
        """Features' inputs taken instead of a message (a shared location)."""
        self.inputs = tuple(h for h in inputs if not h.before_storing)
        """Features' inputs taken with a stored message (documents, photos), in order."""

    async def is_known(self, channel: str, account: str, sender_id: str) -> bool:
        """May this sender use lifebot (paired, linked or allowlisted)?

        Adapters ask before costly work such as transcribing a voice note.
        """
        if f"{channel}:{sender_id}" in self.allowlist:
            return True
        async with self.db.session() as s:
            return await UserRepo(s).find_identity(channel, account, sender_id) is not None

    async def left_unanswered(self) -> list[Message]:
        """Messages a crash left unanswered (call before any channel starts taking new ones).

        On PostgreSQL other ``serve`` processes may be answering messages right now: only
        those older than a turn's wall-time cap (plus a margin) count as left behind there.
        """
        before = None
        if not self.db.is_sqlite:
            grace = timedelta(seconds=self.agent.limits.wall_seconds + 30)
            before = self.clock.now() - grace
        async with self.db.session() as s:
            return await MessageRepo(s).unanswered(before)

    async def recover_unanswered(self, rows: Sequence[Message]) -> int:
        """At start-up: messages a crash left unanswered are offered for /retry, once each.

        A turn killed mid-way (kill -9, power loss) leaves its inbound message ``received``;
        the channel will not deliver it again. Each such message moves to ``pending_retry``
        in one conditional UPDATE (so it is offered once, whoever else recovers at the same
        time) and its sender is told, with a button that answers it. Returns how many.
        """
        offered = 0
        for row in rows:
            assert row.id is not None
            async with self.db.session() as s:
                if not await MessageRepo(s).move_status(row.id, "received", "pending_retry"):
                    continue
            offered += 1
            snippet = row.text if len(row.text) <= 80 else row.text[:79] + "…"
            notice = OutboundMessage(
                Address(row.channel, row.account, row.chat_id),
                f"Sorry, lifebot restarted while answering your message “{snippet}”. "
                "Send /retry (or press the button) and I'll answer it now.",
                buttons=[Button("Answer it now", f"/retry {row.id}")],
                reply_to=row.external_id,
                kind="notice",
            )
            if await self._send_quietly(notice) is None:
                # Nobody to tell right now (the web page is closed): the notice waits in the
                # conversation, where the page shows it with the message's Retry button.
                await self._keep_notice(row, notice.text)
        if offered:
            log.warning("offered %d message(s) left unanswered by a restart for /retry", offered)
        return offered

    async def _keep_notice(self, row: Message, text: str) -> None:
        """Store a notice about ``row`` in its conversation (shown by pages that read it)."""
        if row.user_id is None or row.conversation_id is None:
            return
        async with self.db.session() as s:
            await MessageRepo(s).add(
                row.user_id,
                row.conversation_id,
                role="notice",
                text=text,
                direction="out",
                channel=row.channel,
                chat_id=row.chat_id,
                reply_to_id=row.id,
            )

    def register(self, adapter: ChannelAdapter) -> None:
        """Make an adapter the way back to its channel."""
        self.adapters[adapter.name] = adapter

    async def handle(self, msg: InboundMessage) -> DispatchResult:
        """Handle one inbound message; never raises except on cancellation."""
        began = time.monotonic()
        result = await self._handle_safely(msg)
        replied = result.receipt is not None
        observe_turn(msg.address.channel, result.status, replied, time.monotonic() - began)
        return result

    async def _handle_safely(self, msg: InboundMessage) -> DispatchResult:
        msg.text = clean_text(msg.text)  # the boundary: nothing unstorable goes further
        if msg.sender_name is not None:
            msg.sender_name = clean_text(msg.sender_name)
        if msg.callback_data is not None:
            msg.callback_data = clean_text(msg.callback_data)
        try:
            with logctx.bind(channel=msg.address.channel, chat=msg.address.chat_id):
                return await self._handle(msg)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception(
                "failed to handle a message (channel=%s chat=%s message=%s)",
                msg.address.channel,
                msg.address.chat_id,
                msg.message_id,
            )
            saved = await self._keep_for_retry(msg)
            await self._send_quietly(
                OutboundMessage(
                    msg.address,
                    "Sorry, something went wrong on my side and I couldn't answer that. "
                    + (
                        "Your message is saved; send /retry to try again."
                        if saved
                        else "I couldn't keep your message either: please send it again."
                    ),
                    reply_to=msg.message_id,
                    kind="notice",
                )
            )
            return DispatchResult("failed")
        finally:
            msg.accept()  # stored, dropped or failed: the channel may acknowledge it now

    async def _take_early(
        self, msg: InboundMessage, handler: InputHandler
    ) -> DispatchResult | None:
        """An input taken before storing goes to its feature, never to the agent or history.

        None: the message takes the normal path after all (a stranger's first share pairs).
        """
        async with self.db.session() as s:
            users = UserRepo(s)
            a = msg.address
            ident = await users.find_identity(a.channel, a.account, msg.sender_id)
            user = await users.get(ident.user_id) if ident is not None else None
        out = await handler.take(InputContext(user, msg, None, None))
        if user is None:
            return None if out.go_on else DispatchResult("ignored")
        receipt = None
        if out.notice is not None:
            receipt = await self._send_quietly(
                OutboundMessage(msg.address, out.notice, reply_to=msg.message_id, kind="notice")
            )
        return DispatchResult(str(handler.kind), out.notice, receipt)

    async def _keep_for_retry(self, msg: InboundMessage) -> bool:
        """After a failure, leave a person's stored message waiting for /retry.

        True only when it really waits there: the reply must not promise what is not so.
        """
        try:
            async with self.db.session() as s:
                return await MessageRepo(s).mark_unanswered(msg.dedupe_key)
        except Exception:  # the database may be what failed; the reply still goes out
            log.exception("could not mark a failed message for /retry")
            return False

    async def _handle(self, msg: InboundMessage) -> DispatchResult:
        a = msg.address
        key = (a.channel, a.account, a.chat_id, a.thread_id or "")
        self._arriving[key] = self._arriving.get(key, 0) + 1
        try:
            return await self._handle_counted(msg)
        finally:
            left = self._arriving.pop(key) - 1
            if left:
                self._arriving[key] = left

    def _alone(self, msg: InboundMessage) -> bool:
        """No other message of this chat is anywhere on its way through this process.

        Counted from before a message is stored to the end of its handling, so an earlier
        message that is stored but not yet in its turn is always counted. On SQLite there is
        one process (the conversation lock is in-process too): alone means no earlier message
        can be waiting, and the turn skips asking the database.
        """
        a = msg.address
        return self._arriving.get((a.channel, a.account, a.chat_id, a.thread_id or ""), 0) <= 1

    async def _handle_counted(self, msg: InboundMessage) -> DispatchResult:
        for handler in self.early:
            if handler.takes(msg):
                handled = await self._take_early(msg, handler)
                if handled is not None:
                    return handled
        known = await self._record_known(msg)
        if known is not None:
            sender, conversation, stored, start = known
            if stored is None:
                log.info("dropped a redelivered message (channel=%s)", msg.address.channel)
                return DispatchResult("duplicate")
            return await self._known_turn(sender, conversation, msg, stored, start)
        return await self._handle_other(msg)

    async def _handle_other(self, msg: InboundMessage) -> DispatchResult:
        """A message not from a known chat account: a stranger, a link, or a signed-in web user.

        Stored first of all, then resolved: a stranger's message is erased again and the
        pairing reply goes out; a web upload's user came proven with it.
        """
        async with self.db.session() as s:
            message_id = await MessageRepo(s).record_inbound(msg)
        if message_id is None:
            log.info("dropped a redelivered message (channel=%s)", msg.address.channel)
            return DispatchResult("duplicate")

        async with self.db.session() as s:
            if msg.user_id is not None:  # the channel proved who it is (a web session, a token)
                res = Resolution(await UserRepo(s).get(msg.user_id))
            else:
                res = await resolve(
                    s,
                    msg,
                    allowlist=self.allowlist,
                    timezone=self.default_timezone,
                    now=self.clock.now(),
                )
            if res.user is None or res.user.id is None:
                await MessageRepo(s).erase_stranger_message(message_id)
            else:
                conv = await ConversationRepo(s).get_or_create(res.user.id, msg.address)
                assert conv.id is not None
                await ConversationRepo(s).touch(conv, msg.received_at)
                await MessageRepo(s).claim_for_user(message_id, res.user.id, conv.id)
                if res.identity is not None and msg.private:
                    # Only a DM becomes the place pushes go: never a group or public channel.
                    await UserRepo(s).touch_identity(res.identity, msg.address.chat_id)
                conv_id = conv.id
                logctx.add(user=res.user.id, conversation=conv.id, turn=message_id)
        # Stored in its conversation: a webhook may answer now (the turn follows).
        msg.accept()
        user = res.user
        if user is None and msg.user_id is not None:
            return DispatchResult("ignored")  # the signed-in user was deleted meanwhile
        if user is None:
            reply = res.reply or ""
            for note in res.notify:  # a link question goes to the account being linked into
                await self._send_quietly(note)
            receipt = await self._send_quietly(
                OutboundMessage(msg.address, reply, reply_to=msg.message_id, kind="pairing")
            )
            return DispatchResult("linking" if res.notify else "pairing", reply, receipt)

        return await self._known_turn(user, conv_id, msg, message_id)

    async def _record_known(
        self, msg: InboundMessage
    ) -> tuple[User, int, int | None, _TurnStart | None] | None:
        """A known sender's message stored in its conversation.

        (user, conversation, row id, what its turn reads). The hot path, one unit of work:
        one read finds the identity, the user and the conversation, then the message is
        stored with them (the row id is None for a redelivery). None for a stranger, who
        takes the pairing path (stored first of all).

        On SQLite, a plain message with no other of its chat on its way reads what its turn
        needs in this same unit (one unit of work fewer per message): nothing else can be in
        that conversation's turn (one process, and this chat has no other message in it), so
        the conversation's lock, taken right after, is free and adds nothing to the reads.
        """
        a = msg.address
        async with self.db.session() as s:
            found = await UserRepo(s).sender(
                a.channel, a.account, msg.sender_id, a.chat_id, a.thread_id or ""
            )
            if found is None:
                return None
            ident, user, conv, asked = found
            assert user.id is not None
            if conv is None:  # the first message at this chat (or thread)
                conv = await ConversationRepo(s).get_or_create(user.id, a)
            assert conv.id is not None
            message_id = await MessageRepo(s).record_inbound(
                msg, user_id=user.id, conversation_id=conv.id
            )
            if message_id is None:
                return user, conv.id, None, None
            await ConversationRepo(s).touch(conv, msg.received_at)
            if msg.private:
                # Only a DM becomes the place pushes go: never a group or public channel.
                await UserRepo(s).touch_identity(ident, a.chat_id)
            logctx.add(user=user.id, conversation=conv.id, turn=message_id)
            start = None
            if self.db.is_sqlite and self._alone(msg) and self._plain(msg):
                start = await self._start_turn(s, user, conv.id, msg, thread=conv, asked=asked)
        return user, conv.id, message_id, start

    async def _start_turn(
        self,
        s: AsyncSession,
        user: User,
        conv_id: int,
        msg: InboundMessage,
        *,
        thread: Conversation | None = None,
        asked: bool = True,
    ) -> _TurnStart:
        """A plain message's first reads, in the caller's unit of work.

        Does it answer a question we asked (taken here, so the turn does not read again), and
        if not, what the agent's prompt is built from. ``thread``: the conversation's row as
        this unit read it (not read again); ``asked``: False when this unit already saw that
        no question waits (the sender's read), so none is looked up.
        """
        taken = await self.commands.take_answer_line(s, user, msg) if asked else None
        reads = None
        if taken is None and user.id is not None:
            reads = await self.agent.read_context(
                s, user.id, conv_id, trusted=not msg.overheard, thread=thread
            )
        return _TurnStart(taken, reads)

    async def _known_turn(
        self,
        user: User,
        conv_id: int,
        msg: InboundMessage,
        message_id: int,
        start: _TurnStart | None = None,
    ) -> DispatchResult:
        # Stored in its conversation: a webhook may answer now (the turn follows).
        msg.accept()
        if start is not None:  # read with the message itself: no earlier one can be waiting
            async with self._locks.hold(conv_id):
                result = await self._in_turn(user, conv_id, msg, message_id, start=start)
        else:
            result = await self._turn_in_order(user, conv_id, msg, message_id)
        # Hooks (indexing, extraction, proposals) run after the lock: the person's next
        # message never waits for them.
        if result.turn is not None:
            await self._run_hooks(result.turn)
        return result

    async def _turn_in_order(
        self, user: User, conv_id: int, msg: InboundMessage, message_id: int
    ) -> DispatchResult:
        """Take the conversation's turn; an earlier message that lost the race goes first.

        With several processes, a later message can reach the lock before an earlier one that
        arrived at a busier process; it steps back (briefly, within ORDER_WAIT) so answers
        keep the order the person wrote in.
        """
        deadline = time.monotonic() + ORDER_WAIT
        plain = self._plain(msg)
        while True:
            async with self._locks.hold(conv_id):
                if time.monotonic() >= deadline:
                    return await self._in_turn(user, conv_id, msg, message_id)
                # One unit of work: is an earlier message waiting, and if not, does this one
                # answer a question we asked (taken here, so the turn does not read again),
                # and if not, what the agent's prompt is built from (read here too).
                start: _TurnStart | None = None
                async with self.db.session() as s:
                    waiting = not (self.db.is_sqlite and self._alone(msg)) and (
                        await MessageRepo(s).earlier_waiting(
                            conv_id, message_id, msg.received_at, timedelta(seconds=30)
                        )
                    )
                    if not waiting and plain:
                        start = await self._start_turn(s, user, conv_id, msg)
                if not waiting:
                    return await self._in_turn(user, conv_id, msg, message_id, start=start)
            await asyncio.sleep(0.05)

    def _plain(self, msg: InboundMessage) -> bool:
        """Words alone (no feature's input, no command): the turn may answer our question."""
        if any(h.takes(msg) for h in self.inputs):
            return False
        return self.commands.command_line(msg) is None

    async def _in_turn(
        self,
        user: User,
        conv_id: int,
        msg: InboundMessage,
        message_id: int,
        *,
        start: _TurnStart | None = None,
    ) -> DispatchResult:
        """The turn itself.

        ``start``: what a plain message's turn already read (its answer check and the agent's
        prompt rows).
        """
        text = msg.callback_data if msg.callback_data is not None else msg.text
        handlers = [h for h in self.inputs if h.takes(msg)]
        if handlers:
            return await self._inputs_turn(handlers, user, conv_id, msg, message_id)
        line = self.commands.command_line(msg)
        if line is None:  # perhaps the answer to a question we asked ("What was this place?")
            line = start.taken if start is not None else await self.commands.answer_line(user, msg)
        if line is None:  # or the sender's own link code, pasted back where it was given
            line = await self.commands.own_code_line(user, msg)
        if line is not None:
            reply = await self.commands.handle(user, msg, conv_id, line)
            if reply.retry_message_id is not None:
                return await self._retry(user, conv_id, msg, reply.retry_message_id, message_id)
            if reply.resume_text is not None:  # a question back was answered: go on
                return await self._answer(
                    user,
                    conv_id,
                    msg.address,
                    reply.resume_text,
                    message_id,
                    msg.message_id,
                    trusted=not msg.overheard,
                )
            for note in reply.notify:
                await self._send_quietly(note)
            uid = user.id or 0

            async def answered(s: AsyncSession) -> None:
                await MessageRepo(s).set_status(uid, message_id, "answered")

            receipt, _ = await self._deliver(
                user,
                conv_id,
                msg.address,
                reply.text,
                reply_to=msg.message_id,
                in_reply_to=message_id,
                buttons=reply.buttons,
                image=reply.image,
                also=answered,
            )
            return DispatchResult("command", reply.text, receipt)
        return await self._answer(
            user,
            conv_id,
            msg.address,
            text,
            message_id,
            msg.message_id,
            trusted=not msg.overheard,
            spoken=any(a.kind in ("voice", "audio") for a in msg.attachments),
            reads=start.reads if start is not None else None,
        )

    async def _inputs_turn(
        self,
        handlers: list[InputHandler],
        user: User,
        conv_id: int,
        msg: InboundMessage,
        message_id: int,
    ) -> DispatchResult:
        """Each feature takes its input (in registration order), then the words go on.

        A feature's fixed reply answers the message; else its words go to the agent with
        the pictures the features handed over.
        """
        images: list[str] = []
        said: DispatchResult | None = None
        for handler in handlers:
            out = await handler.take(InputContext(user, msg, conv_id, message_id))
            if out.notice is not None:
                await self._send_quietly(
                    OutboundMessage(msg.address, out.notice, reply_to=msg.message_id, kind="notice")
                )
            images.extend(out.images)
            if out.reply is not None:
                said = await self._say(
                    user, conv_id, msg, message_id, out.reply, assistant=out.assistant
                )
        if said is not None:
            return said
        return await self._answer(
            user,
            conv_id,
            msg.address,
            msg.text,
            message_id,
            msg.message_id,
            trusted=not msg.overheard,
            images=images,
            spoken=any(a.kind in ("voice", "audio") for a in msg.attachments),
        )

    async def _say(
        self,
        user: User,
        conv_id: int,
        msg: InboundMessage,
        message_id: int,
        reply: str,
        *,
        assistant: bool = True,
    ) -> DispatchResult:
        """Answer a message with fixed words (no model turn); it counts as answered."""
        assert user.id is not None
        async with self.db.session() as s:
            await MessageRepo(s).set_status(user.id, message_id, "answered")
        receipt, reply_id = await self._deliver(
            user,
            conv_id,
            msg.address,
            reply,
            reply_to=msg.message_id,
            in_reply_to=message_id,
            assistant=assistant,
        )
        turn = StoredTurn(user.id, conv_id, message_id, reply_id, "answered")
        return DispatchResult("answered", reply, receipt, turn)

    async def _retry(
        self, user: User, conv_id: int, msg: InboundMessage, pending_id: int, retry_msg_id: int
    ) -> DispatchResult:
        async with self.db.session() as s:
            repo = MessageRepo(s)
            pending = await repo.get(user.id or 0, pending_id)
            await repo.set_status(user.id or 0, retry_msg_id, "answered")
        if pending is None:
            return DispatchResult("command", "Nothing to retry.")
        overheard = bool((pending.meta or {}).get("overheard"))
        # A question asked with a photo is asked with it again (the model looks at it anew).
        images: list[str] = []
        for handler in self.inputs:
            images.extend(await handler.again(pending.meta))
        return await self._answer(
            user,
            conv_id,
            msg.address,
            pending.text,
            pending_id,
            pending.external_id,
            trusted=not overheard,
            images=images,
        )

    async def _answer(
        self,
        user: User,
        conv_id: int,
        address: Address,
        text: str,
        message_id: int,
        reply_to: str | None,
        *,
        trusted: bool = True,
        images: Sequence[str] = (),
        spoken: bool = False,
        reads: TurnReads | None = None,
    ) -> DispatchResult:
        """One agent turn, stored and delivered; ``spoken``: the question was a voice note."""
        assert user.id is not None
        adapter = self.adapters.get(address.channel)
        stream: ReplyStream | None = None
        if isinstance(adapter, StreamingAdapter):
            stream = adapter.open_stream(address, reply_to)

        async def on_event(event: AgentEvent) -> None:
            if stream is None:
                return
            try:
                if isinstance(event, ToolStarted):
                    await stream.progress(event.label)
                elif isinstance(event, TextDelta):
                    await stream.delta(event.text)
            except ChannelError as exc:
                log.warning("could not show progress on %s: %s", address.channel, exc)

        status = "answered"
        try:
            outcome = await self.agent.answer(
                user,
                conv_id,
                text,
                message_id,
                on_event,
                trusted=trusted,
                images=images,
                reads=reads,
            )
        except AgentError as exc:
            log.warning("LLM unavailable for user %s: %s", user.id, exc)
            outcome = TurnOutcome(llm_down_text(exc))
            # Too long for the model: it would fail the same way again, so it is not kept
            # for /retry (the person is told to send it in parts).
            status = "too_long" if isinstance(exc, LLMInputTooLong) else "llm_down"
        user_id = user.id

        async def store_turn(s: AsyncSession) -> None:
            for write in outcome.writes:  # what the turn left for its commit (thread summary)
                await write(s)
            repo = MessageRepo(s)
            for item in outcome.transcript:
                await repo.add(
                    user_id,
                    conv_id,
                    role=item["role"],
                    text=str(item.get("content") or ""),
                    tool_calls=item.get("tool_calls"),
                    tool_call_id=item.get("tool_call_id"),
                    reply_to_id=message_id,
                    flush=False,
                )
            await repo.set_status(
                user_id, message_id, "pending_retry" if status == "llm_down" else "answered"
            )

        receipt, reply_id = await self._deliver(
            user,
            conv_id,
            address,
            outcome.text,
            reply_to=reply_to,
            in_reply_to=message_id,
            citations=outcome.citations,
            stream=stream,
            assistant=status == "answered",
            speak=user.voice_replies == "always" or (user.voice_replies == "inbound" and spoken),
            buttons=outcome.buttons,
            also=store_turn,
        )
        turn = StoredTurn(user.id, conv_id, message_id, reply_id, status)
        return DispatchResult(status, outcome.text, receipt, turn)

    async def _run_hooks(self, turn: StoredTurn) -> None:
        for hook in self.hooks:
            try:
                await hook(turn)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception(
                    "a turn hook failed (user=%s conv=%s)", turn.user_id, turn.conversation_id
                )

    async def _deliver(
        self,
        user: User,
        conv_id: int,
        address: Address,
        text: str,
        *,
        reply_to: str | None,
        in_reply_to: int,
        buttons: list[Button] | None = None,
        citations: list[dict[str, Any]] | None = None,
        stream: ReplyStream | None = None,
        assistant: bool = True,
        image: Image | None = None,
        speak: bool = False,
        also: Callable[[AsyncSession], Awaitable[None]] | None = None,
    ) -> tuple[Receipt | None, int]:
        """Store the reply, send it, then store the channel's receipt; (receipt, row id).

        ``also`` writes the rest of the turn (transcript, the inbound message's status) in
        the reply's own unit of work: one commit stores the whole turn.
        """
        assert user.id is not None
        async with self.db.session() as s:
            if also is not None:
                await also(s)
            row_id = await MessageRepo(s).add_row(
                user.id,
                conv_id,
                role="assistant" if assistant else "notice",
                text=text,
                direction="out",
                channel=address.channel,
                chat_id=address.chat_id,
                citations=citations,
                reply_to_id=in_reply_to,
            )
        out = OutboundMessage(
            address,
            text,
            buttons=buttons or [],
            citations=[_local(Citation.from_dict(c), user.timezone) for c in citations or []],
            reply_to=reply_to,
            image=image,
            speak=speak,
        )
        user_id = user.id

        async def record(s: AsyncSession, receipt: Receipt) -> None:
            await DeliveryRepo(s).record_sent(
                user_id,
                message_id=row_id,
                channel=address.channel,
                chat_id=address.chat_id,
                receipt=receipt.message_id,
                kind="reply",
                now=self.clock.now(),
            )

        outcome = await send_and_record(
            (lambda: stream.finish(out)) if stream is not None else (lambda: self._send(out)),
            tx=self.db.session,
            user_id=user_id,
            message_id=row_id,
            address=address,
            record=record,
            now=self.clock.now(),
        )
        if isinstance(outcome, Unreachable):
            log.warning(
                "%s identity of user %s is unreachable: %s", address.channel, user_id, outcome
            )
        elif isinstance(outcome, ChannelError):
            log.warning("could not deliver a reply on %s: %s", address.channel, outcome)
        return (outcome if isinstance(outcome, Receipt) else None), row_id

    async def _send(self, out: OutboundMessage) -> Receipt:
        adapter = self.adapters.get(out.address.channel)
        if adapter is None:
            raise ChannelError(f"no adapter is running for channel {out.address.channel!r}")
        return await adapter.send(out)

    async def _send_quietly(self, out: OutboundMessage) -> Receipt | None:
        try:
            return await self._send(out)
        except ChannelError as exc:
            log.warning("could not send a %s message on %s: %s", out.kind, out.address.channel, exc)
            return None


def _local(citation: Citation, timezone: str) -> Citation:
    """The citation with its time in the person's own zone (channels print it as is)."""
    if citation.ts is None:
        return citation
    return dataclasses.replace(citation, ts=citation.ts.astimezone(zone(timezone)))

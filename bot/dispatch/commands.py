"""Slash commands: deterministic, channel-agnostic, never call the LLM.

The table holds the spine's own commands (pairing, linking, tasks, retry); every
feature registers its own from its package through ``bot.chat.CommandTable`` (memory's
/remember and /facts in ``bot/agent/memory/commands.py``, the journal's in
``bot/agent/journal/commands.py``, the scheduler's /briefing, /quiet and /tz in
``bot/jobs/commands.py``) and declares their names in its ``Feature.commands``.
"""

from __future__ import annotations

from datetime import timedelta

from sqlmodel.ext.asyncio.session import AsyncSession

from bot.chat import CommandContext, CommandFn, CommandReply, Trigger, row_id
from bot.clock import Clock
from bot.dispatch.identity import (
    LINK_TTL,
    approve,
    code_in,
    confirm_link,
    is_own_link_code,
    issue_link_code,
    known_chat_link_reply,
)
from bot.messages import Address, InboundMessage, OutboundMessage
from storage.db import Database
from storage.models import User
from storage.repos.answers import AnswerRepo
from storage.repos.messages import MessageRepo
from storage.repos.tasks import TaskRepo

ANSWER_TTL = timedelta(hours=1)
"""How long a question asked in a command's reply waits for the answer."""
MAX_ANSWER = 120
"""Longer messages are not taken as a short answer (a name, a title)."""

PUBLIC_COMMANDS = frozenset({"start", "help"})
"""The only commands answered in a group or channel: every other answer is private (codes,
facts, tasks, settings) and goes only to a one-to-one chat."""


MAX_TASK_TITLE = 200
"""Longest task title, as the model's task tool and meeting action items keep it."""


class Commands:
    """The command table."""

    def __init__(self, db: Database, clock: Clock, default_timezone: str) -> None:
        self.db = db
        self.clock = clock
        self.default_timezone = default_timezone
        self._table: dict[str, tuple[CommandFn, str]] = {}
        self._triggers: list[Trigger] = []
        for name, fn, help_text in (
            ("start", self._start, "welcome"),
            ("help", self._help, "what I can do"),
            (
                "link",
                self._link,
                "link another channel to this one (/link, then send the code there)",
            ),
            ("approve", self._approve, "owner: approve a pairing code (/approve CODE)"),
            ("tasks", self._tasks, "list your open tasks"),
            ("task", self._task, "add or finish a task: /task add buy milk | /task done ID"),
            ("retry", self._retry, "answer your last unanswered message again (or /retry ID)"),
        ):
            self.register(name, fn, help_text)

    def register(self, name: str, fn: CommandFn, help_text: str) -> None:
        """Add a command; a name registered twice is refused (one of them would be dead)."""
        if name in self._table:
            raise ValueError(f"/{name} is registered twice")
        self._table[name] = (fn, help_text)

    def add_trigger(self, trigger: Trigger) -> None:
        """Let a feature claim some plain messages as commands (deterministic, no LLM)."""
        self._triggers.append(trigger)

    def command_line(self, msg: InboundMessage) -> str | None:
        """The command this message runs: a "/..." text or button, or a trigger's; else None."""
        text = msg.callback_data if msg.callback_data is not None else msg.text
        if text.strip().startswith("/"):
            return text
        for trigger in self._triggers:
            line = trigger(msg)
            if line is not None:
                return line
        return None

    def menu(self) -> list[tuple[str, str]]:
        """(command, description) pairs for channel menus such as Telegram's setMyCommands."""
        return [(n, h) for n, (_, h) in self._table.items()]

    def handler(self, name: str) -> CommandFn | None:
        """The function registered for ``name`` (the contract tests ask where it lives)."""
        entry = self._table.get(name)
        return entry[0] if entry is not None else None

    @staticmethod
    def parse(text: str) -> tuple[str, str]:
        """Split "/cmd@bot args" into ("cmd", "args")."""
        # Any white space ends the name: "/memoryfile" may be followed by a new line.
        parts = text.strip().split(maxsplit=1) or [""]
        rest = parts[1].strip() if len(parts) > 1 else ""
        return parts[0].lstrip("/").split("@", 1)[0].lower(), rest

    async def handle(
        self, user: User, msg: InboundMessage, conversation_id: int, line: str | None = None
    ) -> CommandReply:
        """Run ``line``, or the command in the message (a pressed button's data, else its text)."""
        if line is None:
            line = msg.callback_data if msg.callback_data is not None else msg.text
        name, args = self.parse(line)
        entry = self._table.get(name)
        if entry is None:
            return CommandReply(f"I don't know /{name}. Send /help to see what I can do.")
        if not msg.private and name not in PUBLIC_COMMANDS:
            return CommandReply(
                f"I only answer /{name} in a private chat with me, so nothing of yours shows "
                "up where others can read it. Send it to me directly."
            )
        reply = await entry[0](CommandContext(user, msg, conversation_id, args))
        if reply.expect is not None and user.id is not None:
            now = self.clock.now()
            async with self.db.session() as s:
                await AnswerRepo(s).ask(user.id, reply.expect, now, now + ANSWER_TTL)
        return reply

    async def answer_line(self, user: User, msg: InboundMessage) -> str | None:
        """The command a plain message completes when it answers our open question; else None.

        Only the very next plain message counts: anything else (a question of its own, a long
        message) clears the question and goes to the agent as usual.
        """
        if not self._may_answer(user, msg):
            return None
        async with self.db.session() as s:
            return await self.take_answer_line(s, user, msg)

    async def own_code_line(self, user: User, msg: InboundMessage) -> str | None:
        """``/link CODE`` when a plain message is only the sender's own live link code.

        Pasted back into the chat that asked for it, the code gets /link's words on where it
        goes, not the model's guess. Any other text of that shape ("THURSDAY") is left to
        the agent; the database is read only for texts shaped like a code.
        """
        code = code_in(msg.text) if msg.callback_data is None else None
        if code is None or user.id is None:
            return None
        async with self.db.session() as s:
            own = await is_own_link_code(s, user.id, code, self.clock.now())
        return f"/link {code}" if own else None

    @staticmethod
    def _may_answer(user: User, msg: InboundMessage) -> bool:
        # Overheard speech (a pendant listening to a room) never answers for the person.
        return not (
            user.id is None or msg.callback_data is not None or not msg.private or msg.overheard
        )

    async def take_answer_line(
        self, s: AsyncSession, user: User, msg: InboundMessage
    ) -> str | None:
        """``answer_line`` in the caller's unit of work (dispatch's check under the lock)."""
        if not self._may_answer(user, msg) or user.id is None:
            return None
        command = await AnswerRepo(s).take(user.id, self.clock.now())
        text = msg.text.strip()
        if command is None or not _short_answer(text):
            return None
        return f"{command} {text}"

    async def _start(self, ctx: CommandContext) -> CommandReply:
        return CommandReply(
            "Hi! I'm lifebot. Tell me things to remember, ask me about them later, or send "
            "/help to see everything I can do."
        )

    async def _help(self, ctx: CommandContext) -> CommandReply:
        lines = [f"/{n} - {h}" for n, h in self.menu()]
        return CommandReply("Commands:\n" + "\n".join(lines))

    async def _link(self, ctx: CommandContext) -> CommandReply:
        answer, _, code = ctx.args.partition(" ")
        if answer.lower() in ("yes", "no") and code:
            async with self.db.session() as s:
                text, notify = await confirm_link(
                    s, ctx.user_id, code.strip(), yes=answer.lower() == "yes", now=self.clock.now()
                )
            return CommandReply(text, notify=notify)
        given = code_in(ctx.args)
        if given is not None:  # a code from another chat, pasted into one already known
            async with self.db.session() as s:
                return CommandReply(
                    await known_chat_link_reply(s, ctx.user, given, self.clock.now())
                )
        async with self.db.session() as s:
            code = await issue_link_code(s, ctx.user_id, ctx.msg, self.clock.now())
        minutes = int(LINK_TTL.total_seconds() // 60)
        return CommandReply(
            f"Your link code is {code} (valid for {minutes} minutes, once; a new /link "
            "replaces it). Send it to me from the other channel (Telegram, Slack, ...); I'll "
            "ask you here to confirm, then both chats share one memory. Never share the code."
        )

    async def _approve(self, ctx: CommandContext) -> CommandReply:
        if not ctx.user.is_owner:
            return CommandReply("Only the owner can approve pairing codes.")
        if not ctx.args:
            return CommandReply("Usage: /approve CODE")
        async with self.db.session() as s:
            req = await approve(s, ctx.args, self.clock.now(), self.default_timezone)
        if req is None:
            return CommandReply(f"{ctx.args} is not a pending pairing code (it may have expired).")
        welcome = OutboundMessage(
            Address(req.channel, req.account, req.chat_id),
            "You're approved! Say hi, or send /help to see what I can do.",
            kind="notice",
        )
        who = req.display_name or req.sender_id
        return CommandReply(f"Approved {who} on {req.channel}.", notify=[welcome])

    async def _tasks(self, ctx: CommandContext) -> CommandReply:
        async with self.db.session() as s:
            tasks = await TaskRepo(s).list(ctx.user_id)
        if not tasks:
            return CommandReply("No open tasks.")
        return CommandReply("\n".join(f"#{t.id} {t.title}" for t in tasks))

    async def _task(self, ctx: CommandContext) -> CommandReply:
        """/task add TITLE, /task done ID: tasks without a language model."""
        verb, _, rest = ctx.args.strip().partition(" ")
        rest = rest.strip()
        if verb.lower() == "add" and rest:
            if len(rest) > MAX_TASK_TITLE:
                return CommandReply(
                    f"A task is at most {MAX_TASK_TITLE} characters (this one has {len(rest)}): "
                    "give it a short title, and keep the details with /remember."
                )
            async with self.db.session() as s:
                task = await TaskRepo(s).add(ctx.user_id, rest)
            return CommandReply(f"Added task #{task.id}: {task.title}")
        ident = row_id(rest)
        if verb.lower() in ("done", "finish", "complete") and ident is not None:
            async with self.db.session() as s:
                done = await TaskRepo(s).complete(ctx.user_id, ident, self.clock.now())
            if done is None:
                return CommandReply(f"You have no open task {rest}. /tasks lists them.")
            return CommandReply(f"Done: {done.title}")
        return CommandReply("Usage: /task add buy milk, or /task done ID (/tasks shows the ids)")

    async def _retry(self, ctx: CommandContext) -> CommandReply:
        """/retry: the newest message here that waits; /retry ID: that one (a page's button)."""
        wanted = row_id(ctx.args) if ctx.args.strip() else None
        if ctx.args.strip() and wanted is None:
            return CommandReply("Usage: /retry, or /retry ID (the number of a waiting message).")
        async with self.db.session() as s:
            repo = MessageRepo(s)
            if wanted is None:
                pending = await repo.latest_pending(ctx.user_id, ctx.conversation_id)
            else:
                pending = await repo.get(ctx.user_id, wanted)
                if not (
                    pending is not None
                    and pending.conversation_id == ctx.conversation_id
                    and pending.direction == "in"
                    and pending.status == "pending_retry"
                ):
                    pending = None
        if pending is None or pending.id is None:
            return CommandReply("There is nothing waiting to be answered.")
        return CommandReply("", retry_message_id=pending.id)


def _short_answer(text: str) -> bool:
    """A name or a title: one short line, not a question."""
    return 0 < len(text) <= MAX_ANSWER and "\n" not in text and not text.endswith("?")

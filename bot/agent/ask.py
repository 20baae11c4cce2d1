"""Questions back: the model asks one short question, the user answers with a button.

``ask_user`` ends the turn: the question goes out with a button per likely answer plus
"Other". The question lives on the stored message that started the turn (its ``meta``), so
a restart while it waits loses nothing: a later press of ``/answer <id> <n>`` finds it in the
database and runs the original request again with the answer added. A press after the
timeout says what was not done instead. "Other" asks for a typed answer, which arrives as an
ordinary message with the question already in the conversation's history.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from pydantic import BaseModel, Field
from sqlmodel import col, select

from bot.agent.tools.base import Tool, ToolContext
from bot.chat import row_id
from bot.messages import Button
from storage.db import Database
from storage.models import Message
from storage.repos.messages import MessageRepo
from storage.repos.outbox import OutboxRepo, Push

ANSWER_MARK = " - my answer: "
"""Joins a resumed request and the user's answer to the question asked back."""


def resumes_a_question(text: str) -> bool:
    """Whether ``text`` is a request resumed with the answer to a question asked back."""
    return ANSWER_MARK in text and '\n(You asked "' in text


ASK_TOOL_NAME = "ask_user"
OTHER = "other"
"""The data suffix of the "Other" button."""
EXPIRED = "expired"
"""The ``answered`` mark of a question nobody answered in time."""
LOOKBACK = timedelta(days=2)
"""How far past the timeout the sweep looks for questions left waiting (after downtime)."""


class AskArgs(BaseModel):
    """Arguments of ask_user."""

    question: str = Field(min_length=3, max_length=200, description="One short question")
    options: list[str] = Field(
        min_length=1, max_length=4, description="The likely answers, each a few words"
    )


@dataclass(frozen=True, slots=True)
class Ask:
    """A question put to the user during a turn."""

    question: str
    options: list[str]


async def _ask(_ctx: ToolContext, args: AskArgs) -> str:
    # The loop ends the turn on this call; the JSON is how the question reaches it.
    options = [o.strip()[:40] for o in args.options if o.strip()]
    return json.dumps({"question": args.question.strip(), "options": options})


ASK_TOOL = Tool(
    ASK_TOOL_NAME,
    "Ask the user one short question when the request is ambiguous in a way that matters "
    "(which of two people, which week). Give the likely answers as options; the user can also "
    "type another. The turn ends here and resumes with their answer.",
    AskArgs,
    _ask,
    "Asking you…",
)
"""The tool the model calls to ask back (always offered; it changes nothing)."""

WAITING = "(question sent to the user; their answer comes as their next message)"
"""What the transcript keeps as the ask_user result."""


def parse_ask(result: str) -> Ask | None:
    """The question in an ask_user result, or None when the call failed."""
    try:
        data = json.loads(result)
    except json.JSONDecodeError:
        return None
    if not isinstance(data, dict) or not data.get("options"):
        return None
    return Ask(str(data["question"]), [str(o) for o in data["options"]])


def ask_buttons(message_id: int, ask: Ask) -> list[Button]:
    """A button per option plus "Other"; each press names the stored question."""
    buttons = [Button(o, f"/answer {message_id} {i}") for i, o in enumerate(ask.options)]
    return [*buttons, Button("Other", f"/answer {message_id} {OTHER}")]


async def store_ask(
    db: Database, user_id: int, message_id: int, ask: Ask, request: str, now: datetime
) -> None:
    """Keep the question on the message that asked for it (survives restarts)."""
    async with db.session() as s:
        row = await MessageRepo(s).get(user_id, message_id)
        if row is None:
            return
        pending = {
            "question": ask.question,
            "options": ask.options,
            "request": request,
            "asked_at": now.isoformat(),
        }
        row.meta = {**(row.meta or {}), "ask": pending}  # a new dict: JSON columns need it
        s.add(row)


@dataclass(frozen=True, slots=True)
class Answered:
    """What a button press resolved to."""

    reply: str | None = None
    """Say this and stop (expired, unknown, already answered, "Other")."""
    resume: str | None = None
    """Run the agent on this text: the original request with the chosen answer."""


async def take_answer(  # noqa: PLR0911  (one outcome per case)
    db: Database, user_id: int, args: str, now: datetime, wait: timedelta
) -> Answered:
    """Resolve ``/answer <id> <n|other>`` against the stored question (once only)."""
    parts = args.split()
    message_id = row_id(parts[0]) if len(parts) == 2 else None
    if message_id is None:
        return Answered("Use the buttons under my question to answer it.")
    choice = parts[1]
    async with db.session() as s:
        row = await MessageRepo(s).get(user_id, message_id)
        meta: dict[str, Any] = dict(row.meta or {}) if row is not None else {}
        pending: dict[str, Any] | None = meta.get("ask")
        if row is None or pending is None:
            return Answered("I can't find that question any more. Please ask me again.")
        request = str(pending["request"])
        if pending.get("answered") == EXPIRED:
            return Answered(timed_out(request))
        if pending.get("answered"):
            return Answered("You already answered that question.")
        asked_at = datetime.fromisoformat(str(pending["asked_at"]))
        if now - asked_at > wait:
            row.meta = {**meta, "ask": {**pending, "answered": EXPIRED}}
            s.add(row)
            return Answered(timed_out(request))
        if choice == OTHER:
            row.meta = {**meta, "ask": {**pending, "answered": OTHER}}
            s.add(row)
            return Answered(f"Type your answer: {pending['question']}")
        options: list[str] = list(pending["options"])
        # ASCII digits only: "²" passes str.isdigit and then fails int()
        if not (choice.isascii() and choice.isdigit()) or int(choice) >= len(options):
            return Answered("That isn't one of the options. Use the buttons under my question.")
        picked = options[int(choice)]
        row.meta = {**meta, "ask": {**pending, "answered": picked}}
        s.add(row)
    return Answered(resume=f'{request}\n(You asked "{pending["question"]}"{ANSWER_MARK}{picked})')


def timed_out(request: str) -> str:
    """What was not done because a question went unanswered."""
    return (
        f'That question timed out, so I did not go on with "{request}". '
        "Ask me again if you still want it."
    )


async def time_out_questions(db: Database, now: datetime, wait: timedelta) -> int:
    """Tell each user whose question waited past ``wait`` what was not done; returns how many.

    The question is marked expired in the same transaction as the push is queued (the push
    key is the asking message, so a repeated sweep never tells twice).
    """
    pushes: list[Push] = []
    async with db.session() as s:
        res = await s.exec(
            select(Message).where(
                Message.direction == "in",
                col(Message.created_at) >= now - wait - LOOKBACK,
                col(Message.created_at) <= now - wait,
                col(Message.meta).is_not(None),
            )
        )
        for row in res.all():
            meta: dict[str, Any] = dict(row.meta or {})
            pending = meta.get("ask")
            if not isinstance(pending, dict) or pending.get("answered") or row.user_id is None:
                continue
            if now - datetime.fromisoformat(str(pending["asked_at"])) <= wait:
                continue
            row.meta = {**meta, "ask": {**pending, "answered": EXPIRED}}
            s.add(row)
            pushes.append(
                Push(
                    user_id=row.user_id,
                    kind="ask_timeout",
                    key=f"ask_timeout:{row.user_id}:{row.id}",
                    due_at=now,
                    text=f'I asked "{pending["question"]}" and got no answer. '
                    + timed_out(str(pending["request"])),
                )
            )
        if pushes:
            await OutboxRepo(s).enqueue(pushes, now)
    return len(pushes)


@dataclass(frozen=True, slots=True)
class Waiting:
    """A question lifebot asked that still waits for the user's answer."""

    message: Message
    """The user's message that led to the question (where the answer resumes)."""
    question: str
    options: list[str]


async def waiting_questions(
    db: Database, user_id: int, now: datetime, wait: timedelta
) -> list[Waiting]:
    """The user's unanswered questions still within ``wait``, newest first."""
    async with db.session() as s:
        res = await s.exec(
            select(Message)
            .where(
                Message.user_id == user_id,
                Message.direction == "in",
                col(Message.created_at) >= now - wait - LOOKBACK,
                col(Message.meta).is_not(None),
            )
            .order_by(col(Message.id).desc())
        )
        rows = list(res.all())
    out = []
    for row in rows:
        pending = (row.meta or {}).get("ask")
        if not isinstance(pending, dict) or pending.get("answered"):
            continue
        if now - datetime.fromisoformat(str(pending["asked_at"])) > wait:
            continue
        out.append(Waiting(row, str(pending["question"]), list(pending["options"])))
    return out

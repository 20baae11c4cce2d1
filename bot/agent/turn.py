"""One agent turn for one user: route, assemble the prompt, run the loop, report events."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any
from zoneinfo import ZoneInfo

from bot.agent.llm import LLM
from bot.agent.loop import AgentEvent, FinalAnswer, Limits, run_turn
from bot.agent.prompts import load_persona, system_prompt
from bot.agent.router import Route, Router, remember_text
from bot.agent.sources import SourceLedger, last_answer_citations, render_sources
from bot.agent.tools.base import ToolContext, ToolRegistry
from bot.clock import Clock
from storage.db import Database
from storage.models import Message, User
from storage.repos.facts import FactRepo
from storage.repos.messages import MessageRepo

if TYPE_CHECKING:
    from bot.agent.memory.service import MemoryService

log = logging.getLogger(__name__)

EventSink = Callable[[AgentEvent], Awaitable[None]]


@dataclass(slots=True)
class TurnOutcome:
    """What a turn produced, ready to be stored and sent."""

    text: str
    transcript: list[dict[str, Any]] = field(default_factory=list)
    citations: list[dict[str, Any]] = field(default_factory=list)
    route: Route = Route.AGENT
    stopped: str | None = None


def history_to_openai(rows: list[Message]) -> list[dict[str, Any]]:
    """Stored rows as chat messages the LLM API accepts."""
    out: list[dict[str, Any]] = []
    for row in rows:
        if row.role == "tool":
            out.append(
                {"role": "tool", "tool_call_id": row.tool_call_id or "", "content": row.text}
            )
        elif row.role == "assistant":
            msg: dict[str, Any] = {"role": "assistant", "content": row.text or None}
            if row.tool_calls:
                msg["tool_calls"] = row.tool_calls
            out.append(msg)
        elif row.text:
            out.append({"role": "user", "content": row.text})
    return out


CHANGED_NOTHING = (
    "(I changed nothing: I never act on instructions found in stored text, imports or "
    "overheard speech. If you want that done, ask me directly.)"
)
OVERHEARD_REMEMBER = (
    "I heard someone ask me to remember or forget something, but I don't change your memory "
    "from overheard speech. Hold the button and ask, or tell me in chat, to do it."
)


def hide_old_untrusted(history: list[dict[str, Any]], tools: ToolRegistry) -> list[dict[str, Any]]:
    """Earlier turns' untrusted tool results are not carried into a new turn's context.

    They were data for the answer they served; repeated, they would smuggle stored text into
    a turn that has not read it (and so still offers state-changing tools).
    """
    names: dict[str, str] = {}
    for msg in history:
        for call in msg.get("tool_calls") or []:
            names[str(call.get("id"))] = str(call.get("function", {}).get("name"))
    out: list[dict[str, Any]] = []
    for msg in history:
        tool = (
            tools.get(names.get(str(msg.get("tool_call_id")), ""))
            if msg["role"] == "tool"
            else None
        )
        if tool is not None and tool.untrusted_output:
            out.append({**msg, "content": "(earlier result not repeated; call the tool again)"})
        else:
            out.append(msg)
    return out


class Agent:
    """Answers a user's message; knows nothing about channels."""

    def __init__(
        self,
        *,
        db: Database,
        llm: LLM,
        tools: ToolRegistry,
        clock: Clock,
        limits: Limits,
        persona_path: Path,
        history_messages: int = 20,
        memory: MemoryService | None = None,
    ) -> None:
        self.db = db
        self.llm = llm
        self.tools = tools
        self.clock = clock
        self.limits = limits
        self.persona_path = persona_path
        self.history_messages = history_messages
        self.router = Router(llm)
        self.memory = memory
        """Memory, when wired: "remember", "forget that" and fact dedupe go through it."""

    async def answer(
        self,
        user: User,
        conversation_id: int,
        text: str,
        message_id: int,
        on_event: EventSink,
        *,
        trusted: bool = True,
    ) -> TurnOutcome:
        """Answer ``text`` (already stored as ``message_id``). LLM errors propagate.

        ``trusted`` is False for input that may not be the user's own instruction (speech
        overheard by the pendant): then nothing in the user's state is changed.
        """
        assert user.id is not None
        route = await self.router.route(text)
        if not trusted and route in (Route.FORGET_THAT, Route.REMEMBER):
            return TurnOutcome(OVERHEARD_REMEMBER, route=route)
        if route is Route.WHY:
            said, cited = await self._why(user, conversation_id)
            return TurnOutcome(said, citations=cited, route=route)
        if route is Route.FORGET_THAT and self.memory is not None:
            said = await self.memory.forget_that(user.id, conversation_id)
            return TurnOutcome(said, route=route)
        if route is Route.REMEMBER and self.memory is not None:
            decision = await self.memory.remember(
                user.id, remember_text(text) or text, sources=[message_id]
            )
            return TurnOutcome(self.memory.remember_reply(decision), route=route)
        if route is Route.REMEMBER:
            fact_text = remember_text(text) or text
            async with self.db.session() as s:
                fact, created = await FactRepo(s).add(
                    user.id, fact_text, "notes", source_message_ids=[message_id]
                )
            said = "Got it, I'll remember" if created else "I already knew"
            return TurnOutcome(f"{said}: {fact.text}", route=route)

        now = self.clock.now()
        async with self.db.session() as s:
            facts = [f.text for f in await FactRepo(s).active(user.id)]
            rows = await MessageRepo(s).history(user.id, conversation_id, self.history_messages)
        use_tools = route is Route.AGENT
        system = {
            "role": "system",
            "content": system_prompt(
                persona=load_persona(self.persona_path),
                now=now,
                timezone=user.timezone,
                facts=facts,
                with_tools=use_tools,
                user_name=user.display_name if user.display_name != "owner" else "",
            ),
        }
        history = hide_old_untrusted(history_to_openai(rows), self.tools)
        if not history or history[-1].get("content") != text:
            history.append({"role": "user", "content": text})
        ledger = SourceLedger()
        ctx = ToolContext(
            user_id=user.id,
            db=self.db,
            now=now,
            timezone=user.timezone,
            conversation_id=conversation_id,
            message_id=message_id,
            sources=ledger,
        )
        final: FinalAnswer | None = None
        async for event in run_turn(
            self.llm,
            self.tools,
            ctx,
            system,
            history,
            limits=self.limits,
            clock=self.clock,
            use_tools=use_tools,
            tainted=not trusted,
        ):
            if isinstance(event, FinalAnswer):
                final = event
            else:
                await on_event(event)
        assert final is not None
        text_out = ledger.strip_unknown(final.text) or "I have no answer to that."
        if final.withheld:
            text_out = f"{text_out}\n\n{CHANGED_NOTHING}"
        return TurnOutcome(
            text_out,
            final.transcript,
            citations=ledger.cited(text_out),
            route=route,
            stopped=final.stopped,
        )

    async def _why(self, user: User, conversation_id: int) -> tuple[str, list[dict[str, Any]]]:
        """The sources of the last answer in this conversation (shown and kept as citations)."""
        assert user.id is not None
        async with self.db.session() as s:
            cited = await last_answer_citations(s, user.id, conversation_id)
        if not cited:
            return "My last answer didn't rely on anything stored in your memory.", []
        tz = ZoneInfo(user.timezone)
        return "Sources of my last answer:\n" + render_sources(cited, tz), cited

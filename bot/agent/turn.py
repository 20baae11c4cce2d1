"""One agent turn for one user: route, assemble the prompt, run the loop, report events."""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any
from zoneinfo import ZoneInfo

from sqlmodel.ext.asyncio.session import AsyncSession

from bot.agent.ask import ask_buttons, resumes_a_question, store_ask
from bot.agent.contact_offer import offer_buttons, offer_for, offer_question
from bot.agent.intent import Visibility, classify_intent, sure_memory_question
from bot.agent.llm import LLM, ToolCall, image_parts
from bot.agent.loop import AgentEvent, FinalAnswer, Limits, TextDelta, run_turn
from bot.agent.people import Resolution, resolve_for
from bot.agent.prompts import load_persona, system_prompt
from bot.agent.retrieval.people import known_people
from bot.agent.router import Route, Router, prefers, remember_text
from bot.agent.rules import RULE_CATEGORY, is_rule
from bot.agent.sources import SourceLedger, last_answer_citations, render_sources
from bot.agent.threads import Threads, ThreadSave
from bot.agent.tools.base import ToolContext, ToolRegistry
from bot.agent.verify import Verdict, check_answer, judge, plain_unknown, tool_results
from bot.clock import Clock
from bot.messages import Button
from storage.db import Database
from storage.models import Message, User
from storage.repos.facts import FactRepo
from storage.repos.messages import ConversationRepo, HistoryRow, MessageRepo, ThreadState

if TYPE_CHECKING:
    from bot.agent.memory.service import MemoryService

log = logging.getLogger(__name__)

SEARCH_FIRST_TOOL = "search_memory"
"""The tool run before the first model call for a sure memory question."""

EventSink = Callable[[AgentEvent], Awaitable[None]]
TurnWrite = Callable[[AsyncSession], Awaitable[None]]
"""A write a turn leaves for the unit of work that stores it."""

SUMMARY_SPAN = 60
"""How many rows before the history window a turn reads to bring the thread summary up to
date (older ones were summarised by earlier turns)."""
CATCH_UP = 16
"""Rows before the window a turn reads when its thread's summary is up to date: the rows that
left the window since the summary was last brought up to date (fewer than
``threads.SUMMARY_BATCH``, and the two or three of the last turn; more only after a tool-using
turn, when the longer read follows)."""


@dataclass(slots=True)
class TurnOutcome:
    """What a turn produced, ready to be stored and sent."""

    text: str
    transcript: list[dict[str, Any]] = field(default_factory=list)
    citations: list[dict[str, Any]] = field(default_factory=list)
    route: Route = Route.AGENT
    stopped: str | None = None
    prompt_tokens: list[int] = field(default_factory=list)
    """Prompt tokens of each model call the turn made (messages plus tool schemas)."""
    verified: bool = False
    """The answer went through the check before answering."""
    buttons: list[Button] = field(default_factory=list)
    """Buttons to send with the text (the options of a question back)."""
    writes: list[TurnWrite] = field(default_factory=list)
    """What the turn leaves to store in its own commit (the thread's title and summary):
    whoever stores the turn runs each in that unit of work."""


EARLIER = (
    "\n\nEarlier in this conversation (older messages, in short; the latest ones follow "
    "as they were):\n"
)


def since_new(rows: list[HistoryRow]) -> list[HistoryRow]:
    """The rows after the latest "/new" (a fresh context the user asked for), else all."""
    for i in range(len(rows) - 1, -1, -1):
        row = rows[i]
        if row.role == "user" and row.text.strip().lower().split("@")[0] == "/new":
            return rows[i + 1 :]
    return rows


def history_to_openai(rows: Sequence[HistoryRow]) -> list[dict[str, Any]]:
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
        elif row.role == "notice":
            continue  # lifebot's fixed words (a restart's /retry offer): never the person's
        elif row.text:
            out.append({"role": "user", "content": row.text})
    return out


LOOK_FIRST = {
    "web": "This question is about the outside world: your memory tools cannot know it. Use "
    "web_search and cite the pages as [n].",
    "memory": "This question is about the user's own life or people they know: search memory "
    "first; use web_search only if they ask for the web.",
}
"""Where the router says to look first, told to the model for this turn (web search on)."""


def look_first(text: str, tools: ToolRegistry) -> str:
    """The router's "look here first" line for the system prompt ("" when web search is off)."""
    look = prefers(text) if tools.get("web_search") is not None else None
    return "\n\n" + LOOK_FIRST[look] if look is not None else ""


REPAIR_NOTE = """\
Check before answering: your answer states things about the user that this turn's tool
results do not support:
{problems}
Answer again. Cite the [n] source right after each claim about the user, call a tool if you
need one, drop what no result supports, and say plainly what you don't know."""

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
        # A tool no longer registered (an MCP server that went away) may have been untrusted.
        gone = msg["role"] == "tool" and tool is None
        if gone or (tool is not None and tool.untrusted_output):
            out.append({**msg, "content": "(earlier result not repeated; call the tool again)"})
        else:
            out.append(msg)
    return out


@dataclass(slots=True)
class TurnReads:
    """What a turn's prompt is built from, as read from the database (``read_context``)."""

    conversation_id: int
    trusted: bool
    known: list[tuple[str, str]]
    """The user's active facts and rules: (text, category), oldest first."""
    rows: list[HistoryRow]
    """The thread's stored rows since the latest /new, oldest first."""
    conv: ThreadState | None
    """The conversation (its title and running summary) when threads are kept."""
    parent: Message | None
    """The message a thread hangs from, if stored."""


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
        tools_by_intent: bool = True,
        verify: bool = True,
        verify_with_model: bool = False,
        search_first: bool = True,
        threads: Threads | None = None,
    ) -> None:
        self.db = db
        self.llm = llm
        self.tools = tools
        self.clock = clock
        self.limits = limits
        self.persona_path = persona_path
        self.history_messages = history_messages
        self.router = Router(llm)
        self.verify = verify
        """Check each tool-using answer's claims against this turn's tool results."""
        self.verify_with_model = verify_with_model
        """Ask the fast model as well when the rules pass an answer."""
        self.verifier_fired = 0
        """How many answers the check has sent back for repair (since start)."""
        self.by_intent = tools_by_intent
        """Offer only the tools the message's intent needs (widening when stuck)."""
        self.threads = threads
        """Thread titles and summaries of older turns, when wired (else older turns are cut)."""
        self.memory = memory
        """Memory, when wired: "remember", "forget that" and fact dedupe go through it."""
        self.search_first = search_first
        """Search memory before the first model call when the rules are sure the message is a
        memory question (one model call instead of two); uncertain ones keep the tool path."""

    async def answer(  # noqa: PLR0911  (an early answer per route)
        self,
        user: User,
        conversation_id: int,
        text: str,
        message_id: int,
        on_event: EventSink,
        *,
        trusted: bool = True,
        images: Sequence[str] = (),
        reads: TurnReads | None = None,
    ) -> TurnOutcome:
        """Answer ``text`` (already stored as ``message_id``). LLM errors propagate.

        ``reads``: the prompt's rows as the caller read them under the conversation's lock
        (``read_context``); read here when None.

        ``trusted`` is False for input that may not be the user's own instruction (speech
        overheard by the pendant): then nothing in the user's state is changed. ``images``
        are data URLs of pictures sent with the message (a vision model sees them with it).
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
                    user.id,
                    fact_text,
                    RULE_CATEGORY if is_rule(fact_text) else "notes",
                    source_message_ids=[message_id],
                )
            said = "Got it, I'll remember" if created else "I already knew"
            return TurnOutcome(f"{said}: {fact.text}", route=route)

        now = self.clock.now()
        known, rows, summary, save = await self._context(
            user.id, conversation_id, text, trusted=trusted, reads=reads
        )
        writes = self._writes(save, user.id, message_id)
        rules = [line for line, category in known if category == RULE_CATEGORY]
        facts = [line for line, category in known if category != RULE_CATEGORY]
        use_tools = route is Route.AGENT
        resolved = await resolve_for(self.db, user.id, text) if use_tools else Resolution()
        if resolved.ask is not None and trusted:  # "which Ana?": asked before any model call
            await store_ask(self.db, user.id, message_id, resolved.ask, text, now)
            return TurnOutcome(
                resolved.ask.question,
                route=route,
                buttons=ask_buttons(message_id, resolved.ask),
                writes=writes,
            )
        system = {
            "role": "system",
            "content": system_prompt(
                persona=load_persona(self.persona_path),
                now=now,
                timezone=user.timezone,
                facts=facts,
                rules=rules,
                resolved=resolved.lines,
                with_tools=use_tools,
                user_name=user.display_name if user.display_name != "owner" else "",
            ),
        }
        if use_tools:
            system["content"] += look_first(text, self.tools)
        system["content"] += (EARLIER + summary) if summary else ""  # older turns, in short
        history = hide_old_untrusted(history_to_openai(rows), self.tools)
        if not history or history[-1].get("content") != text:
            history.append({"role": "user", "content": text})
        if images:
            history[-1] = {"role": "user", "content": image_parts(text, images)}
        ledger = SourceLedger()
        ctx = ToolContext(
            user_id=user.id,
            db=self.db,
            now=now,
            timezone=user.timezone,
            conversation_id=conversation_id,
            message_id=message_id,
            sources=ledger,
            owner=user.is_owner,
        )
        visibility = (
            Visibility(self.tools, classify_intent(text, self.tools)) if self.by_intent else None
        )
        final = await self._run(
            ctx,
            system,
            history,
            on_event,
            self.limits,
            use_tools,
            not trusted,
            visibility,
            # A question about a photo sent with it is about the picture, not memory.
            first_calls=self._searched_first(text) if use_tools and not images else (),
        )
        if final.asked is not None:  # a question back: the turn resumes with the answer
            await store_ask(self.db, user.id, message_id, final.asked, text, now)
            return TurnOutcome(
                final.asked.question,
                final.transcript,
                route=route,
                prompt_tokens=final.prompt_tokens,
                buttons=ask_buttons(message_id, final.asked),
                writes=writes,
            )
        text_out = ledger.strip_unknown(final.text) or "I have no answer to that."
        transcript = final.transcript
        if use_tools and self.verify and final.stopped is None:
            text_out, transcript = await self._checked(
                ctx, system, history, on_event, final, text_out, [*rules, *facts], not trusted
            )
        if final.withheld:
            text_out = f"{text_out}\n\n{CHANGED_NOTHING}"
        outcome = TurnOutcome(
            text_out,
            transcript,
            citations=ledger.cited(text_out),
            route=route,
            stopped=final.stopped,
            prompt_tokens=final.prompt_tokens,
            verified=self.verify and use_tools,
            writes=writes,
        )
        return await self._offer_contact(outcome, user.id, message_id, text) if trusted else outcome

    def _writes(self, save: ThreadSave | None, user_id: int, message_id: int) -> list[TurnWrite]:
        """What the turn leaves for its own commit.

        The thread's summary, and the message's index row (written with the turn, not in a
        unit of work of its own after it).
        """
        writes: list[TurnWrite] = [save.write] if save is not None else []
        if self.memory is not None:
            writes.append(self.memory.index_with_turn(user_id, message_id))
        return writes

    async def _offer_contact(
        self, outcome: TurnOutcome, user_id: int, message_id: int, text: str
    ) -> TurnOutcome:
        """Under the answer, offer to save a person the message described (Yes/No)."""
        offer = await offer_for(self.db, user_id, message_id, text)
        if offer is None:
            return outcome
        outcome.text = f"{outcome.text}\n\n{offer_question(offer)}"
        outcome.buttons = [*outcome.buttons, *offer_buttons(message_id)]
        return outcome

    def _searched_first(self, text: str) -> list[ToolCall]:
        """The memory search to run before the first model call, when the rules are sure."""
        if not self.search_first or self.tools.get(SEARCH_FIRST_TOOL) is None:
            return []
        # A resumed request goes on the way it started: the model already chose its tools.
        if resumes_a_question(text) or not sure_memory_question(text, self.tools):
            return []
        query = json.dumps({"query": text[:500]})
        return [ToolCall("search_first", SEARCH_FIRST_TOOL, query)]

    async def _run(
        self,
        ctx: ToolContext,
        system: dict[str, Any],
        history: list[dict[str, Any]],
        on_event: EventSink,
        limits: Limits,
        use_tools: bool,
        tainted: bool,
        visibility: Visibility | None,
        *,
        stream_text: bool = True,
        first_calls: Sequence[ToolCall] = (),
    ) -> FinalAnswer:
        """One run of the tool loop, its progress passed on; the final answer."""
        final: FinalAnswer | None = None
        async for event in run_turn(
            self.llm,
            self.tools,
            ctx,
            system,
            history,
            limits=limits,
            clock=self.clock,
            use_tools=use_tools,
            tainted=tainted,
            visibility=visibility,
            first_calls=first_calls,
        ):
            if isinstance(event, FinalAnswer):
                final = event
            elif stream_text or not isinstance(event, TextDelta):
                await on_event(event)
        assert final is not None
        return final

    async def _checked(
        self,
        ctx: ToolContext,
        system: dict[str, Any],
        history: list[dict[str, Any]],
        on_event: EventSink,
        final: FinalAnswer,
        answer: str,
        known: list[str],
        tainted: bool,
    ) -> tuple[str, list[dict[str, Any]]]:
        """The answer after the check: as it was, repaired in one more round, or plainly unsure.

        Returns the answer and the turn's transcript (with the repair round's tool calls).
        """
        verdict = await self._verdict(ctx, answer, final.transcript, known)
        if verdict.ok:
            return answer, final.transcript
        self.verifier_fired += 1
        log.info("answer check fired: %s", verdict.describe())
        note = {"role": "system", "content": REPAIR_NOTE.format(problems=verdict.describe())}
        again = [*history, *final.transcript, {"role": "assistant", "content": answer}, note]
        limits = replace(self.limits, max_rounds=1)  # one more round, then an answer
        repaired = await self._run(
            ctx, system, again, on_event, limits, True, tainted, None, stream_text=False
        )
        transcript = [*final.transcript, *repaired.transcript]
        fixed = ctx.sources.strip_unknown(repaired.text)
        if repaired.stopped is None and fixed:
            second = await self._verdict(ctx, fixed, transcript, known)
            if second.ok:
                return fixed, transcript
            return plain_unknown(fixed, second), transcript
        return plain_unknown(answer, verdict), transcript

    async def _verdict(
        self, ctx: ToolContext, answer: str, transcript: list[dict[str, Any]], known: list[str]
    ) -> Verdict:
        """Rules first; the fast model only when configured and the rules found nothing.

        What the prompt already told the model about the user (facts, rules) counts as
        evidence, like an uncited tool result.
        """
        results = [*tool_results(transcript), *known]
        # A name as a subject makes a claim when the user's memory knows it (a contact, a
        # place, a name in their facts or in what this turn's tools showed), not "Slack".
        shown = [c.snippet for c in ctx.sources.entries.values()]
        names = await known_people(ctx.db, ctx.user_id, (), places=True, texts=[*results, *shown])
        verdict = check_answer(answer, ctx.sources, results, names)
        if verdict.ok and self.verify_with_model:
            verdict = await judge(self.llm, answer, ctx.sources, results)
        return verdict

    async def read_context(
        self,
        s: AsyncSession,
        user_id: int,
        conversation_id: int,
        *,
        trusted: bool,
        thread: ThreadState | None = None,
    ) -> TurnReads:
        """What a turn's prompt needs from the database, read in the caller's unit of work.

        The dispatcher reads it in a unit of its own (with its check for an answer to our
        question), so a turn takes one unit of work fewer. ``thread``: the conversation's row
        when the caller read it in this same unit (not read again).
        """
        window = self.history_messages
        threads = self.threads is not None and trusted
        conv: ThreadState | None = None
        parent: Message | None = None
        known = await FactRepo(s).prompt_lines(user_id)
        messages = MessageRepo(s)
        if threads:
            conv = (
                thread
                if thread is not None and thread.id == conversation_id
                else await ConversationRepo(s).thread_state(user_id, conversation_id)
            )
        stored = await messages.turn_history(
            user_id, conversation_id, self._history_span(window, conv, threads=threads)
        )
        through = conv.summary_through if conv is not None else None
        if (
            len(stored) == window + CATCH_UP
            and through is not None
            and (stored[0].id or 0) > through
        ):  # more rows left the window since the last summary than the short read holds
            stored = await messages.turn_history(user_id, conversation_id, window + SUMMARY_SPAN)
        rows = since_new(stored)
        # A thread under a message (Slack) also gets that message, unless the person
        # started afresh with /new.
        if conv is not None and conv.thread_id and window > 0 and len(rows) == len(stored):
            parent = await messages.thread_parent(conv)
        return TurnReads(conversation_id, trusted, known, rows, conv, parent)

    async def _context(
        self,
        user_id: int,
        conversation_id: int,
        text: str,
        *,
        trusted: bool,
        reads: TurnReads | None = None,
    ) -> tuple[list[tuple[str, str]], Sequence[HistoryRow], str | None, ThreadSave | None]:
        """What the prompt needs: ``reads`` when the caller read them, else read here.

        The user's active facts, the thread's recent rows (since the latest /new), a summary
        of older ones, and the thread's title and summary to store with the turn (None when
        unchanged).
        """
        if reads is None or reads.conversation_id != conversation_id or reads.trusted != trusted:
            async with self.db.session() as s:
                reads = await self.read_context(s, user_id, conversation_id, trusted=trusted)
        window = self.history_messages
        known, rows = reads.known, reads.rows
        if self.threads is None or not trusted:
            return known, (rows[-window:] if window else []), None, None
        view = await self.threads.view(reads.conv, rows, window, text, parent=reads.parent)
        # The message a thread hangs from comes first: "there" and "that" refer to it.
        recent = view.recent if view.parent is None else [view.parent, *view.recent]
        return known, recent, view.summary, view.save

    @staticmethod
    def _history_span(window: int, conv: ThreadState | None, *, threads: bool) -> int:
        """How many of the newest rows a turn reads (its cost must not grow with history).

        Without a thread summary only the window is shown. A thread whose summary is up to
        date needs the window and the few rows that left it since (the summary covers the
        rest); a new summary, or a Slack thread (whose parent is dropped after a /new further
        back), reads the whole span as before.
        """
        if not window:
            return 0
        if not threads:
            return window
        if conv is not None and conv.summary_through is not None and not conv.thread_id:
            return window + CATCH_UP
        return window + SUMMARY_SPAN

    async def _why(self, user: User, conversation_id: int) -> tuple[str, list[dict[str, Any]]]:
        """The sources of the last answer in this conversation (shown and kept as citations)."""
        assert user.id is not None
        async with self.db.session() as s:
            cited = await last_answer_citations(s, user.id, conversation_id)
        if not cited:
            return "My last answer didn't rely on anything stored in your memory.", []
        tz = ZoneInfo(user.timezone)
        return "Sources of my last answer:\n" + render_sources(cited, tz), cited

"""What the pages and the REST API do, once: every method is scoped to one user.

A method that is handed another user's id answers as if the object did not exist (None or
False), so callers turn that into 404 and nobody learns what others have.
"""

from __future__ import annotations

import asyncio
import logging
import shutil
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from datetime import date, datetime, time, timedelta
from pathlib import Path

from bot.adapters.base import ChannelAdapter
from bot.agent.accounts import Accounts
from bot.agent.ask import OTHER, Waiting, waiting_questions
from bot.agent.contacts import Contacts
from bot.agent.conversations import Conversations
from bot.agent.journal.analytics import (
    METRIC_NAMES,
    MIN_ENTRIES,
    Bucket,
    Metric,
    Point,
    series,
)
from bot.agent.journal.chart import describe
from bot.agent.journal.service import JournalService
from bot.agent.memory.facts import FactDecision
from bot.agent.memory.memory_file import ApplyReport, apply_text, write_for
from bot.agent.memory.service import MemoryService
from bot.agent.memory.views import MemoryViews
from bot.clock import Clock, zone
from bot.device.registry import DeviceRegistry
from bot.dispatch.identity import approve, confirm_link, issue_link_code
from bot.errors import ChannelError
from bot.jobs.localtime import hhmm, local_instant, parse_hhmm
from bot.jobs.reminders.service import Created
from bot.jobs.service import Jobs
from bot.jobs.zones import ZONES
from bot.messages import Address, InboundMessage
from bot.web.sources import source_link
from storage.db import Database
from storage.models import (
    CalendarEvent,
    ChannelIdentity,
    Delivery,
    Device,
    Episode,
    Fact,
    JobLease,
    JobState,
    JournalEntry,
    Message,
    PairingRequest,
    Proposal,
    Reminder,
    User,
)
from storage.portable import UserData

log = logging.getLogger(__name__)


@dataclass(slots=True)
class Hit:
    """One memory search result and where to open it."""

    kind: str
    """``message``, ``transcript``, ``episode`` or ``fact``."""
    source_id: int
    when: datetime
    channel: str
    speaker: str
    text: str
    matched: str
    link: str
    """The page that shows the source (a conversation opened at the cited turn)."""


@dataclass(slots=True)
class SearchResult:
    """Hits, the words that matched (to highlight) and anything the search must say."""

    hits: list[Hit]
    terms: list[str]
    note: str | None = None


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
    errors: list[str] = field(default_factory=list)
    found: str | None = None
    """The zone the time zone field was read as, in words (``Europe/Lisbon (Porto, ...)``)."""


JOURNAL_DAYS = 30
"""The journal page and its charts show this many days unless asked otherwise."""
MAX_SERIES_DAYS = 3660
"""The longest range a chart or a series covers (ten years)."""


@dataclass(slots=True)
class MetricView:
    """One metric of the journal page: its series in words, and whether a chart can be drawn."""

    metric: Metric
    words: str
    drawable: bool
    """At least three scored entries in the range (else the page shows the words only)."""


@dataclass(slots=True)
class UserRow:
    """A user with their linked channels (owner page)."""

    user: User
    identities: list[ChannelIdentity]


class WebService:
    """The operations of every page and endpoint."""

    def __init__(
        self,
        db: Database,
        clock: Clock,
        memory: MemoryService,
        jobs: Jobs,
        channels: Mapping[str, ChannelAdapter],
        default_timezone: str,
        journal: JournalService,
        userdata: UserData,
        *,
        press: Callable[[InboundMessage], Awaitable[object]],
        ask_wait: timedelta,
    ) -> None:
        self.db = db
        self.accounts = Accounts(db)
        """Users, their channels and pairings."""
        self.contacts = Contacts(db)
        """The people each user keeps (the Contacts page and API)."""
        self.conversations = Conversations(db)
        """Messages and conversations (the Chat page, a message in context, /retry)."""
        self.memory_views = MemoryViews(db)
        """Facts with their sources, episodes, days of messages."""
        self.device_registry = DeviceRegistry(db, clock)
        """The pendants each user registered."""
        self.userdata = userdata
        """Export and delete-my-data over every registered feature (the CLI's own)."""
        self.journal = journal
        self.clock = clock
        self.memory = memory
        self.jobs = jobs
        self.channels = channels
        self.default_timezone = default_timezone
        self.press = press
        """Hands a button press to dispatch."""
        self.ask_wait = ask_wait
        """How long a question lifebot asked waits for its answer."""

    async def questions(self, user: User) -> list[Waiting]:
        """Questions lifebot asked the user that still wait for an answer."""
        assert user.id is not None
        return await waiting_questions(self.db, user.id, self.clock.now(), self.ask_wait)

    async def answer_question(self, user: User, message_id: int, choice: str) -> bool:
        """Answer a waiting question as if its button was pressed in the chat it was asked in.

        The answer (and the resumed turn's reply) goes to that chat. False when the question
        is not the user's or no longer waits.
        """
        waiting = {w.message.id: w for w in await self.questions(user)}
        found = waiting.get(message_id)
        if found is None:
            return False
        if choice != OTHER and not (choice.isdecimal() and int(choice) < len(found.options)):
            return False  # not one of its buttons
        row = found.message
        label = "Other" if choice == OTHER else found.options[int(choice)]
        conv_thread = await self.conversations.thread_of(user.id or 0, row.conversation_id or 0)
        await self.press(
            InboundMessage(
                address=Address(row.channel, row.account, row.chat_id, conv_thread),
                sender_id=row.sender_id or "",
                message_id=f"web:{message_id}:{choice}",
                text=label,
                received_at=self.clock.now(),
                callback_data=f"/answer {message_id} {choice}",
            )
        )
        return True

    async def waiting(self, user: User) -> list[Message]:
        """The user's messages that wait for /retry, newest first."""
        assert user.id is not None
        return await self.conversations.waiting(user.id, 20)

    async def retry(self, user: User, message_id: int) -> bool:
        """Answer a waiting message now, as its Retry button in the chat would.

        The answer goes to the chat the message came from. False when it is not the user's
        or no longer waits.
        """
        row = next((m for m in await self.waiting(user) if m.id == message_id), None)
        if row is None:
            return False
        thread = await self.conversations.thread_of(user.id or 0, row.conversation_id or 0)
        await self.press(
            InboundMessage(
                address=Address(row.channel, row.account, row.chat_id, thread),
                sender_id=row.sender_id or "",
                message_id=f"web-retry:{message_id}:{self.clock.now().timestamp():.0f}",
                text="Retry",
                received_at=self.clock.now(),
                callback_data=f"/retry {message_id}",
                # The web chat has no channel identity: its messages name their user.
                user_id=user.id if row.channel == "web" else None,
            )
        )
        return True

    async def user(self, user_id: int) -> User | None:
        """The user, or None when they were deleted."""
        return await self.accounts.user(user_id)

    # --- memory ------------------------------------------------------------------------------
    async def search(self, user: User, query: str, limit: int = 10) -> SearchResult:
        """Search the user's memory; each hit links to its source."""
        assert user.id is not None
        await self.memory.index_pending(user.id)
        outcome = await self.memory.retriever.search(
            user.id, query, now=self.clock.now(), tz=zone(user.timezone), limit=limit
        )
        pieces = [ev.item.source_id for ev in outcome.evidence if ev.item.kind == "document"]
        chunks = await self.memory_views.chunk_messages(user.id, pieces)
        hits = []
        for ev in outcome.evidence:
            item = ev.item
            kind = (
                "transcript" if item.kind == "message" and item.channel == "device" else item.kind
            )
            hits.append(
                Hit(
                    kind=kind,
                    source_id=item.source_id,
                    when=item.ts,
                    channel=item.channel,
                    speaker=item.speaker,
                    text=item.text,
                    matched=ev.matched,
                    link=source_link(item.kind, str(item.source_id), chunks)[0] or "/memory",
                )
            )
        # ``outcome.note`` is written for the model ("do not guess"); people get ``said``.
        note = outcome.said if not hits or outcome.plan.unresolved else None
        return SearchResult(hits, list(outcome.plan.terms), note)

    async def day(self, user: User, day: date) -> list[Message]:
        """What was said on one local day."""
        assert user.id is not None
        tz = zone(user.timezone)
        start = local_instant(day, time(0), tz)
        end = local_instant(day + timedelta(days=1), time(0), tz)
        return await self.memory_views.spoken_between(user.id, start, end)

    async def recent_days(self, user: User, limit: int = 400) -> list[date]:
        """Local days with messages, newest first."""
        assert user.id is not None
        tz = zone(user.timezone)
        stamps = await self.memory_views.days_with_messages(user.id, limit)
        return list(dict.fromkeys(t.astimezone(tz).date() for t in stamps))

    async def around(self, user: User, message_id: int) -> tuple[Message, list[Message]] | None:
        """A message and its conversation around it; None when it is not the user's."""
        assert user.id is not None
        return await self.conversations.around(user.id, message_id)

    async def episode(self, user: User, episode_id: int) -> tuple[Episode, list[Message]] | None:
        """An episode and its messages; None when it is not the user's."""
        assert user.id is not None
        return await self.memory_views.episode(user.id, episode_id)

    async def episodes(self, user: User, days: int = 30) -> list[Episode]:
        """Episodes of the last ``days`` days, newest first."""
        assert user.id is not None
        now = self.clock.now()
        found = await self.memory_views.episodes(user.id, now - timedelta(days=days), now, 100)
        return sorted(found, key=lambda e: e.start_at, reverse=True)

    # --- facts -------------------------------------------------------------------------------
    async def facts(self, user: User) -> list[Fact]:
        """What lifebot knows about the user."""
        assert user.id is not None
        return await self.memory_views.facts(user.id)

    async def fact(self, user: User, fact_id: int) -> tuple[Fact, list[Message]] | None:
        """A live fact and the messages it was learned from."""
        assert user.id is not None
        return await self.memory_views.fact(user.id, fact_id)

    async def remember(self, user: User, text: str) -> str:
        """Remember a fact the user typed; the reply in words."""
        return self.memory.remember_reply(await self.remember_decision(user, text))

    async def remember_decision(self, user: User, text: str) -> FactDecision:
        """Remember a fact the user typed; what happened (added, known, superseded...)."""
        assert user.id is not None
        return await self.memory.remember(user.id, text)

    async def edit_fact(self, user: User, fact_id: int, text: str) -> str | None:
        """Replace a fact's words (keeping its sources); None when it is not the user's."""
        assert user.id is not None
        found = await self.fact(user, fact_id)
        if found is None:
            return None
        old = found[0]
        text = text.strip()
        if not text or text == old.text:
            return "Nothing changed."
        decision = await self.memory.remember(
            user.id, text, sources=list(old.source_message_ids or []), category=old.category
        )
        if decision.fact is None:
            return self.memory.remember_reply(decision)
        if decision.fact.id != old.id:
            await self.memory.keeper.forget(user.id, fact_id, self.clock.now())
        return f"Saved: {decision.fact.text}"

    async def forget(self, user: User, fact_id: int) -> Fact | None:
        """Forget a fact; None when it is not the user's."""
        assert user.id is not None
        return await self.memory.keeper.forget(user.id, fact_id, self.clock.now())

    async def restore_fact(self, user: User, fact_id: int) -> Fact | None:
        """Undo forgetting a fact; None when it is not the user's or cannot come back."""
        assert user.id is not None
        return await self.memory.keeper.restore(user.id, fact_id, self.clock.now())

    async def memory_file(self, user: User) -> str:
        """The user's facts and rules as MEMORY.md (``bot/agent/memory/memory_file.py``)."""
        assert user.id is not None
        name = user.display_name or "you"
        return await write_for(self.memory.keeper, user.id, name, self.clock.now())

    async def apply_memory_file(self, user: User, text: str) -> ApplyReport:
        """Read an edited MEMORY.md back into the user's facts (MemoryFileError if unreadable)."""
        assert user.id is not None
        return await apply_text(self.memory.keeper, user.id, text, self.clock.now())

    # --- reminders, calendar, proposals --------------------------------------------------------
    async def reminders(self, user: User) -> list[Reminder]:
        """Active reminders, soonest first."""
        assert user.id is not None
        return await self.jobs.views.reminders(user.id)

    async def add_reminder(self, user: User, request: str) -> Created:
        """Create a reminder from words (PhraseError in plain words when unreadable)."""
        return await self.jobs.reminders.create(user, request, self.clock.now())

    async def cancel_reminder(self, user: User, reminder_id: int) -> Reminder | None:
        """Cancel; None when it is not the user's active reminder."""
        assert user.id is not None
        return await self.jobs.reminders.cancel(user.id, reminder_id)

    async def events(self, user: User, days: int = 60) -> list[CalendarEvent]:
        """Calendar events from a day ago to ``days`` ahead."""
        assert user.id is not None
        now = self.clock.now()
        return await self.jobs.views.events(
            user.id, now - timedelta(days=1), now + timedelta(days=days)
        )

    async def all_events(self, user: User) -> list[CalendarEvent]:
        """Every live event (the calendar feed)."""
        assert user.id is not None
        return await self.jobs.views.all_events(user.id)

    async def proposals(self, user: User) -> list[Proposal]:
        """Proposed events waiting for an answer."""
        assert user.id is not None
        return await self.jobs.views.proposals(user.id, self.clock.now())

    async def answer_proposal(self, user: User, proposal_id: int, yes: bool) -> str | None:
        """Accept or decline; None when the proposal is not the user's."""
        assert user.id is not None
        if await self.jobs.views.proposal(user.id, proposal_id) is None:
            return None
        return await self.jobs.proposals.answer(user, proposal_id, yes, self.clock.now())

    async def proposal(self, user: User, proposal_id: int) -> Proposal | None:
        """One of the user's proposals (None for another user's)."""
        assert user.id is not None
        return await self.jobs.views.proposal(user.id, proposal_id)

    async def rename_proposal(self, user: User, proposal_id: int, title: str) -> str | None:
        """A new title for a pending proposal; None when the proposal is not the user's."""
        if await self.proposal(user, proposal_id) is None:
            return None
        return await self.jobs.proposals.rename(user, proposal_id, title, self.clock.now())

    def proposal_words(self, p: Proposal, user: User) -> str:
        """A proposal as the question the chat asks."""
        return self.jobs.proposals.question(p, user.timezone)

    async def briefing_preview(self, user: User) -> str:
        """Today's briefing as it would read now."""
        text, _ = await self.jobs.briefings.compose(user, self.clock.now())
        return text

    async def send_briefing(self, user: User) -> None:
        """Queue a briefing for right now through the outbox (composed just before sending)."""
        assert user.id is not None
        await self.jobs.views.briefing_now(user.id, self.clock.now())

    # --- devices -----------------------------------------------------------------------------
    async def devices(self, user: User) -> list[Device]:
        """The user's pendants (revoked ones too, marked)."""
        assert user.id is not None
        return await self.device_registry.of(user.id)

    async def audio_waiting(self, user: User) -> int:
        """Utterances still to transcribe."""
        assert user.id is not None
        return await self.device_registry.audio_waiting(user.id)

    async def add_device(self, user: User, name: str) -> tuple[Device, str]:
        """Register a pendant; its token is returned once. ValueError in plain words."""
        assert user.id is not None
        name = name.strip()
        if not name or len(name) > 40 or not all(c.isalnum() or c in "-_." for c in name):
            raise ValueError("A device name is 1 to 40 letters, digits, '-', '_' or '.'.")
        return await self.device_registry.add(user.id, name)

    async def revoke_device(self, user: User, device_id: int) -> Device | None:
        """Revoke one of the user's devices; None when it is not theirs or already revoked."""
        assert user.id is not None
        return await self.device_registry.revoke(user.id, device_id)

    # --- settings ----------------------------------------------------------------------------
    async def identities(self, user: User) -> list[ChannelIdentity]:
        """The user's linked channels."""
        assert user.id is not None
        return await self.accounts.identities(user.id)

    async def change_settings(  # noqa: PLR0912  # one branch per setting reads plainly
        self, user: User, change: SettingsChange
    ) -> User:
        """Apply every valid field; problems are added to ``change.errors`` in plain words."""
        assert user.id is not None
        now = self.clock.now()
        values: dict[str, object] = {}
        if change.timezone:
            found = await asyncio.to_thread(ZONES.find, change.timezone)
            if found is None:
                change.errors.append(
                    f"{change.timezone} is neither a time zone nor a town I know: try a bigger "
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
                change.errors.append(f"Briefing time: {exc}.")
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
                change.errors.append(f"You have no {wanted} channel linked.")
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
            change.errors.append(f"Quiet hours: {exc}.")
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

    # --- journal -----------------------------------------------------------------------------
    def journal_range(self, user: User, days: int) -> tuple[date, date]:
        """The last ``days`` days up to today in the user's zone (clamped to a sane span)."""
        today = self.clock.now().astimezone(zone(user.timezone)).date()
        days = max(1, min(days, MAX_SERIES_DAYS))
        return today - timedelta(days=days - 1), today

    async def journal_entries(self, user: User, limit: int = 20) -> list[JournalEntry]:
        """The user's newest journal entries with their scores, newest first."""
        assert user.id is not None
        return await self.journal.recent(user.id, limit)

    async def journal_series(
        self, user: User, metric: Metric, first: date, last: date, bucket: Bucket
    ) -> list[Point]:
        """Averages with counts per bucket of the user's entries (empty buckets included)."""
        assert user.id is not None
        return series(await self.journal.entries(user.id, first, last), metric, first, last, bucket)

    async def journal_views(self, user: User, first: date, last: date) -> list[MetricView]:
        """Every metric over the range in words (the page shows a chart beside each)."""
        assert user.id is not None
        entries = await self.journal.entries(user.id, first, last)
        label = f"{first:%d %b} - {last:%d %b %Y}"
        views = []
        for metric in METRIC_NAMES:
            points = series(entries, metric, first, last, "day")
            drawable = sum(p.count for p in points) >= MIN_ENTRIES
            views.append(MetricView(metric, describe(points, metric, label), drawable))
        return views

    async def journal_chart(
        self, user: User, metric: Metric, first: date, last: date
    ) -> bytes | None:
        """The chart as PNG bytes (drawn in a worker thread); None with too little to draw."""
        assert user.id is not None
        label = f"{first:%d %b} - {last:%d %b %Y}"
        _, image = await self.journal.chart(user.id, metric, first, last, label)
        return image.data if image is not None else None

    # --- export and erase --------------------------------------------------------------------
    async def export_file(self, user: User) -> Path:
        """All the user's data and files (the zip ``lifebot export`` writes), in a file.

        The file is private and temporary: the caller deletes it (``forget_export``) once sent.
        """
        assert user.id is not None
        return await self.userdata.export_temporary(user.id)

    @staticmethod
    def forget_export(path: Path) -> None:
        """Delete a sent export and its temporary folder (blocking; a background task)."""
        shutil.rmtree(path.parent, ignore_errors=True)

    async def erase(self, user: User) -> None:
        """Delete the user and everything of theirs: rows, files, audio, caches."""
        assert user.id is not None
        await self.userdata.delete(user.id)

    # --- owner -------------------------------------------------------------------------------
    async def pairings(self) -> list[PairingRequest]:
        """Pending pairing requests."""
        return await self.accounts.pairings(self.clock.now())

    async def decide_pairing(self, code: str, yes: bool) -> PairingRequest | None:
        """Approve (the person becomes a user) or refuse; None when the code is not pending."""
        now = self.clock.now()
        if not yes:
            return await self.accounts.refuse(code, now)
        async with self.db.session() as s:
            req = await approve(s, code, now, self.default_timezone)
        if req is not None and req.user_id is not None:
            # The welcome the chat /approve sends, through the outbox (exactly once).
            await self.jobs.views.notice(
                req.user_id,
                f"welcome:{req.code}",
                "You're approved! Say hi, or send /help to see what I can do.",
                now,
            )
        return req

    async def users(self) -> list[UserRow]:
        """Every user and their channels."""
        return [UserRow(u, ids) for u, ids in await self.accounts.every()]

    async def deliveries(self, limit: int = 100) -> list[Delivery]:
        """The newest pushes of everyone."""
        return await self.jobs.views.deliveries(limit)

    async def retry_delivery(self, delivery_id: int) -> bool:
        """Queue a failed push again."""
        return await self.jobs.views.retry_delivery(delivery_id, self.clock.now())

    async def job_states(self) -> tuple[list[JobState], list[JobLease]]:
        """Scheduled jobs' last runs and the leader leases."""
        return await self.jobs.views.job_states()

    def is_leader(self) -> bool:
        """True when this process runs the scheduled jobs."""
        return self.jobs.service.is_leader

    def channel_names(self) -> list[str]:
        """Channels started in this process (the web page's own way back is not one)."""
        return sorted(name for name in self.channels if name != "web")

"""The composition root: the only place that builds collaborators and wires them together.

``build_app`` turns Settings into a typed ``App`` (no I/O); ``start_app`` prepares storage;
``start_channels`` starts what the settings ask for; ``App.close`` stops it all in reverse.
Everything else takes its collaborators in its constructor.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING

from bot.adapters.base import ChannelAdapter
from bot.agent.ask import ASK_TOOL, time_out_questions
from bot.agent.documents import DocumentInput, Documents
from bot.agent.journal.commands import register_journal_commands
from bot.agent.journal.scoring import LexiconScorer, LLMScorer, Scorer
from bot.agent.journal.service import JournalService
from bot.agent.journal.summaries import Summaries
from bot.agent.journal.tools import journal_tools
from bot.agent.llm import OpenAILLM
from bot.agent.loop import Limits
from bot.agent.memory.commands import register_memory_commands
from bot.agent.memory.service import MemoryService
from bot.agent.memory.tools import memory_tools
from bot.agent.people_commands import register_people_commands
from bot.agent.photos import PhotoInput, Photos, PhotoStore
from bot.agent.questions import COUNT_TOOL
from bot.agent.rules import rules_guard
from bot.agent.threads import Threads
from bot.agent.tools import default_registry
from bot.agent.tools.base import ToolRegistry
from bot.agent.turn import Agent
from bot.agent.websearch import build_web_search, web_search_tool
from bot.app.features import REGISTRY, open_files, request_options, route_by_intent
from bot.app.logsafe import redactor_for
from bot.app.memory_root import build_memory
from bot.app.options import (
    device_options,
    mcp_client_settings,
    slack_options,
    telegram_config,
    transcriber_for,
    web_options,
)
from bot.app.settings_view import effective_settings
from bot.clock import Clock, SystemClock
from bot.config import Settings
from bot.device.omi import OmiInbox
from bot.dispatch import Dispatcher
from bot.dispatch.ask_commands import register_ask_commands
from bot.dispatch.commands import Commands
from bot.dispatch.thread_commands import register_thread_commands
from bot.jobs.calendars.own import CalendarSettings
from bot.jobs.calendars.proposals import SCAN_JOB as PROPOSAL_SCAN
from bot.jobs.commands import JobCommands
from bot.jobs.engine.control import ControlPanel
from bot.jobs.engine.presence import Presence, ProcessBeat
from bot.jobs.engine.scheduler import JobSpec
from bot.jobs.meetings.ingest import MeetingIngest
from bot.jobs.outbox.delivery import AwayDeadlines
from bot.jobs.service import Jobs, JobSettings, build_jobs
from bot.jobs.tools import calendar as calendar_tools
from bot.jobs.tools import reminders as reminder_tools
from bot.location.areas import AreaNames
from bot.location.commands import LocationCommands
from bot.location.enrich import Enricher
from bot.location.ingest import ChatLocation
from bot.location.scan import StayProposals
from bot.location.service import LocationService
from bot.location.tools import location_tools
from bot.logring import process_ring
from bot.mcp.room import McpRoom, build_mcp
from bot.speech.fair import FairTranscriber
from bot.speech.synthesize import EspeakSynthesizer, Synthesizer
from bot.speech.transcribe import Transcriber
from bot.web.channel import WebChannel
from bot.web.room import WebRoom, build_web, build_web_core
from storage.db import Database
from storage.files import FileStore
from storage.files.adopt import adopt_legacy
from storage.files.private import private_dir
from storage.locks import AdvisoryKeyedLocks
from storage.notify import PUSH_CHANNEL, REVOKED_CHANNEL, NotifyListener
from storage.portable import UserData
from storage.repos.devices import DeviceRepo
from storage.repos.web import Credentials

if TYPE_CHECKING:
    from bot.device.adapter import DeviceAdapter

log = logging.getLogger(__name__)


@dataclass
class App:
    """Every long-lived object of one lifebot process, each with its own type."""

    settings: Settings
    """What the process was started with."""
    clock: Clock
    """The one source of "now"."""
    db: Database
    """Storage (SQLite or PostgreSQL)."""
    files: FileStore
    """Every file a feature keeps, by declared kind (the database's on PostgreSQL)."""
    userdata: UserData
    """Export, import and delete-my-data over every registered feature."""
    llm: OpenAILLM
    """The language model client (fast and smart models)."""
    transcriber: Transcriber
    """Speech to text, shared by every channel that receives audio."""
    tools: ToolRegistry
    """Every tool the agent may offer."""
    memory: MemoryService
    """Facts, episodes, the search index and background extraction."""
    agent: Agent
    """Answers one message."""
    photos: Photos
    """Pictures people send: kept, described (vision) and indexed as memory."""
    commands: Commands
    """Slash commands, the spine's and every feature's."""
    jobs: Jobs
    """Briefings, reminders, proposals, the outbox and the scheduler."""
    journal: JournalService
    """Journal entries, their scores, series and summaries."""
    meetings: MeetingIngest
    """Meeting transcripts posted to the API: queued, debounced, turned into memory."""
    dispatcher: Dispatcher
    """The one path from any channel to the agent."""
    channels: dict[str, ChannelAdapter]
    """Started channels by name: the way back for replies (dispatch) and pushes (outbox)."""
    web: WebRoom
    """The web page, REST API, health and metrics (served when LIFEBOT_WEB_ENABLED)."""
    omi: OmiInbox
    """Audio chunks Omi's backend posts to the web page; the pendant channel feeds them on."""
    location: LocationService
    """Location points, places and stays (issue 24)."""
    location_proposals: StayProposals
    """The evening scan that proposes events from the day's stays."""
    mcp: McpRoom
    """lifebot as an MCP server (``/mcp``, ``lifebot mcp serve``) and its MCP clients."""
    presence: ProcessBeat
    """This process's heartbeat row and log lines in the database (the owner's page)."""
    started: list[ChannelAdapter] = field(default_factory=list)
    """Adapters in the order they started (stopped in reverse)."""
    conversation_locks: AdvisoryKeyedLocks | None = None
    """PostgreSQL: the per-conversation lock every process shares (None on SQLite)."""
    push_listener: NotifyListener | None = None
    """PostgreSQL with a pendant channel: takes pushes the leader hands over and hears of
    revoked pendants (else None)."""

    def add_channel(self, adapter: ChannelAdapter) -> None:
        """Make ``adapter`` the way back to its channel and stop it with the app."""
        self.channels[adapter.name] = adapter
        self.started.append(adapter)

    async def close(self) -> None:
        """Stop the web page, the scheduler, the adapters and memory, then release connections."""
        await self.web.stop()
        await self.mcp.close()  # the MCP servers lifebot started
        await self.meetings.stop()
        await self.jobs.service.stop()  # first: the outbox sends through the adapters
        for adapter in reversed(self.started):
            try:
                await adapter.stop()
            except Exception:
                log.exception("adapter %s did not stop cleanly", adapter.name)
        if self.push_listener is not None:
            await self.push_listener.close()
        await self.presence.stop()  # "stopped", with the lines of the stop itself
        await self.memory.close()
        await self.llm.close()
        if self.conversation_locks is not None:
            await self.conversation_locks.close()
        await self.db.dispose()


def build_app(  # noqa: PLR0915  (the composition root names every collaborator once)
    settings: Settings,
    *,
    clock: Clock | None = None,
    transcriber: Transcriber | None = None,
    db: Database | None = None,
) -> App:
    """Build the object graph (no I/O yet; call ``start_app`` to migrate).

    ``transcriber`` replaces the faster-whisper one (tests pass a shared, warmed model);
    ``db`` the database handle (the dispatch bench's baseline uses the stock SQLite adapter).
    """
    clock = clock or SystemClock()
    db = db or Database(settings.database_url)
    llm = OpenAILLM(
        base_url=settings.openai_base_url,
        api_key=settings.openai_api_key,
        model=settings.llm_model,
        fast_model=settings.llm_fast_model,
        timeout=settings.llm_timeout,
        max_retries=settings.llm_max_retries,
    )
    # One speech model for every channel (pendant, voice notes); it loads on first use.
    stt = transcriber or transcriber_for(settings)
    memory = build_memory(settings, db, llm, clock)
    files, userdata = build_storage(settings, db, clock, memory)
    photos, documents = build_senses(settings, db, llm, memory, files)
    # The fast model scores journal entries when one is configured; else the offline lexicon.
    scorer: Scorer = LLMScorer(llm, llm.fast_model) if llm.configured else LexiconScorer()
    summaries = Summaries(db, llm, configured=llm.configured, model_name=llm.model)
    journal = JournalService(db, scorer, memory.index, clock, summaries)
    tools = route_by_intent(default_registry())  # every feature's words route to its tools
    web_search = build_web_search(
        settings.web_search_backend,
        searxng_url=settings.searxng_url,
        brave_api_key=settings.brave_api_key,
        brave_api_url=settings.brave_api_url,
    )
    if web_search is not None:
        tools.add(web_search_tool(web_search, settings.web_search_daily_cap))
    tools.add_guard(rules_guard)  # the user's hard rules, checked before any change
    tools.add_guard(reminder_tools.reminder_rules_guard)  # ... and before a reminder is set
    tools.add(COUNT_TOOL)
    tools.add(ASK_TOOL)
    for tool in [
        *reminder_tools.TOOLS,
        *calendar_tools.TOOLS,
        *memory_tools(memory),
        *journal_tools(journal),
    ]:
        tools.add(tool)
    threads = Threads(db, llm, with_model=settings.threads_with_model)
    agent = Agent(
        db=db,
        llm=llm,
        tools=tools,
        clock=clock,
        limits=Limits(
            max_rounds=settings.max_tool_rounds,
            max_calls=settings.max_tool_calls,
            wall_seconds=settings.turn_timeout,
            context_tokens=settings.context_tokens,
            tool_result_tokens=settings.tool_result_tokens,
        ),
        persona_path=settings.persona_path,
        history_messages=settings.history_messages,
        memory=memory,
        tools_by_intent=settings.tools_by_intent,
        verify=settings.verify_answers,
        verify_with_model=settings.verify_with_model,
        threads=threads,
    )
    # The page's own channel is there from the start: dispatch answers the page through it.
    web_channel = WebChannel()
    channels: dict[str, ChannelAdapter] = {web_channel.name: web_channel}
    areas = AreaNames()  # nearest town for unnamed places, offline
    location = LocationService(
        db, clock, retention=timedelta(days=settings.location_retention_days), areas=areas
    )
    stay_proposals = StayProposals(
        db,
        ttl=timedelta(days=settings.proposal_ttl_days),
        areas=areas,
        # The fast model titles proposals from the place's history when one is configured.
        enricher=Enricher(llm if llm.configured else None),
    )

    async def propose_from_stays(now: datetime) -> str:
        result = await stay_proposals.scan(now)
        jobs.outbox.kick()  # ``jobs`` is bound below, before the scheduler can run this
        return result

    ask_wait = timedelta(minutes=settings.ask_timeout_minutes)

    async def ask_timeouts(now: datetime) -> str:
        """Tell each user what was not done because a question went unanswered."""
        return f"{await time_out_questions(db, now, ask_wait)} question(s) timed out"

    jobs = build_jobs(
        db=db,
        llm=llm,
        tools=tools,
        adapters=channels,
        clock=clock,
        persona_path=settings.persona_path,
        settings=JobSettings(
            heartbeat=settings.jobs_heartbeat,
            lease_seconds=settings.jobs_lease_seconds,
            send_rate=settings.jobs_send_rate,
            late_hours=settings.briefing_late_hours,
            proposal_ttl_days=settings.proposal_ttl_days,
            away=AwayDeadlines(
                reminder=timedelta(seconds=settings.push_away_reminder_seconds),
                briefing=timedelta(seconds=settings.push_away_briefing_seconds),
                other=timedelta(seconds=settings.push_away_seconds),
            ),
            calendars=CalendarSettings(
                refresh=timedelta(minutes=settings.calendar_refresh_minutes),
                days_ahead=settings.calendar_days_ahead,
                allow_private=settings.calendar_allow_private,
                read_seconds=settings.calendar_read_seconds,
            ),
            calendar_key=settings.calendar_key,
        ),
        journal=journal,
        extra=[
            # Memory's background pass runs on the leader only: in every process it would
            # send the same extraction to the model once per process.
            JobSpec(
                "memory.extract",
                memory.tick_seconds,
                memory.tick,
                "index other paths' messages, extract from quiet chats",
            ),
            JobSpec("ask.timeouts", 60, ask_timeouts, "tell users which questions timed out"),
            JobSpec(
                "location.proposals",
                300,
                propose_from_stays,
                "propose events from the day's stays (each user's local 21:30)",
                next_due=stay_proposals.next_due,  # at the set time, not on the next poll
            ),
        ],
    )
    # Several processes may share a PostgreSQL database: turns of one conversation must not
    # overlap whichever process receives them. SQLite keeps the in-process lock.
    conv_locks = None if db.is_sqlite else AdvisoryKeyedLocks(settings.database_url)
    commands = Commands(db, clock, settings.default_timezone)
    JobCommands(jobs, db, clock).register(commands)
    register_memory_commands(commands, memory, db, clock, settings.web_url)
    register_ask_commands(commands, db, clock, ask_wait)
    register_people_commands(commands, db)
    register_thread_commands(commands, db, threads, channels)
    LocationCommands(location, settings.web_url).register(commands)
    for tool in location_tools(location):
        tools.add(tool)
    meetings = MeetingIngest(
        db=db,
        llm=llm,
        memory=memory,
        clock=clock,
        debounce=settings.ingest_debounce_seconds,
        retry=settings.ingest_retry_seconds,
        # Segments that name a day become proposed events through the usual scan.
        after=lambda: jobs.service.run_soon(PROPOSAL_SCAN),
    )
    omi = OmiInbox(db, clock, files)
    # This process's newest log lines, cleaned of every declared secret before they are kept.
    ring = process_ring(redactor_for(settings).clean)
    process_id = jobs.service.lock.holder  # one name for the lease and the heartbeat row
    control = ControlPanel(
        db=db,
        clock=clock,
        jobs=jobs,
        ring=ring,
        process_id=process_id,
        heartbeat=settings.jobs_heartbeat,
        settings=effective_settings(settings),
        redact=ring.redact,
    )
    register_journal_commands(commands, journal, clock)
    # Built in dependency order, so nothing is set after it is made: dispatch first (it
    # answers through ``channels``, the page's channel among them), then the web's core,
    # the MCP room that serves from it, and the web room with MCP's endpoint.
    dispatcher = Dispatcher(
        db=db,
        agent=agent,
        commands=commands,
        clock=clock,
        adapters=channels,
        # After every stored turn: index and extract memory; look for plans to propose.
        hooks=[memory.on_turn, jobs.after_turn],
        allowlist=settings.allowlisted(),
        default_timezone=settings.default_timezone,
        locks=conv_locks,
        # Each feature's declared input (Feature.inputs), in the order a message's are taken.
        inputs=[ChatLocation(location), DocumentInput(documents), PhotoInput(photos)],
    )
    web_opts = web_options(settings)
    web_core = build_web_core(
        web_opts,
        db=db,
        clock=clock,
        memory=memory,
        jobs=jobs,
        channels=channels,
        commands=commands,
        journal=journal,
        userdata=userdata,
        credentials=Credentials(db),
        press=dispatcher.handle,  # the page answers questions as button presses
        ask_wait=ask_wait,
    )
    mcp = build_mcp(
        web=web_core,
        tools=tools,
        serve_http=settings.mcp_http,
        client_settings=mcp_client_settings(settings, frozenset(tools.intent_words)),
    )
    web = build_web(
        web_opts,
        web_core,
        db=db,
        clock=clock,
        location=location,
        meetings=meetings,
        omi=omi,
        requests=request_options(settings),
        control=control,
        channel=web_channel,
        dispatch=dispatcher.handle,  # files and chat from the page go through dispatch too
        endpoints=mcp.endpoints(),
    )

    def presence_now() -> Presence:
        return Presence(sorted(n for n in channels if n != "web"), web.address)

    presence = ProcessBeat(
        db,
        clock,
        ring,
        process_id=process_id,
        every=settings.jobs_heartbeat,
        jobs_enabled=settings.jobs_enabled,
        describe=presence_now,
    )
    return App(
        settings=settings,
        clock=clock,
        db=db,
        files=files,
        userdata=userdata,
        llm=llm,
        transcriber=stt,
        tools=tools,
        memory=memory,
        agent=agent,
        photos=photos,
        commands=commands,
        jobs=jobs,
        journal=journal,
        meetings=meetings,
        dispatcher=dispatcher,
        channels=channels,
        web=web,
        omi=omi,
        conversation_locks=conv_locks,
        location=location,
        location_proposals=stay_proposals,
        mcp=mcp,
        presence=presence,
    )


def build_senses(
    settings: Settings, db: Database, llm: OpenAILLM, memory: MemoryService, files: FileStore
) -> tuple[Photos, Documents]:
    """Pictures and PDFs people send: kept in the file store, indexed as memory."""
    photos = Photos(
        db=db, llm=llm, store=PhotoStore(files), index=memory.index, vision=settings.vision
    )
    return photos, Documents(db=db, files=files, index=memory.index)


def build_storage(
    settings: Settings, db: Database, clock: Clock, memory: MemoryService
) -> tuple[FileStore, UserData]:
    """The file store of every registered kind, and the user data service over it.

    The service exports, imports and deletes every registered feature's tables and files.
    """
    files = open_files(settings, db)
    corpora = memory.index.corpora

    async def forget_words(user_id: int) -> None:
        corpora.forget(user_id)  # the in-memory copy; the files went with the user's

    return files, UserData(
        db=db,
        files=files,
        tables=sorted(REGISTRY.user_tables()),
        clock=clock,
        spool_dir=settings.data_dir / "spool",
        work_dir=settings.data_dir / "tmp",
        # Rows imported without vectors are embedded; a deleted user's words are forgotten.
        after_import=[memory.index_pending],
        after_delete=[forget_words],
        # Ids kept without a ForeignKey: an import gives rows new ids and rewrites these.
        references=REGISTRY.references(),
        # Rows of older versions the database now refuses, settled as its upgrade settles them.
        import_fixes=REGISTRY.import_fixes(),
    )


async def start_app(app: App) -> None:
    """Prepare storage (data dir, migrations, the file store); only the owner may read it.

    Files older versions kept in their own folders (photos, documents, Omi's inbox) move
    into the file store here: into the database on PostgreSQL, so every host sees them.
    """
    await asyncio.to_thread(private_dir, app.settings.data_dir)  # 0700, also if it was 0755
    await app.db.migrate()
    if app.db.path is not None:
        await asyncio.to_thread(_private_files, app.db.path)
    await adopt_legacy(app.files, app.settings.data_dir)


def _private_files(db_path: Path) -> None:
    # SQLite gives its -wal and -shm files the database file's mode, so these three suffice.
    for suffix in ("", "-wal", "-shm"):
        target = db_path.with_name(db_path.name + suffix)
        if target.exists():
            target.chmod(0o600)


async def start_channels(app: App) -> list[str]:
    """Start every configured channel and the background services; return channel names.

    An empty list means no channel is configured (the CLI then offers the console).
    """
    started: list[str] = []
    # Before any channel takes new messages: what a crash (kill -9) left unanswered.
    unanswered = await app.dispatcher.left_unanswered()
    await app.mcp.start_clients()  # the MCP servers' tools join the agent as they come up
    # One fair queue for every channel's voice notes: each person's turn comes round.
    speech = FairTranscriber(app.transcriber)
    if app.settings.telegram_enabled:
        from bot.adapters.telegram.adapter import (  # noqa: PLC0415  # loads PTB
            TelegramAdapter,
        )
        from bot.adapters.telegram.config import AlbumHolder  # noqa: PLC0415

        telegram = TelegramAdapter(
            telegram_config(app.settings),
            clock=app.clock,
            menu=app.commands.menu(),
            transcriber=speech,
            is_known=app.dispatcher.is_known,
            synthesizer=build_synthesizer(app.settings),
            db=app.db,
            # Album items name this process: once its heartbeat stops, another takes them.
            holder=AlbumHolder(app.presence.process_id, app.presence.silent_after),
        )
        app.add_channel(telegram)
        await telegram.start(app.dispatcher.handle)
        started.append("telegram")
    if app.settings.slack_enabled:
        from bot.adapters.slack.adapter import SlackAdapter  # noqa: PLC0415  # loads Bolt

        slack = SlackAdapter.from_options(
            slack_options(app.settings),
            app.clock,
            transcriber=speech,
            is_known=app.dispatcher.is_known,
        )
        app.add_channel(slack)
        await slack.start(app.dispatcher.handle)
        started.append("slack")
    if await start_device_channel(app):
        started.append("device")
    if app.settings.wyoming_enabled:
        await start_wyoming(app, speech)
        started.append("wyoming")
    # Those messages are offered for /retry once the channels can carry the note, once each.
    await app.dispatcher.recover_unanswered(unanswered)
    # Scheduled jobs (briefings, reminders, proposals, memory's background pass): only the
    # leader process runs them. Without jobs, this process runs memory's pass itself.
    if app.settings.jobs_enabled:
        await app.jobs.service.start()
    else:
        app.memory.start()
    if app.settings.web_enabled:
        app.meetings.start()  # transcripts arrive through the web API
        await app.web.start()
    await app.presence.start()  # this process, its channels and page, for the owner's page
    return started


def build_device_adapter(app: App, transcriber: Transcriber | None = None) -> DeviceAdapter:
    """The pendant channel over the app's database, transcriber, clock and memory.

    ``transcriber`` replaces the app's one (tests share one warmed model).
    """
    from bot.device.adapter import DeviceAdapter  # noqa: PLC0415  # loads audio libraries
    from bot.device.hub import DeviceHub  # noqa: PLC0415
    from bot.device.options import DeviceInfo  # noqa: PLC0415

    jobs = app.jobs

    async def deliver_waiting(device: DeviceInfo) -> None:
        await jobs.outbox.deliver_waiting(device.user_id)

    hub = DeviceHub(
        db=app.db,
        transcriber=transcriber or app.transcriber,
        clock=app.clock,
        options=device_options(app.settings),
        memory=app.memory,
        files=app.files,
        on_ready=deliver_waiting,  # pushes that waited for the pendant leave when it is back
    )
    return DeviceAdapter(
        hub,
        app.settings.device_host,
        app.settings.device_port,
        omi=app.omi,
        omi_idle_seconds=app.settings.omi_idle_seconds,
        synthesizer=build_synthesizer(app.settings),
        spool_cap_bytes=int(app.settings.device_spool_max_mb * 1_000_000),
    )


async def start_device_channel(app: App) -> bool:
    """Start the pendant server when a device exists or LIFEBOT_DEVICE_ENABLED is set."""
    if not app.settings.device_enabled:
        async with app.db.session() as s:
            if not await DeviceRepo(s).active():
                return False
    adapter = build_device_adapter(app)
    await app.transcriber.warm_up()  # load the model now, not on the first utterance
    app.add_channel(adapter)
    await adapter.start(app.dispatcher.handle)
    await start_push_handover(app, adapter.server.revoked)
    return True


def build_synthesizer(settings: Settings) -> Synthesizer | None:
    """The speech output engine, or None when speech output is off."""
    if settings.tts_engine == "off":
        return None
    return EspeakSynthesizer(settings.tts_voice)


async def start_wyoming(app: App, speech: FairTranscriber) -> None:
    """Serve Home Assistant over Wyoming (LIFEBOT_WYOMING_*)."""
    from bot.device.wyoming import WyomingOptions, WyomingService  # noqa: PLC0415

    s = app.settings
    options = WyomingOptions(
        host=s.wyoming_host,
        port=s.wyoming_port,
        user=s.wyoming_user,
        satellites=WyomingOptions.parse_satellites(s.wyoming_satellites),
        trusted=s.wyoming_trusted,
        model=s.stt_model,
        zeroconf=s.wyoming_zeroconf,
    )
    service = WyomingService(
        options,
        db=app.db,
        clock=app.clock,
        transcriber=speech,
        synthesizer=build_synthesizer(s),
    )
    await app.transcriber.warm_up()
    app.add_channel(service)
    await service.start(app.dispatcher.handle)


async def start_push_handover(
    app: App, on_revoked: Callable[[int], Awaitable[None]] | None = None
) -> None:
    """PostgreSQL: hear what other processes tell the pendants connected here.

    Pushes the leader hands over are taken here; a pendant revoked elsewhere is closed at
    once (``on_revoked``, when the pendant channel runs here).
    """
    if app.db.is_sqlite or app.push_listener is not None:
        return
    handlers: dict[str, Callable[[int], Awaitable[None]]] = {
        PUSH_CHANNEL: app.jobs.outbox.take_over
    }
    if on_revoked is not None:
        handlers[REVOKED_CHANNEL] = on_revoked
    listener = NotifyListener(app.settings.database_url, handlers)
    await listener.start()
    app.push_listener = listener

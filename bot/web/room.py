"""Builds the web room from the app's collaborators (called by the composition root)."""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable, Mapping, MutableMapping, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bot.adapters.base import ChannelAdapter
from bot.agent.accounts import Accounts
from bot.agent.contacts import Contacts
from bot.agent.conversations import Conversations
from bot.agent.journal.service import JournalService
from bot.agent.memory.service import MemoryService
from bot.agent.memory.views import MemoryViews
from bot.clock import Clock
from bot.device.omi import OmiInbox
from bot.device.registry import DeviceRegistry
from bot.dispatch import DispatchResult
from bot.dispatch.commands import Commands
from bot.jobs.engine.control import ControlPanel
from bot.jobs.meetings.ingest import MeetingIngest
from bot.jobs.service import Jobs
from bot.location.service import LocationService
from bot.messages import InboundMessage
from bot.web.auth import CredentialStore, KeySource, WebAuth
from bot.web.channel import WebChannel
from bot.web.chat import WebChat
from bot.web.commands import register_web_commands
from bot.web.limits import RequestOptions
from bot.web.services import (
    WebCalendar,
    WebData,
    WebDevices,
    WebFacts,
    WebJournal,
    WebMemory,
    WebOwner,
    WebPending,
    WebReminders,
    WebService,
    WebSettings,
)
from bot.web.uploads import Uploads
from storage.db import Database
from storage.portable import UserData

if TYPE_CHECKING:
    from fastapi import FastAPI

    from bot.web.server import WebServer


AsgiApp = Callable[
    [MutableMapping[str, Any], Callable[[], Awaitable[Any]], Callable[[Any], Awaitable[None]]],
    Awaitable[None],
]
"""An ASGI application (scope, receive, send)."""

Dispatch = Callable[[InboundMessage], Awaitable[DispatchResult]]
"""Dispatch's ``handle``: how a message written, uploaded or pressed on the page is answered."""


@dataclass(frozen=True, slots=True)
class WebOptions:
    """What the web room reads from the settings (the composition root builds it once)."""

    host: str
    """LIFEBOT_WEB_HOST: where the page listens."""
    port: int
    """LIFEBOT_WEB_PORT (0: a free port)."""
    url: str
    """The page's public address (LIFEBOT_WEB_URL): sign-in links, and cookies are
    ``Secure`` when it is https."""
    secret: str | None
    """LIFEBOT_WEB_SECRET: signs sessions (None: a key kept in the database or ``secret_file``)."""
    secret_file: Path
    """Where an older version kept its generated key (read once, then the database's)."""
    session_days: float
    """How long a sign-in lasts."""
    default_timezone: str
    """The zone of a user who has not set one."""
    max_upload_bytes: int
    """The largest file taken from the page (``image_max_bytes``, as on the chat channels)."""
    jobs_enabled: bool
    """Whether this process runs the scheduled jobs (the page says so when it does not)."""


@dataclass(frozen=True, slots=True)
class Endpoint:
    """An ASGI app another room serves on the web port (MCP at ``/mcp``).

    The web room knows nothing of what it does, only where it lives and what must run while
    it is served.
    """

    path: str
    app: AsgiApp
    running: Callable[[], AbstractAsyncContextManager[None]] | None = None
    """Entered before the page serves and left after it stops (a session manager)."""


@dataclass
class WebRoom:
    """The web app, its auth and the server that runs it.

    The FastAPI app is made on first use (serving, or a test's client): FastAPI and the
    templates take a fifth of a second to load, which CLI commands that never serve skip.
    """

    auth: WebAuth
    """Sign-in links, sessions and API tokens."""
    service: WebService
    """The operations the pages and the API offer, one service per room, scoped to one user."""
    options: WebOptions
    """Where to listen and how cookies are set."""
    location: LocationService
    """Where the OwnTracks and Overland endpoints store points."""
    meetings: MeetingIngest
    """Where posted meeting transcripts are queued."""
    omi: OmiInbox
    """Where the Omi endpoint stores audio chunks."""
    uploads: Uploads
    """Files sent from the page and the API, handed to dispatch as web messages."""
    requests: RequestOptions
    """What the request layer enforces: who may call each route, how big a body may be."""
    control: ControlPanel
    """What the owner's control page reads: processes, jobs, outbox, logs, configuration."""
    chat: WebChat
    """Messages written on the Chat page, through the same dispatch."""
    endpoints: Sequence[Endpoint] = ()
    """Other rooms' ASGI apps served on the same port (``/mcp``)."""
    _app: FastAPI | None = None
    _server: WebServer | None = None
    _running: contextlib.AsyncExitStack | None = None

    @property
    def app(self) -> FastAPI:
        """The ASGI app (made once)."""
        if self._app is None:
            from bot.web.app import create_app  # noqa: PLC0415  # loads FastAPI
            from bot.web.deps import WebContext, make_templates  # noqa: PLC0415

            context = WebContext(
                service=self.service,
                auth=self.auth,
                templates=make_templates(),
                secure_cookies=self.options.url.startswith("https://"),
                jobs_enabled=self.options.jobs_enabled,
                location=self.location,
                meetings=self.meetings,
                omi=self.omi,
                calendars=self.service.jobs.calendars,
                uploads=self.uploads,
                control=self.control,
                chat=self.chat,
            )
            self._app = create_app(context, self.requests)
            from starlette.routing import Route  # noqa: PLC0415

            for endpoint in self.endpoints:  # first, so no page route can shadow them
                self._app.router.routes.insert(0, Route(endpoint.path, endpoint=endpoint.app))
        return self._app

    @property
    def address(self) -> str:
        """``host:port`` the page listens on while it is served; empty otherwise."""
        server = self._server
        if server is None or not server.serving:
            return ""
        return f"{server.host}:{server.bound_port}"

    @property
    def server(self) -> WebServer:
        """The uvicorn server (made once)."""
        if self._server is None:
            from bot.web.server import WebServer  # noqa: PLC0415  # loads uvicorn

            self._server = WebServer(self.app, self.options.host, self.options.port)
        return self._server

    async def start(self) -> None:
        """Serve the page (LIFEBOT_WEB_HOST:LIFEBOT_WEB_PORT), endpoints' services first."""
        stack = contextlib.AsyncExitStack()
        for endpoint in self.endpoints:
            if endpoint.running is not None:
                await stack.enter_async_context(endpoint.running())
        self._running = stack
        try:
            await self.server.start()
        except BaseException:
            await self._stop_running()
            raise

    async def stop(self) -> None:
        """Stop serving (if it started), let chat turns end, stop the endpoints' services."""
        if self._server is not None:
            await self._server.stop()
        await self.chat.stop()
        await self._stop_running()

    async def _stop_running(self) -> None:
        if self._running is not None:
            running, self._running = self._running, None
            await running.aclose()


@dataclass(frozen=True, slots=True)
class WebCore:
    """Sign-in and the page's operations: what other rooms (MCP) serve from too."""

    auth: WebAuth
    service: WebService


def build_web_core(
    options: WebOptions,
    *,
    db: Database,
    clock: Clock,
    memory: MemoryService,
    jobs: Jobs,
    channels: Mapping[str, ChannelAdapter],
    commands: Commands,
    journal: JournalService,
    userdata: UserData,
    credentials: CredentialStore,
    press: Dispatch,
    ask_wait: timedelta,
) -> WebCore:
    """Sign-in and the page's operations; registers /web (no I/O).

    ``credentials`` keeps sign-in links, sessions and tokens; ``press`` answers a question's
    button or a Retry pressed on the page, through dispatch.
    """
    auth = WebAuth(
        credentials,
        clock,
        KeySource(options.secret, credentials, clock, options.secret_file),
        options.url,
        timedelta(days=options.session_days),
    )
    accounts = Accounts(db)
    conversations = Conversations(db)
    views = MemoryViews(db)
    service = WebService(
        db=db,
        clock=clock,
        accounts=accounts,
        contacts=Contacts(db),
        conversations=conversations,
        memory_views=views,
        jobs=jobs,
        pending=WebPending(db, clock, conversations, press=press, ask_wait=ask_wait),
        memory=WebMemory(clock, memory, views, conversations),
        facts=WebFacts(clock, memory, views),
        reminders=WebReminders(clock, jobs),
        calendar=WebCalendar(clock, jobs),
        devices=WebDevices(DeviceRegistry(db, clock)),
        settings=WebSettings(db, clock, accounts, channels),
        journal=WebJournal(clock, journal),
        data=WebData(userdata),
        owner=WebOwner(db, clock, accounts, jobs, channels, options.default_timezone),
    )
    register_web_commands(commands, auth)
    return WebCore(auth, service)


def build_web(
    options: WebOptions,
    core: WebCore,
    *,
    db: Database,
    clock: Clock,
    location: LocationService,
    meetings: MeetingIngest,
    omi: OmiInbox,
    requests: RequestOptions,
    control: ControlPanel,
    channel: WebChannel,
    dispatch: Dispatch,
    endpoints: Sequence[Endpoint] = (),
) -> WebRoom:
    """The web room over ``core`` (no I/O).

    ``channel`` is the ``web`` adapter dispatch answers through (it is among dispatch's
    channels already); ``dispatch`` takes what is written or uploaded on the page;
    ``endpoints`` are other rooms' apps served on the same port.
    """
    service = core.service
    uploads = Uploads(
        service.conversations,
        clock,
        max_bytes=options.max_upload_bytes,
        channel=channel,
        dispatch=dispatch,
    )
    chat = WebChat(service.conversations, service.memory_views, uploads)
    return WebRoom(
        core.auth,
        core.service,
        options,
        location,
        meetings,
        omi,
        uploads,
        requests,
        control,
        chat,
        endpoints,
    )

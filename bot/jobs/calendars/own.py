"""The user's own calendars: an imported ICS file, subscribed ICS feeds and CalDAV.

Events from outside land in the same ``CalendarEvent`` table as lifebot's own, with a
``source`` naming where they came from (``import``, ``ics:<id>``, ``caldav:<id>``), so the
briefing, ``/calendar``, the agent's ``list_events`` tool and the evening stay scan all see
them without knowing about sources. Re-reading a source updates rows by a stable uid (never
duplicates); a feed that dropped an event cancels it here.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import re
import urllib.request
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import TYPE_CHECKING
from urllib.parse import SplitResult, parse_qsl, unquote, urljoin, urlsplit

from bot.clock import Clock, zone
from bot.errors import CalendarError
from bot.isolated import Bounds, ChildFailed, OverBound, run_bounded
from bot.jobs.calendars import caldav
from bot.jobs.calendars.caldav import Login, SecretBox
from bot.jobs.calendars.ics import MAX_BYTES, parse_answer
from bot.tls import httpx_context
from storage.db import Database
from storage.models import CalendarEvent, CalendarSource, User
from storage.repos.calendar import CalendarRepo, OutsideEvent, SyncCounts
from storage.repos.calendar_sources import CalendarSourceRepo
from storage.repos.users import UserRepo
from storage.repos.web import WebAuthRepo

if TYPE_CHECKING:
    import httpx

log = logging.getLogger(__name__)

IMPORT_SOURCE = "import"
"""``source`` of events loaded with ``lifebot calendar import``."""
PAST = timedelta(days=30)
"""Feeds are expanded from this long ago (recent days still block stays and answer "what
did I have on Monday")."""
IMPORT_PAST = timedelta(days=366)
"""A file import reaches a year back: it is often history."""
FETCH_SECONDS = 10.0
"""A feed's whole fetch (every redirect, every byte) must end within this."""
MAX_REDIRECTS = 5
FEED_BOUNDS = Bounds(seconds=10.0, memory_bytes=256_000_000, output_bytes=16_000_000)
"""Reading a feed or a CalDAV calendar, in its bounded child: a 5 MB feed of 13,000 events
takes about 6 s and 160 MB on a busy two-core machine."""
IMPORT_BOUNDS = Bounds(seconds=60.0, memory_bytes=512_000_000, output_bytes=16_000_000)
"""Reading a file the operator imports (``lifebot calendar import``): more patient."""
REFRESH_AT_ONCE = 4
"""Users whose calendars are re-read at the same time (one user's feeds one after another)."""


@dataclass(frozen=True, slots=True)
class CalendarSettings:
    """The knobs of the user's own calendars (from Settings)."""

    refresh: timedelta = timedelta(minutes=30)
    """How often feeds are re-read."""
    days_ahead: int = 365
    """How far ahead recurring events are expanded."""
    allow_private: bool = False
    """Allow addresses on this machine or a private network (off: no fetching from inside)."""
    read_seconds: float = FETCH_SECONDS
    """A feed's whole fetch, and reading a feed or CalDAV calendar, each end within this."""


def source_tag(source: CalendarSource) -> str:
    """The ``CalendarEvent.source`` of the events a source brought in."""
    return f"{source.kind}:{source.id}"


def from_subscription(event_source: str) -> bool:
    """Whether an event was read from one of the person's linked calendars (ICS or CalDAV)."""
    return event_source.startswith(("ics:", "caldav:"))


OWN_FEED_PATH = re.compile(r"/calendar/(?P<secret>[^/]+)\.ics$")
"""The path of the feed lifebot publishes (``bot/web/public.py``), after any prefix a proxy
adds; its secret says whose feed it is."""

MAX_ADDRESS = 2048
"""The longest calendar address taken (bytes, as UTF-8); real secret addresses are a few
hundred. PostgreSQL indexes (one calendar per address) nothing much longer than 2,700."""


def feed_url(text: str) -> str:
    """A subscribable URL (``webcal://`` is ``https://``); CalendarError in plain words."""
    url = text.strip().strip("<>")
    if url.lower().startswith("webcal://"):
        url = "https://" + url[len("webcal://") :]
    parts: SplitResult | None
    try:
        parts = urlsplit(url)
        _ = parts.port  # a port past 65535 or a broken [v6] literal raise ValueError
    except ValueError:
        parts = None
    if (
        parts is None
        or parts.scheme not in ("http", "https")
        or not parts.hostname
        or len(url.encode()) > MAX_ADDRESS
        or any(c.isspace() or not c.isprintable() for c in url)
    ):
        raise CalendarError(
            "that is not a calendar address: send the http(s):// or webcal:// link your "
            "calendar app shows under 'share' or 'secret address in iCal format'"
        )
    return url


def _refuse_private(host_address: str) -> None:
    """CalendarError unless ``host_address`` (an IP) is on the public internet."""
    address = ipaddress.ip_address(host_address.split("%", 1)[0])
    if not address.is_global:
        raise CalendarError(
            "that address is on this machine or a private network, which I do not "
            "fetch unless the operator sets LIFEBOT_CALENDAR_ALLOW_PRIVATE=true"
        )


def _proxied() -> bool:
    """An HTTP(S) proxy is set in the environment (httpx then connects through it)."""
    return any(urllib.request.getproxies_environment().get(k) for k in ("http", "https", "all"))


async def _capped_body(resp: httpx.Response) -> bytes:
    if resp.status_code >= 400:
        raise CalendarError(f"the calendar server answered {resp.status_code}")
    mb = MAX_BYTES // (1024 * 1024)
    too_big = CalendarError(f"the calendar is larger than {mb} MB, my limit")
    declared = resp.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > MAX_BYTES:
        raise too_big  # said before a byte is read
    body = bytearray()
    async for chunk in resp.aiter_bytes():
        body += chunk
        if len(body) > MAX_BYTES:
            raise too_big
    return bytes(body)


_PLAIN_SEGMENT = re.compile(r"[A-Za-z0-9._~-]{1,20}")
HIDDEN = "\u2026"
"""What stands in for a secret part of an address."""


def _plain(segment: str) -> bool:
    """A path segment that reads like a word (``calendar``, ``basic.ics``), not a token."""
    return (
        _PLAIN_SEGMENT.fullmatch(segment) is not None
        and sum(ch.isdigit() for ch in segment) <= 4
        and sum(ch.isupper() for ch in segment) <= 2
        and not segment.lower().startswith("private")
    )


def shown_url(url: str) -> str:
    """The address with every part that may be a secret replaced by ``…``.

    A feed address is usually a bearer secret (Google's ``private-…`` path, iCloud's and
    Outlook's long tokens, ``?token=``): the host and word-like path segments stay, so the
    owner recognises it; a user name or password, token-like segments, every query value and
    the fragment are hidden.
    """
    parts = urlsplit(url)
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    if parts.port is not None:
        host += f":{parts.port}"
    segments = [s if not s or _plain(unquote(s)) else HIDDEN for s in parts.path.split("/")]
    shown = f"{parts.scheme}://{HIDDEN + '@' if parts.username else ''}{host}{'/'.join(segments)}"
    if parts.query:
        keys = [k for k, _ in parse_qsl(parts.query, keep_blank_values=True)]
        shown += "?" + "&".join(f"{k if _plain(k) else HIDDEN}={HIDDEN}" for k in keys)
    return shown


def kind_words(kind: str) -> str:
    """What a source's kind means for the user."""
    return "ICS feed, read-only" if kind == "ics" else "CalDAV, two-way"


@dataclass(frozen=True, slots=True)
class Subscribed:
    """The outcome of adding a feed."""

    source: CalendarSource
    """The new source (or the one already subscribed to that address)."""
    added: int
    """Events the first read stored (0 when it was already there)."""
    already: bool
    """The user had already subscribed to that address; nothing changed."""
    skipped: int = 0
    """Events of the first read that could not be read (left out, the rest stored)."""


@dataclass(frozen=True, slots=True)
class Removed:
    """A removed source and how many of its events went with it."""

    source: CalendarSource
    """The source as it was."""
    events: int
    """Events deleted with it."""


def counts_words(c: SyncCounts) -> str:
    """``12 new, 1 changed, 0 removed`` (for replies and the CLI)."""
    said = f"{c.added} new, {c.updated} changed, {c.removed} removed, {c.unchanged} unchanged"
    return f"{said}, {c.skipped} unreadable skipped" if c.skipped else said


def skipped_words(skipped: int) -> str | None:
    """What a read left out, in words; None when it left nothing out."""
    if not skipped:
        return None
    return f"{skipped} event(s) in it could not be read and were skipped"


UNEXPECTED = "the calendar could not be read (an unexpected answer; the details are in the log)"
"""A calendar's error when its read failed in a way nobody put into words."""
NOT_SAVED = "the calendar was read but its events could not be saved (the details are in the log)"
"""A calendar's error when its read went well but storing the events failed."""


class OwnCalendars:
    """Imports, subscriptions and their periodic refresh; every call is scoped to one user."""

    def __init__(
        self,
        db: Database,
        clock: Clock,
        settings: CalendarSettings | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
        secrets: SecretBox | None = None,
    ) -> None:
        self.db = db
        self.clock = clock
        self.settings = settings or CalendarSettings()
        self.secrets = secrets or SecretBox(None)
        """Seals CalDAV passwords with LIFEBOT_CALENDAR_KEY."""
        self.transport = transport
        """httpx transport (None: the network); kept for tests of odd servers."""
        self._tried: dict[int, datetime] = {}
        """When each source was last attempted, so a failing feed is retried at the refresh
        interval, not on every pass."""

    def _window(self, now: datetime, past: timedelta = PAST) -> tuple[datetime, datetime]:
        return now - past, now + timedelta(days=self.settings.days_ahead)

    async def _parse(
        self,
        data: bytes,
        user: User,
        now: datetime,
        past: timedelta = PAST,
        *,
        bounds: Bounds | None = None,
        several: bool = False,
    ) -> tuple[list[OutsideEvent], int]:
        """The events of ``data`` over the window, and how many could not be read.

        Unreadable events are left out; CalendarError when the whole is unreadable.

        Parsing and expanding a calendar from outside can take unbounded CPU and memory in
        the parsers (a crafted repeat rule): it never runs in this process.
        """
        start, end = self._window(now, past)
        if bounds is None:
            bounds = replace(FEED_BOUNDS, seconds=self.settings.read_seconds)
        args = [zone(user.timezone).key, start.isoformat(), end.isoformat()]
        try:
            raw = await run_bounded(
                "bot.jobs.calendars.ics", data, bounds, *args, *(["several"] * several)
            )
        except OverBound as exc:
            raise CalendarError(f"reading it was stopped: {exc.limit}, my limit") from exc
        except ChildFailed as exc:
            log.warning("reading a calendar failed: %s", exc)
            raise CalendarError("the calendar could not be read") from exc
        read = parse_answer(raw)
        events = [
            OutsideEvent(e.key, e.title, e.start, e.end, e.all_day, e.place) for e in read.events
        ]
        return events, read.skipped

    async def import_file(self, user: User, data: bytes) -> SyncCounts:
        """Load an ICS document into the user's calendar (re-importing updates, never doubles)."""
        assert user.id is not None
        now = self.clock.now()
        events, skipped = await self._parse(data, user, now, IMPORT_PAST, bounds=IMPORT_BOUNDS)
        async with self.db.session() as s:
            counts = await CalendarRepo(s).sync_outside(
                user.id, IMPORT_SOURCE, events, now, remove_missing=False
            )
        counts = replace(counts, skipped=skipped)
        log.info("user %s imported a calendar file: %s", user.id, counts_words(counts))
        return counts

    async def check_host(self, url: str) -> None:
        """Refuse an address on this machine or a private network unless settings allow it."""
        if self.settings.allow_private:
            return
        parts = urlsplit(url)
        host = parts.hostname or ""
        try:
            infos = await asyncio.get_running_loop().getaddrinfo(host, parts.port or 443)
        except OSError as exc:
            raise CalendarError(f"the calendar's host {host!r} was not found") from exc
        for info in infos:
            _refuse_private(str(info[4][0]))

    def check_peer(self, resp: httpx.Response) -> None:
        """Refuse a response from a private address, whatever the name resolved to before.

        A host name can point at a public address when ``check_host`` looks it up and at a
        private one when the connection is made a moment later (DNS rebinding): the address
        actually connected to is checked too. Through a proxy the proxy connects, so there is
        nothing of ours to check.
        """
        if self.settings.allow_private or _proxied():
            return
        stream = resp.extensions.get("network_stream")
        peer = stream.get_extra_info("server_addr") if stream is not None else None
        if peer:
            _refuse_private(str(peer[0]))

    async def fetch(self, url: str, user_id: int | None = None) -> bytes:
        """The feed's body (size-capped); CalendarError in plain words on any failure.

        Redirects are followed by hand (at most 5) so each new host is checked too; for
        ``user_id``, every address reached (the one given, then each redirect's) is refused
        when it is the feed published for that person (a short link to it, or a feed that
        moved there, would read their events back in).
        The whole fetch has one deadline: a server that sends a byte every few seconds cannot
        hold it.
        """
        try:
            async with asyncio.timeout(self.settings.read_seconds):
                return await self._fetch(url, user_id)
        except TimeoutError:
            raise CalendarError(
                f"the calendar server took longer than {self.settings.read_seconds:g} seconds "
                "to send it, my limit"
            ) from None

    async def _fetch(self, url: str, user_id: int | None) -> bytes:
        # Imported here: httpx costs a CLI command that never fetches a feed a fifth of a second.
        import httpx  # noqa: PLC0415

        try:
            async with httpx.AsyncClient(
                timeout=self.settings.read_seconds,
                transport=self.transport,
                verify=httpx_context(),
                headers={"User-Agent": "lifebot calendar subscription"},
            ) as client:
                for _ in range(MAX_REDIRECTS + 1):
                    if user_id is not None:  # the address given, then every redirect's
                        await self._refuse_own_feed(user_id, url)
                    await self.check_host(url)
                    async with client.stream("GET", url) as resp:
                        self.check_peer(resp)
                        if resp.is_redirect and "location" in resp.headers:
                            url = feed_url(urljoin(url, resp.headers["location"]))
                            continue
                        return await _capped_body(resp)
        except httpx.HTTPError as exc:
            why = type(exc).__name__
            raise CalendarError(f"the calendar could not be fetched ({why})") from exc
        raise CalendarError("the calendar address redirects too many times")

    async def add_feed(self, user: User, url_text: str, name: str | None = None) -> Subscribed:
        """Subscribe to a feed and read it once now.

        CalendarError in plain words, and nothing stored, when the address is refused or
        unreadable (the rules of ``feed_url``, ``check_host`` and ``fetch``).
        """
        assert user.id is not None
        url = feed_url(url_text)
        await self._refuse_own_feed(user.id, url)
        now = self.clock.now()
        async with self.db.session() as s:
            known = await CalendarSourceRepo(s).linked(user.id, "ics", url)
        if known is not None:
            return Subscribed(known, 0, already=True)
        events, skipped = await self._parse(await self.fetch(url, user.id), user, now)
        async with self.db.session() as s:
            source, new = await CalendarSourceRepo(s).add(
                CalendarSource(
                    user_id=user.id,
                    kind="ics",
                    name=((name or "").strip() or urlsplit(url).hostname or "calendar")[:80],
                    url=url,
                    created_at=now,
                )
            )
            if not new:  # subscribed by a request that arrived together with this one
                return Subscribed(source, 0, already=True)
            assert source.id is not None
            counts = await CalendarRepo(s).sync_outside(
                user.id, source_tag(source), events, now, remove_missing=True
            )
            await CalendarSourceRepo(s).record(
                source.id, now, error=None, count=len(events), note=skipped_words(skipped)
            )
        return Subscribed(source, counts.added, already=False, skipped=skipped)

    async def _refuse_own_feed(self, user_id: int, url: str) -> None:
        """CalendarError when ``url`` is the feed this lifebot publishes for the person.

        Read back, every event of theirs would come in again as a copy from "outside". The
        secret in the path is what identifies it (the host may be any name or tunnel the
        person reaches this lifebot by), so the host is not compared.
        """
        found = OWN_FEED_PATH.search(urlsplit(url).path)
        if found is None:
            return
        async with self.db.session() as s:
            owner = await WebAuthRepo(s).ics_user(unquote(found["secret"]))
        if owner == user_id:
            raise CalendarError(
                "that is the calendar feed I publish for you; subscribing to it would read "
                "your events back in as copies"
            )

    async def subscribe(self, user: User, url_text: str, name: str | None = None) -> str:
        """Subscribe to a feed: read it once now (refused when unreadable); a sentence."""
        done = await self.add_feed(user, url_text, name)
        if done.already:
            return f"You are already subscribed to that calendar (#{done.source.id})."
        left_out = skipped_words(done.skipped)
        return (
            f"Subscribed to {done.source.name} (#{done.source.id}): {done.added} event(s) "
            f"read{f'; {left_out}' if left_out else ''}. "
            f"I re-read it every {self.settings.refresh.total_seconds() / 60:.0f} minutes."
        )

    async def sources(self, user_id: int) -> list[CalendarSource]:
        """The user's calendars, oldest first."""
        async with self.db.session() as s:
            return await CalendarSourceRepo(s).of_user(user_id)

    async def listing(self, user_id: int) -> str:
        """The user's calendars in words."""
        sources = await self.sources(user_id)
        if not sources:
            return (
                "You have no calendars linked. /calendar add URL subscribes to an ICS feed "
                "(read-only)."
            )
        lines = []
        for src in sources:
            when = f"{src.last_synced_at:%Y-%m-%d %H:%M} UTC" if src.last_synced_at else "never"
            state = f"; last error: {src.last_error}" if src.last_error else ""
            lines.append(
                f"#{src.id} {src.name} ({kind_words(src.kind)}): {src.event_count} event(s), "
                f"read {when}{state}"
            )
        return "\n".join(lines)

    async def drop(self, user_id: int, source_id: int) -> Removed | None:
        """Unsubscribe and delete the events the source brought in; None when not theirs."""
        async with self.db.session() as s:
            gone = await CalendarSourceRepo(s).remove(user_id, source_id)
            if gone is None:
                return None
            dropped = await CalendarRepo(s).drop_source(user_id, source_tag(gone))
        return Removed(gone, dropped)

    async def remove(self, user_id: int, source_id: int) -> str:
        """Unsubscribe and delete the events the source brought in; a sentence."""
        done = await self.drop(user_id, source_id)
        if done is None:
            return f"You have no calendar #{source_id} (/calendar list shows them)."
        return f"Removed {done.source.name} (#{source_id}) and its {done.events} event(s)."

    async def refresh_now(self, user: User, source_id: int) -> CalendarSource | None:
        """Re-read one of the user's calendars now; None when it is not theirs.

        Returns the source after the read: its ``last_error`` says why a failed read failed.
        """
        assert user.id is not None
        async with self.db.session() as s:
            source = await CalendarSourceRepo(s).get(user.id, source_id)
        if source is None:
            return None
        now = self.clock.now()
        self._tried[source_id] = now
        await self.refresh_source(source, user, now)
        async with self.db.session() as s:
            return await CalendarSourceRepo(s).get(user.id, source_id)

    async def _read_caldav(
        self, source: CalendarSource, user: User, now: datetime
    ) -> tuple[list[OutsideEvent], int]:
        assert user.id is not None
        texts = await asyncio.to_thread(caldav.read_all, self._login(source))
        async with self.db.session() as s:
            ours = await CalendarRepo(s).own_uids(user.id)
        if not texts:
            return [], 0
        # One bounded child reads them all (one VCALENDAR per event, one after the other).
        data = "\r\n".join(text.strip() for text in texts).encode()
        events, skipped = await self._parse(data, user, now, several=True)
        # Events lifebot wrote there come back with our uid: they are already here.
        return [ev for ev in events if ev.key.split("/", 1)[0] not in ours], skipped

    def _login(self, source: CalendarSource) -> Login:
        return Login(source.url, source.username or "", self.secrets.open(source.secret or ""))

    async def refresh_source(self, source: CalendarSource, user: User, now: datetime) -> str:
        """Re-read one calendar; failures are recorded on the source (its events stay).

        Returns ``read``, ``failed``, or ``removed`` (the calendar was removed meanwhile).
        """
        assert source.id is not None
        assert user.id is not None
        try:
            if source.kind == "caldav":
                events, skipped = await self._read_caldav(source, user, now)
            else:
                events, skipped = await self._parse(
                    await self.fetch(source.url, user.id), user, now
                )
        except CalendarError as exc:
            return await self._failed(source, user, now, str(exc))
        except Exception as exc:  # noqa: BLE001  (one calendar must not stop the rest)
            # Not the server's words but a surprise (a library's own error on what a server
            # sent): this calendar's read failed, the others' go on.
            log.warning(
                "calendar #%s of user %s: %s: %s", source.id, user.id, type(exc).__name__, exc
            )
            return await self._failed(source, user, now, UNEXPECTED)
        try:
            async with self.db.session() as s:
                # The source's row first: held until this commits, so a removal meanwhile
                # waits and then deletes these events too, and a calendar removed while its
                # server was read does not get its events back without it.
                if not await CalendarSourceRepo(s).record(
                    source.id, now, error=None, count=len(events), note=skipped_words(skipped)
                ):
                    return "removed"
                await CalendarRepo(s).sync_outside(
                    user.id, source_tag(source), events, now, remove_missing=True
                )
        except Exception as exc:  # noqa: BLE001  (one calendar must not stop the rest)
            # Storing a good read failed (the database refused a row, went away, filled up):
            # the session rolled back, so this calendar keeps its last events; say so on it.
            log.warning(
                "saving calendar #%s of user %s: %s: %s",
                source.id,
                user.id,
                type(exc).__name__,
                exc,
            )
            return await self._failed(source, user, now, NOT_SAVED)
        return "read"

    async def _failed(self, source: CalendarSource, user: User, now: datetime, why: str) -> str:
        assert source.id is not None
        async with self.db.session() as s:
            await CalendarSourceRepo(s).record(source.id, now, error=why)
        log.warning("calendar #%s of user %s: %s", source.id, user.id, why)
        return "failed"

    async def refresh(self, now: datetime) -> str:
        """The leader's periodic job: re-read every feed not read within the refresh interval.

        Users are refreshed ``REFRESH_AT_ONCE`` at a time and each user's calendars one after
        another: a slow feed (bounded by ``FETCH_SECONDS`` and ``FEED_BOUNDS``) delays only
        its owner's other calendars, never another user's.
        """
        async with self.db.session() as s:
            sources = await CalendarSourceRepo(s).every()
        due: dict[int, list[CalendarSource]] = {}
        for source in sources:
            assert source.id is not None
            tried = self._tried.get(source.id) or source.last_synced_at
            if tried is not None and now - tried < self.settings.refresh:
                continue
            self._tried[source.id] = now
            due.setdefault(source.user_id, []).append(source)
        done = {"read": 0, "failed": 0, "removed": 0}
        slots = asyncio.Semaphore(REFRESH_AT_ONCE)

        async def one_user(user_id: int, theirs: list[CalendarSource]) -> None:
            async with slots:
                async with self.db.session() as s:
                    user = await UserRepo(s).get(user_id)
                if user is None:
                    return
                for source in theirs:
                    try:
                        done[await self.refresh_source(source, user, now)] += 1
                    except Exception as exc:  # noqa: BLE001  (the owner's next calendar still runs)
                        # Even noting the failure on the source failed (the database is away):
                        # log it and go on with this owner's next calendar.
                        log.warning(
                            "calendar #%s of user %s: %s: %s",
                            source.id,
                            user_id,
                            type(exc).__name__,
                            exc,
                        )
                        done["failed"] += 1

        await asyncio.gather(*(one_user(uid, theirs) for uid, theirs in due.items()))
        return f"calendars read {done['read']}, failed {done['failed']}"

    async def refresh_user(self, user: User, now: datetime) -> None:
        """Re-read all of one user's calendars now (``/briefing now`` wants fresh events)."""
        assert user.id is not None
        async with self.db.session() as s:
            sources = await CalendarSourceRepo(s).of_user(user.id)
        for source in sources:
            self._tried[source.id or 0] = now
            await self.refresh_source(source, user, now)

    async def add_caldav(
        self, user: User, url: str, username: str, password: str, name: str | None = None
    ) -> str:
        """Link a CalDAV calendar (checked by logging in; refused otherwise); a sentence.

        Linking one the user has already linked (the same collection) keeps that one and
        gives it the login just checked, instead of a second copy of every event.
        """
        assert user.id is not None
        sealed = self.secrets.seal(password)  # refuses before any network when no key is set
        await self.check_host(feed_url(url))
        found = await asyncio.to_thread(caldav.check, Login(url, username, password))
        now = self.clock.now()
        async with self.db.session() as s:
            source, new = await CalendarSourceRepo(s).add(
                CalendarSource(
                    user_id=user.id,
                    kind="caldav",
                    name=(name or urlsplit(found).hostname or "CalDAV")[:80],
                    url=found,
                    username=username,
                    secret=sealed,
                    created_at=now,
                )
            )
            if not new:  # linked before (or by a request arriving together): its login now
                source.username, source.secret = username, sealed
                s.add(source)
                return (
                    f"You already link that CalDAV calendar (#{source.id}); its login is updated."
                )
        result = await self.refresh_source(source, user, now)
        async with self.db.session() as s:
            stored = await CalendarSourceRepo(s).get(user.id, source.id or 0)
        count = stored.event_count if stored else 0
        tail = (
            "" if result == "read" else f" (the first read failed: {stored and stored.last_error})"
        )
        return (
            f"Linked CalDAV calendar {source.name} (#{source.id}): {count} event(s) read{tail}. "
            "Events you accept from my proposals are written to it."
        )

    async def write_accepted(self, user: User, event: CalendarEvent) -> str | None:
        """Write an accepted event to the user's CalDAV calendars; a problem in words or None."""
        assert user.id is not None
        async with self.db.session() as s:
            targets = await CalendarSourceRepo(s).of_user(user.id, "caldav")
        problems = []
        for target in targets:
            try:
                ics = caldav.event_ics(event, self.clock.now(), zone(user.timezone))
                await asyncio.to_thread(caldav.write, self._login(target), ics)
            except CalendarError as exc:
                log.warning("writing to calendar #%s of user %s: %s", target.id, user.id, exc)
                problems.append(f"{target.name}: {exc}")
        return "; ".join(problems) or None

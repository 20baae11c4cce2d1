"""Subscribed ICS feeds: read at once, re-read by the leader, per user, plain errors (#16)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest

from bot.app.build import App
from bot.errors import CalendarError
from bot.jobs.calendars.caldav import new_key
from bot.jobs.calendars.own import feed_url
from storage.models import CalendarSource
from storage.repos.calendar import CalendarRepo
from storage.repos.calendar_sources import CalendarSourceRepo
from storage.repos.web import WebAuthRepo
from tests.fakes.channel import RecordingChannel
from tests.fakes.clock import ManualClock
from tests.fakes.ics_feed import FakeFeed
from tests.support.builders import make_inbound
from tests.support.jobs import jobs_app, make_user

NOW = datetime(2025, 6, 2, 6, 0, tzinfo=UTC)


def feed(*events: tuple[str, str, str]) -> bytes:
    """An ICS feed of (uid, start as UTC basic format, title), one hour each."""
    body = "".join(
        f"BEGIN:VEVENT\r\nUID:{uid}\r\nDTSTAMP:20250101T000000Z\r\nDTSTART:{start}Z\r\n"
        f"DURATION:PT1H\r\nSUMMARY:{title}\r\nEND:VEVENT\r\n"
        for uid, start, title in events
    )
    return f"BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:-//t//EN\r\n{body}END:VCALENDAR\r\n".encode()


@pytest.fixture
async def fake_feed() -> AsyncIterator[FakeFeed]:
    served = FakeFeed()
    await served.start()
    yield served
    await served.stop()


@asynccontextmanager
async def ana_app(
    tmp_path: Path, clock: ManualClock
) -> AsyncIterator[tuple[App, int, Callable[[str], Awaitable[str]]]]:
    """A jobs app (private feed addresses allowed) with Ana: (app, her id, say).

    ``say`` sends her words to lifebot and returns its reply.
    """
    async with jobs_app(tmp_path, clock, calendar_allow_private=True) as app:
        app.dispatcher.register(RecordingChannel("fake"))
        ana = await make_user(app, "ana")
        assert ana.id is not None

        async def say(text: str) -> str:
            result = await app.dispatcher.handle(make_inbound(text, sender="ana"))
            assert result.reply is not None
            return result.reply

        yield app, ana.id, say


async def titles(app: App, user_id: int) -> list[str]:
    async with app.db.session() as s:
        return [e.title for e in await CalendarRepo(s).all_events(user_id)]


async def test_a_feed_removed_while_it_is_being_read_stays_removed(
    tmp_path: Path, fake_feed: FakeFeed
) -> None:
    clock = ManualClock(NOW)
    fake_feed.body = feed(("a@t", "20250603T090000", "Dentist"))
    async with ana_app(tmp_path, clock) as (app, ana_id, say):
        added = await say(f"/calendar add {fake_feed.url} Work")
        fake_feed.body = feed(
            ("a@t", "20250603T090000", "Dentist"), ("b@t", "20250604T120000", "Lunch")
        )
        removed: list[str] = []

        async def ana_removes_it() -> None:
            removed.append(await say("/calendar remove 1"))

        # Ana removes the calendar while the leader's re-read waits for the server.
        fake_feed.while_asked = ana_removes_it
        refreshed = await app.jobs.calendars.refresh(clock.advance(minutes=31))
        week = await say("/calendar")
        listing = await say("/calendar list")
        left = await titles(app, ana_id)

    assert added.startswith("Subscribed to Work (#1): 1 event(s) read.")
    assert removed == ["Removed Work (#1) and its 1 event(s)."]
    assert left == []  # the read's events did not come back without their calendar
    assert refreshed == "calendars read 0, failed 0"  # nothing to read any more
    assert week == "Nothing in your calendar for the next 7 days."
    assert "#1" not in listing


async def test_a_feed_is_subscribed_refreshed_and_removed_per_user(
    tmp_path: Path, fake_feed: FakeFeed
) -> None:
    clock = ManualClock(NOW)
    fake_feed.body = feed(
        ("a@t", "20250603T090000", "Dentist"), ("b@t", "20250604T120000", "Lunch")
    )
    async with jobs_app(tmp_path, clock, calendar_allow_private=True) as app:
        app.dispatcher.register(RecordingChannel("fake"))
        ana = await make_user(app, "ana")
        bob = await make_user(app, "bob")
        assert ana.id is not None and bob.id is not None

        async def say(text: str, sender: str = "ana") -> str:
            result = await app.dispatcher.handle(make_inbound(text, sender=sender))
            assert result.reply is not None
            return result.reply

        # The address given redirects to the feed (as shared links often do).
        added = await say(f"/calendar add {fake_feed.url.replace('/cal.ics', '/moved')} Work")
        twice = await say(f"/calendar add {fake_feed.url.replace('/cal.ics', '/moved')}")
        week = await say("/calendar")
        listing = await say("/calendar list")
        bobs_week = await say("/calendar", "bob")
        bob_removes = await say("/calendar remove 1", "bob")
        # The feed changes: one event moves, one is dropped, one is new.
        fake_feed.body = feed(
            ("a@t", "20250603T100000", "Dentist"), ("c@t", "20250605T080000", "Flight")
        )
        early = await app.jobs.calendars.refresh(clock.advance(minutes=5))
        after_early = await titles(app, ana.id)
        late = await app.jobs.calendars.refresh(clock.advance(minutes=30))
        after_late = await titles(app, ana.id)
        # The server breaks: the last good read stays and the error is shown.
        fake_feed.status = 500
        broken = await app.jobs.calendars.refresh(clock.advance(minutes=31))
        after_broken = await titles(app, ana.id)
        listing_broken = await say("/calendar list")
        removed = await say("/calendar remove 1")
        after_removed = await titles(app, ana.id)

    assert added == ("Subscribed to Work (#1): 2 event(s) read. I re-read it every 30 minutes.")
    assert twice == "You are already subscribed to that calendar (#1)."
    assert "Tue 3 Jun 09:00-10:00 Dentist" in week and "Lunch" in week
    assert listing.startswith("#1 Work (ICS feed, read-only): 2 event(s), read 2025-06-02")
    assert fake_feed.url not in listing  # the secret address is not repeated in chat
    assert bobs_week == "Nothing in your calendar for the next 7 days."
    assert bob_removes == "You have no calendar #1 (/calendar list shows them)."
    assert early == "calendars read 0, failed 0"  # read 5 minutes ago: not yet
    assert after_early == ["Dentist", "Lunch"]
    assert late == "calendars read 1, failed 0"
    assert after_late == ["Dentist", "Flight"]
    assert broken == "calendars read 0, failed 1"
    assert after_broken == ["Dentist", "Flight"]
    assert "last error: the calendar server answered 500" in listing_broken
    assert removed == "Removed Work (#1) and its 3 event(s)."
    assert after_removed == []


async def test_unreadable_feeds_are_refused_in_plain_words(
    tmp_path: Path, fake_feed: FakeFeed
) -> None:
    async with ana_app(tmp_path, ManualClock(NOW)) as (_, _, say):
        not_url = await say("/calendar add my work calendar")
        fake_feed.body = b"<html>Sign in</html>"
        html = await say(f"/calendar add {fake_feed.url}")
        fake_feed.status = 404
        missing = await say(f"/calendar add {fake_feed.url}")
        closed = await say("/calendar add http://127.0.0.1:9/cal.ics")
        listing = await say("/calendar list")
        usage = await say("/calendar frobnicate")
    assert not_url.startswith("I could not subscribe: that is not a calendar address")
    assert html == (
        "I could not subscribe: this is not an iCalendar file (no BEGIN:VCALENDAR at the top). "
        "Nothing was added."
    )
    assert missing == "I could not subscribe: the calendar server answered 404. Nothing was added."
    assert closed.startswith("I could not subscribe: the calendar could not be fetched")
    assert listing.startswith("You have no calendars linked.")
    assert usage.startswith("Usage: /calendar")


async def test_addresses_inside_the_network_are_refused_by_default(
    tmp_path: Path, fake_feed: FakeFeed
) -> None:
    fake_feed.body = feed(("a@t", "20250603T090000", "Dentist"))
    async with jobs_app(tmp_path, ManualClock(NOW)) as app:
        app.dispatcher.register(RecordingChannel("fake"))
        await make_user(app, "ana")
        reply = await app.dispatcher.handle(
            make_inbound(f"/calendar add {fake_feed.url}", sender="ana")
        )
        listing = await app.jobs.calendars.listing(1)
    assert reply.reply is not None
    assert reply.reply.startswith(
        "I could not subscribe: that address is on this machine or a private network"
    )
    assert fake_feed.hits == 0  # refused before any request
    assert listing.startswith("You have no calendars linked.")


def test_webcal_links_are_https() -> None:
    assert feed_url(" webcal://example.org/a.ics ") == "https://example.org/a.ics"


class Rebinding(httpx.AsyncHTTPTransport):
    """The network as a rebinding DNS makes it: the host name's address checked beforehand
    is public, but the connection lands on this machine (the fake feed)."""

    def __init__(self, target: str) -> None:
        super().__init__()
        self.target = httpx.URL(target)
        self.requests = 0

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self.requests += 1
        request.url = request.url.copy_with(
            scheme="http", host=self.target.host, port=self.target.port
        )
        return await super().handle_async_request(request)


async def test_a_name_that_points_inside_when_connecting_is_refused(
    tmp_path: Path, fake_feed: FakeFeed
) -> None:
    fake_feed.body = feed(("a@t", "20250603T090000", "Secret meeting"))
    async with jobs_app(tmp_path, ManualClock(NOW)) as app:
        network = Rebinding(fake_feed.url)
        app.jobs.calendars.transport = network
        user = await make_user(app, "ana")
        path = httpx.URL(fake_feed.url).raw_path.decode()
        with pytest.raises(CalendarError, match="on this machine or a private network"):
            # A public address when checked; this machine when connected.
            await app.jobs.calendars.add_feed(user, f"https://93.184.216.34{path}")
        assert network.requests == 1 and fake_feed.hits == 1  # connected, then refused
        assert await titles(app, user.id or 0) == []
        assert (await app.jobs.calendars.listing(user.id or 0)).startswith(
            "You have no calendars linked."
        )


def _vevent(uid: str, *lines: str) -> str:
    return "".join(
        f"{line}\r\n"
        for line in ("BEGIN:VEVENT", f"UID:{uid}", "DTSTAMP:20250101T000000Z", *lines, "END:VEVENT")
    )


BROKEN = (
    _vevent("bad-start@t", "DTSTART:2025XX03T090000Z", "SUMMARY:Broken start"),
    _vevent("no-start@t", "SUMMARY:No start"),
    _vevent("bad-rule@t", "DTSTART:20250603T110000Z", "RRULE:FREQ=SOMETIMES", "SUMMARY:Rule"),
    _vevent("bad-end@t", "DTSTART:20250603T110000Z", "DURATION:PT1Q", "SUMMARY:Bad length"),
)
"""Events no reader can place: each is skipped, the rest of the feed is read."""


async def test_a_feed_with_unreadable_events_is_read_without_them_and_says_how_many(
    tmp_path: Path, fake_feed: FakeFeed, app_database_url: str
) -> None:
    # One broken event refused the whole feed ("the calendar could not be read: 'DTSTART'"),
    # a NUL in a title failed the message on PostgreSQL, and a zone nobody knows was read as UTC.
    good = (
        _vevent("dentist@t", "DTSTART:20250603T090000Z", "DURATION:PT1H", "SUMMARY:Dentist")
        + _vevent("nul@t", "DTSTART:20250603T130000Z", "DURATION:PT1H", "SUMMARY:Yo\x00ga")
        + _vevent(
            "mars@t",
            "DTSTART;TZID=Mars/Olympus Mons:20250603T150000",
            "DURATION:PT1H",
            "SUMMARY:Standup",
        )
    )
    fake_feed.body = (
        "BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:-//t//EN\r\n"
        f"{good}{''.join(BROKEN)}END:VCALENDAR\r\n"
    ).encode()
    async with jobs_app(
        tmp_path,
        ManualClock(NOW),
        calendar_allow_private=True,
        database_url_setting=app_database_url,
    ) as app:
        app.dispatcher.register(RecordingChannel("fake"))
        ana = await make_user(app, "ana", timezone="Europe/Lisbon")
        assert ana.id is not None
        added = await app.dispatcher.handle(
            make_inbound(f"/calendar add {fake_feed.url} Work", sender="ana")
        )
        listing = await app.dispatcher.handle(make_inbound("/calendar list", sender="ana"))
        async with app.db.session() as s:
            events = {e.title: e for e in await CalendarRepo(s).all_events(ana.id)}

    assert added.reply == (
        "Subscribed to Work (#1): 3 event(s) read; 4 event(s) in it could not be read and "
        "were skipped. I re-read it every 30 minutes."
    )
    assert listing.reply is not None
    assert "3 event(s)" in listing.reply
    assert "4 event(s) in it could not be read and were skipped" in listing.reply
    assert sorted(events) == ["Dentist", "Standup", "Yoga"]
    # An unknown zone is the person's own (Lisbon, UTC+1 in June), never UTC.
    assert events["Standup"].start_at == datetime(2025, 6, 3, 14, 0, tzinfo=UTC)


ZONED = (
    "BEGIN:VTIMEZONE\r\nTZID:Office Time\r\nBEGIN:STANDARD\r\nDTSTART:19700101T000000\r\n"
    "TZOFFSETFROM:+0300\r\nTZOFFSETTO:+0300\r\nTZNAME:OT\r\nEND:STANDARD\r\nEND:VTIMEZONE\r\n"
)
"""A zone the file defines itself (a fixed UTC+3 nobody's database names)."""


async def test_an_outlook_zone_name_and_a_zone_only_the_file_defines_keep_their_hour(
    tmp_path: Path, fake_feed: FakeFeed
) -> None:
    # Outlook names zones the Windows way ("W. Europe Standard Time"); other apps name a zone
    # only in the file's VTIMEZONE. Either read as UTC would show the event at the wrong hour.
    events = _vevent(
        "outlook@t",
        "DTSTART;TZID=W. Europe Standard Time:20250603T090000",
        "DURATION:PT1H",
        "SUMMARY:Outlook meeting",
    ) + _vevent(
        "office@t",
        "DTSTART;TZID=Office Time:20250603T090000",
        "DURATION:PT1H",
        "SUMMARY:Office meeting",
    )
    fake_feed.body = (
        f"BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:-//t//EN\r\n{ZONED}{events}END:VCALENDAR\r\n"
    ).encode()
    async with jobs_app(tmp_path, ManualClock(NOW), calendar_allow_private=True) as app:
        app.dispatcher.register(RecordingChannel("fake"))
        ana = await make_user(app, "ana", timezone="America/New_York")
        assert ana.id is not None
        added = await app.dispatcher.handle(
            make_inbound(f"/calendar add {fake_feed.url} Work", sender="ana")
        )
        async with app.db.session() as s:
            found = {e.title: e.start_at for e in await CalendarRepo(s).all_events(ana.id)}

    assert added.reply is not None and "2 event(s) read" in added.reply
    # 09:00 in Berlin's summer (UTC+2) and 09:00 at UTC+3; not 09:00 UTC, nor New York's.
    assert found == {
        "Outlook meeting": datetime(2025, 6, 3, 7, 0, tzinfo=UTC),
        "Office meeting": datetime(2025, 6, 3, 6, 0, tzinfo=UTC),
    }


async def test_a_calendar_whose_server_answers_garbage_fails_alone(
    tmp_path: Path, fake_feed: FakeFeed
) -> None:
    # The CalDAV library's own error on a garbled answer left the refresh job: the owner's
    # other calendars were not read that round (nor the next, the failing one first again).
    fake_feed.body = feed(("a@t", "20250603T090000", "Dentist"))
    fake_feed.dav_body = b"<?xml version='1.0'?><multistatus xmlns='DAV:'><response><oops"
    clock = ManualClock(NOW)
    async with jobs_app(
        tmp_path, clock, calendar_allow_private=True, calendar_key=new_key()
    ) as app:
        app.dispatcher.register(RecordingChannel("fake"))
        ana = await make_user(app, "ana")
        assert ana.id is not None
        async with app.db.session() as s:
            await CalendarSourceRepo(s).add(
                CalendarSource(
                    user_id=ana.id,
                    kind="caldav",
                    name="Work",
                    url=fake_feed.url.replace("/cal.ics", "/dav/work/"),
                    username="ana",
                    secret=app.jobs.calendars.secrets.seal("pw"),
                    created_at=NOW,
                )
            )
        said = await app.dispatcher.handle(
            make_inbound(f"/calendar add {fake_feed.url}", sender="ana")
        )
        assert said.reply is not None and said.reply.startswith("Subscribed to 127.0.0.1 (#2)")
        fake_feed.body = feed(
            ("a@t", "20250603T090000", "Dentist"), ("b@t", "20250604T100000", "Gym")
        )

        rounds = await app.jobs.calendars.refresh(clock.advance(minutes=31))
        listing = await app.dispatcher.handle(make_inbound("/calendar list", sender="ana"))
        read = await titles(app, ana.id)

    assert rounds == "calendars read 1, failed 1"
    assert read == ["Dentist", "Gym"]
    assert listing.reply is not None
    assert "#1 Work (CalDAV" in listing.reply
    assert "last error: the calendar could not be read (an unexpected answer" in listing.reply


@pytest.mark.parametrize(
    "address",
    [
        "http://[::1/cal.ics",  # a broken IPv6 literal: a ValueError reached the person
        "https://example.org:99999/cal.ics",  # a port past 65535: the same, at fetch time
        "https://example.org/\x1bcal.ics",
        "https://example.org/" + "a" * 3000 + ".ics",
    ],
)
async def test_a_malformed_calendar_address_is_refused_in_words(
    tmp_path: Path, address: str
) -> None:
    async with jobs_app(tmp_path, ManualClock(NOW)) as app:
        app.dispatcher.register(RecordingChannel("fake"))
        await make_user(app, "ana")
        result = await app.dispatcher.handle(make_inbound(f"/calendar add {address}", sender="ana"))
        listing = await app.dispatcher.handle(make_inbound("/calendar list", sender="ana"))
    assert result.reply is not None
    assert result.reply.startswith("I could not subscribe: that is not a calendar address")
    assert listing.reply is not None and listing.reply.startswith("You have no calendars")


async def test_a_calendar_whose_events_cannot_be_saved_fails_alone(tmp_path: Path) -> None:
    # A read went well but storing it failed (here the database refuses one event, as a
    # full disk or a lost connection would): the error left the refresh job and the
    # owner's later calendars were not read that round.
    first, second = FakeFeed(feed(("a@t", "20250603T090000", "Dentist"))), FakeFeed()
    second.body = feed(("b@t", "20250604T100000", "Gym"))
    await first.start()
    await second.start()
    clock = ManualClock(NOW)
    try:
        async with jobs_app(tmp_path, clock, calendar_allow_private=True) as app:
            app.dispatcher.register(RecordingChannel("fake"))
            ana = await make_user(app, "ana")
            assert ana.id is not None
            for served in (first, second):
                said = await app.dispatcher.handle(
                    make_inbound(f"/calendar add {served.url}", sender="ana")
                )
                assert said.reply is not None and said.reply.startswith("Subscribed")
            async with app.db.engine.begin() as conn:
                await conn.exec_driver_sql(
                    "CREATE TRIGGER refuse_poison BEFORE INSERT ON calendarevent "
                    "WHEN NEW.title = 'Poison' BEGIN SELECT RAISE(ABORT, 'refused'); END"
                )
            first.body = feed(
                ("a@t", "20250603T090000", "Dentist"), ("p@t", "20250603T120000", "Poison")
            )
            second.body = feed(
                ("b@t", "20250604T100000", "Gym"), ("c@t", "20250605T080000", "Flight")
            )
            rounds = await app.jobs.calendars.refresh(clock.advance(minutes=31))
            listing = await app.dispatcher.handle(make_inbound("/calendar list", sender="ana"))
            read = await titles(app, ana.id)
    finally:
        await first.stop()
        await second.stop()

    assert rounds == "calendars read 1, failed 1"
    assert sorted(read) == ["Dentist", "Flight", "Gym"]
    assert listing.reply is not None
    assert "#2 127.0.0.1 (ICS feed, read-only): 2 event(s)" in listing.reply
    assert "#1 127.0.0.1 (ICS feed, read-only): 1 event(s)" in listing.reply
    assert "last error: the calendar was read but its events could not be saved" in listing.reply


@asynccontextmanager
async def publishing_ana(
    tmp_path: Path, clock: ManualClock
) -> AsyncIterator[tuple[App, int, Callable[[str], Awaitable[str]]]]:
    """A jobs app where Ana publishes her feed (token "Secret-feed_0123"): (app, her id, say).

    ``say`` sends her words to lifebot and returns its reply.
    """
    async with ana_app(tmp_path, clock) as (app, ana_id, say):
        async with app.db.session() as s:
            await WebAuthRepo(s).set_ics_token(ana_id, "Secret-feed_0123", NOW)
        yield app, ana_id, say


async def test_lifebots_own_published_feed_is_refused_as_a_subscription(tmp_path: Path) -> None:
    # The feed lifebot publishes for the person, subscribed back: every event of theirs was
    # read in again as a second copy from "outside".
    async with publishing_ana(tmp_path, ManualClock(NOW)) as (_, _, say):
        own = await say("/calendar add http://127.0.0.1:9/calendar/Secret-feed_0123.ics")
        webcal = await say(
            "/calendar add webcal://127.0.0.1:9/lifebot/calendar/Secret-feed_0123.ics"
        )
        listing = await say("/calendar list")
    refusal = (
        "I could not subscribe: that is the calendar feed I publish for you; subscribing to "
        "it would read your events back in as copies. Nothing was added."
    )
    assert own == refusal
    assert webcal == refusal
    assert listing.startswith("You have no calendars linked.")


async def test_an_address_that_redirects_to_the_own_published_feed_is_refused_too(
    tmp_path: Path, fake_feed: FakeFeed
) -> None:
    # Only the address given was checked: a short link to the person's own feed (or a feed
    # that later moved there) read every event of theirs back in as a copy from "outside".
    clock = ManualClock(NOW)
    fake_feed.body = feed(("a@t", "20250603T090000", "Dentist"))
    async with publishing_ana(tmp_path, clock) as (app, ana_id, say):
        moved = fake_feed.url.replace("/cal.ics", "/moved")
        port = urlsplit(fake_feed.url).port
        fake_feed.moved_to = "/calendar/Secret-feed_0123.ics"
        short = await say(f"/calendar add {moved} Mine")
        after_short = await titles(app, ana_id)
        # A feed of someone else's that moves there later is refused at its next read.
        fake_feed.moved_to = "/cal.ics"
        added = await say(f"/calendar add {moved} Work")
        fake_feed.moved_to = f"http://127.0.0.1:{port}/lifebot/calendar/Secret-feed_0123.ics"
        fake_feed.body = feed(
            ("a@t", "20250603T090000", "Dentist"), ("b@t", "20250604T120000", "Copy")
        )
        rounds = await app.jobs.calendars.refresh(clock.advance(minutes=31))
        listing = await say("/calendar list")
        read = await titles(app, ana_id)

    assert short == (
        "I could not subscribe: that is the calendar feed I publish for you; subscribing to "
        "it would read your events back in as copies. Nothing was added."
    )
    assert after_short == []
    assert added.startswith("Subscribed to Work (#1): 1 event(s) read.")
    assert rounds == "calendars read 0, failed 1"
    assert "last error: that is the calendar feed I publish for you" in listing
    assert read == ["Dentist"]  # the last good read stays; nothing came back as a copy

"""Subscribed ICS feeds: read at once, re-read by the leader, per user, plain errors (#16)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path

import httpx
import pytest

from bot.app.build import App
from bot.errors import CalendarError
from bot.jobs.calendars.own import feed_url
from storage.repos.calendar import CalendarRepo
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


async def titles(app: App, user_id: int) -> list[str]:
    async with app.db.session() as s:
        return [e.title for e in await CalendarRepo(s).all_events(user_id)]


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
    async with jobs_app(tmp_path, ManualClock(NOW), calendar_allow_private=True) as app:
        app.dispatcher.register(RecordingChannel("fake"))
        ana = await make_user(app, "ana")
        assert ana.id is not None

        async def say(text: str) -> str:
            result = await app.dispatcher.handle(make_inbound(text, sender="ana"))
            assert result.reply is not None
            return result.reply

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

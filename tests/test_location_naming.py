"""'What was this place?' and Rename on the evening's location proposals (#24)."""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path

from sqlmodel import col, select

from bot.adapters.slack.format import button_blocks
from bot.adapters.telegram.send import ButtonCodec
from bot.app.build import App
from bot.location.geo import Fix, distance_m
from storage.models import Place, Proposal
from tests.fakes.channel import RecordingChannel
from tests.fakes.clock import ManualClock
from tests.support.app import add_user
from tests.support.builders import make_inbound
from tests.support.gps import BERLIN, PLACES, stay_at
from tests.support.jobs import jobs_app

HALL = (52.4900, 13.3600)
"""A climbing hall the user has not named: about 3 km from every planted place."""
TUESDAY = datetime(2026, 3, 24, tzinfo=BERLIN)


async def say(app: App, text: str, **kw: str) -> str:
    result = await app.dispatcher.handle(make_inbound(text, sender="ana", **kw))
    return result.reply or ""


async def proposals(app: App) -> list[Proposal]:
    async with app.db.session() as s:
        return list((await s.exec(select(Proposal).order_by(col(Proposal.id)))).all())


async def places(app: App) -> list[Place]:
    async with app.db.session() as s:
        return list((await s.exec(select(Place))).all())


async def evening(app: App, day: datetime, *visits: tuple[tuple[float, float], int, int]) -> None:
    """A day of (place, start hour, minutes) visits between home stays, then the 21:35 scan."""
    clock = app.clock
    assert isinstance(clock, ManualClock)
    clock.set(day + timedelta(hours=23, minutes=59))  # after the day: points are "late"
    user_id = 1
    fixes = stay_at(PLACES["home"], day + timedelta(hours=7), 60, seed=day.day)
    for n, (where, hour, minutes) in enumerate(visits):
        fixes += stay_at(where, day + timedelta(hours=hour), minutes, seed=day.day * 10 + n)
        fixes += stay_at(PLACES["home"], day + timedelta(hours=hour, minutes=minutes + 20), 40)
    await app.location.ingest(user_id, fixes, "owntracks")
    await app.location_proposals.scan(clock.set(day + timedelta(hours=21, minutes=35)))


async def test_the_answer_to_what_was_this_place_names_it_and_later_stays(
    tmp_path: Path,
) -> None:
    clock = ManualClock(TUESDAY - timedelta(days=1))
    async with jobs_app(tmp_path, clock) as app:
        channel = RecordingChannel("fake")
        app.dispatcher.register(channel)
        ana = await add_user(app, "ana", timezone="Europe/Berlin")
        assert ana.id == 1
        await app.location.set_enabled(ana.id, True)
        await app.location.ingest(ana.id, [Fix(clock.now(), *PLACES["home"], 5)], "x")
        home = await app.location.add_place(ana.id, "home", *PLACES["home"])
        home.kind = "home"
        await app.location.save_place(home)

        # Tuesday: two unnamed places (the hall at 14:00, the bar at 17:00).
        await evening(app, TUESDAY, (HALL, 14, 100), (PLACES["bar"], 17, 60))
        hall_p, bar_p = await proposals(app)
        assert hall_p.place is None and "a new place" in hall_p.title
        await app.jobs.outbox.run_due(clock.now())
        push = channel.sent[-1]
        assert "1. Time at a new place" in push.text and "What was this place?" in push.text
        assert [b.label for b in push.buttons] == [
            "Accept 1",
            "Decline 1",
            "Rename 1",
            "Accept 2",
            "Decline 2",
            "Rename 2",
        ]
        # Telegram lays each proposal's three buttons on one row; Slack shows them all.
        rows = ButtonCodec().keyboard(push.buttons)
        assert rows is not None
        assert [[b.text for b in row] for row in rows.inline_keyboard] == [
            ["Accept 1", "Decline 1", "Rename 1"],
            ["Accept 2", "Decline 2", "Rename 2"],
        ]
        assert len(button_blocks(push.text, push.buttons)[1]["elements"]) == 6

        # The next plain message answers the question about the first new place.
        reply = await say(app, "Climbing hall")
        assert reply.startswith("Saved Climbing hall"), reply
        assert f"#{hall_p.id} is now: Time at Climbing hall, 14:" in reply
        assert f"And #{bar_p.id}" in reply and "what was this place?" in reply
        # The pressed keyboard is gone, so the reply offers both proposals' buttons again.
        offered = channel.sent[-1].buttons
        assert [b.label for b in offered] == [
            f"{verb} #{p.id}" for p in (hall_p, bar_p) for verb in ("Accept", "Decline", "Rename")
        ]
        assert offered[-1].data == f"/place name {bar_p.id}"
        (hall,) = [p for p in await places(app) if p.name == "Climbing hall"]
        assert distance_m(hall.lat, hall.lon, *HALL) < 30  # the stay's centre
        # A question of the person's own is not taken as the bar's name: it goes to the agent.
        # (No model is scripted, so the agent's answer is the "not configured" notice.)
        assert "Saved" not in await say(app, "what time is it in Tokyo?")
        assert sorted(p.name for p in await places(app)) == ["Climbing hall", "home"]

        # The Rename button on the bar asks again; the next message names it.
        press = await say(app, "", callback_data=f"/place name {bar_p.id}")
        assert press == "What was this place? Send me its name."
        assert (await say(app, "Kiezbar")).startswith("Saved Kiezbar")
        # A named place is renamed with /place rename, not named again.
        assert "That was Climbing hall" in await say(app, f"/place name {hall_p.id} Kiezbar")
        titles = [p.title for p in await proposals(app)]
        assert titles[0].startswith("Time at Climbing hall, 14:")
        assert titles[1].startswith("Time at Kiezbar, 17:")

        # Accepting one offers the rest of that evening's list again.
        accepted = await say(app, "", callback_data=f"/proposal yes {hall_p.id}")
        assert (
            accepted.startswith("Added")
            and f"Still waiting:\n#{bar_p.id} Time at Kiezbar" in accepted
        )
        assert [b.data for b in channel.sent[-1].buttons] == [
            f"/proposal yes {bar_p.id}",
            f"/proposal no {bar_p.id}",
            f"/proposal rename {bar_p.id}",
        ]
        # Thursday's visit to the hall is proposed under its name, with no question.
        await evening(app, TUESDAY + timedelta(days=2), (HALL, 15, 90))
        thursday = (await proposals(app))[-1]
        assert thursday.place == "Climbing hall"
        assert thursday.title.startswith("Time at Climbing hall, 15:")
        await app.jobs.outbox.run_due(clock.now())
        assert "What was this place?" not in channel.sent[-1].text
        # An answer-shaped message now is an ordinary message, not a place name.
        await say(app, "Cinema")
        assert len(await places(app)) == 3


async def test_rename_changes_a_proposals_title_and_a_yes_keeps_it(tmp_path: Path) -> None:
    clock = ManualClock(TUESDAY - timedelta(days=1))
    async with jobs_app(tmp_path, clock) as app:
        app.dispatcher.register(RecordingChannel("fake"))
        ana = await add_user(app, "ana", timezone="Europe/Berlin")
        bob = await add_user(app, "bob", timezone="Europe/Berlin")
        assert ana.id == 1 and bob.id is not None
        await app.location.set_enabled(ana.id, True)
        await app.location.ingest(ana.id, [Fix(clock.now(), *PLACES["gym"], 5)], "x")
        await app.location.add_place(ana.id, "gym", *PLACES["gym"])
        home = await app.location.add_place(ana.id, "home", *PLACES["home"])
        home.kind = "home"
        await app.location.save_place(home)
        await evening(app, TUESDAY, (PLACES["gym"], 18, 75))
        (gym,) = await proposals(app)
        assert gym.title.startswith("Time at gym, 18:")
        # The Rename button of a named place renames the proposal (the place keeps its name).
        asked = await say(app, "", callback_data=f"/proposal rename {gym.id}")
        assert asked == "What should I call it? Send me the new title."
        reply = await say(app, "Bouldering with Ana")
        assert reply.startswith(f"Renamed #{gym.id}: Add to your calendar? Bouldering with Ana")
        # Nobody else can rename it; an unknown id is said so.
        other = await app.dispatcher.handle(
            make_inbound(f"/proposal rename {gym.id} Mine now", sender="bob")
        )
        assert other.reply == f"I have no proposal #{gym.id} for you."
        added = await say(app, f"/proposal yes {gym.id}")
        assert "Bouldering with Ana" in added
        assert "already in your calendar" in await say(app, f"/proposal rename {gym.id} Late")
        assert sorted(p.name for p in await places(app)) == ["gym", "home"]

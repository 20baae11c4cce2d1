"""Proactive but gentle: the opt-in weekly review (per-user zone, quiet hours, exactly once,
skipped in thin weeks) and the briefing's journal note only when the data supports it."""

from __future__ import annotations

from datetime import UTC, date, datetime, time, timedelta
from pathlib import Path

from bot.agent.journal.review import notable_change
from storage.models import JournalEntry
from tests.fakes.channel import RecordingChannel
from tests.fakes.clock import ManualClock
from tests.fakes.llm import FakeLLM, say
from tests.support.builders import make_inbound
from tests.support.jobs import deliveries, jobs_app, make_user
from tests.support.journal import ScoringModel, planted_journal

SUNDAY = date(2024, 6, 16)  # a Sunday; Lisbon is UTC+1 in June


def at(day: date, hour: int, minute: int = 0) -> datetime:
    return datetime.combine(day, time(hour, minute), UTC)


async def load(app, fake_llm: FakeLLM, user_id: int, today: date, days: int = 150) -> None:
    planted = planted_journal(today, days)
    fake_llm.default = ScoringModel(planted)
    for e in planted:
        await app.journal.save(
            user_id, ref=f"gen:{e.day.isoformat()}", day=e.day,
            written_at=at(e.day, 20), text=e.text, source="import",
        )  # fmt: skip


async def test_weekly_review_is_opt_in_on_time_once_and_respects_quiet_hours(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    clock = ManualClock(at(SUNDAY, 9))
    async with jobs_app(tmp_path, clock, fake_llm) as app:
        fake = RecordingChannel("fake")
        app.dispatcher.register(fake)
        ana = await make_user(app, "ana", timezone="Europe/Lisbon", briefing_enabled=False)
        owl = await make_user(app, "owl", timezone="UTC", briefing_enabled=False)
        await make_user(app, "quiet", timezone="UTC", briefing_enabled=False)
        await load(app, fake_llm, ana.id or 0, SUNDAY)
        reviews = app.jobs.reviews
        assert reviews is not None

        # Nobody opted in yet: nothing is planned.
        assert await reviews.plan(at(SUNDAY, 18, 5)) == "nothing due"
        r = await app.dispatcher.handle(make_inbound("/journal review on", sender="ana"))
        assert "Sundays at 19:00 your time" in (r.reply or "")
        r = await app.dispatcher.handle(make_inbound("/journal review on sun 23:00", sender="owl"))
        assert "Sundays at 23:00" in (r.reply or "")
        await app.dispatcher.handle(make_inbound("/journal review on", sender="quiet"))
        await app.dispatcher.handle(make_inbound("/journal review off", sender="quiet"))
        fake.sent.clear()

        # 18:00 UTC is 19:00 in Lisbon: not yet at 17:55, due at 18:05.
        assert await reviews.plan(at(SUNDAY, 17, 55)) == "nothing due"
        assert await reviews.plan(at(SUNDAY, 18, 5)) == "queued 1, skipped 0 (too few entries)"
        assert await reviews.plan(at(SUNDAY, 18, 30)) == "nothing due"  # exactly once
        await app.jobs.outbox.run_due(at(SUNDAY, 18, 5))
        [review] = [m for m in fake.sent if m.address.chat_id == "ana"]
        assert review.kind == "journal_review"
        assert review.text.startswith("Your week in your journal (7 entries):")
        assert "- stress" in review.text and "up from" in review.text.split("- stress")[1]
        assert "/journal review off" in review.text

        # Owl has no entries: the week is recorded as skipped, nothing is sent.
        assert await reviews.plan(at(SUNDAY, 23, 5)) == "queued 0, skipped 1 (too few entries)"
        [owl_row] = await deliveries(app, "journal_review", lambda d: d.user_id == owl.id)
        assert owl_row.status == "skipped"
        assert [m.address.chat_id for m in fake.sent] == ["ana"]  # "quiet" opted out again


async def test_review_waits_for_the_end_of_quiet_hours(tmp_path: Path, fake_llm: FakeLLM) -> None:
    clock = ManualClock(at(SUNDAY, 9))
    async with jobs_app(tmp_path, clock, fake_llm) as app:
        fake = RecordingChannel("fake")
        app.dispatcher.register(fake)
        ana = await make_user(app, "ana", timezone="UTC", briefing_enabled=False)
        await load(app, fake_llm, ana.id or 0, SUNDAY, days=30)
        await app.dispatcher.handle(make_inbound("/journal review on sunday 22:30", sender="ana"))
        fake.sent.clear()
        reviews = app.jobs.reviews
        assert reviews is not None
        assert await reviews.plan(at(SUNDAY, 22, 35)) == "queued 1, skipped 0 (too few entries)"
        await app.jobs.outbox.run_due(at(SUNDAY, 22, 35))
        assert fake.sent == []  # quiet hours (22:00-07:00): held, not dropped
        await app.jobs.outbox.run_due(at(SUNDAY + timedelta(days=1), 7, 5))
        assert [m.kind for m in fake.sent] == ["journal_review"]


async def test_the_review_time_may_be_said_on_the_twelve_hour_clock(tmp_path: Path) -> None:
    """'/journal review on friday 7pm' was "'7pm' is neither a weekday nor a time"."""
    async with jobs_app(tmp_path, ManualClock(at(SUNDAY, 9))) as app:
        app.dispatcher.register(RecordingChannel("fake"))
        await make_user(app, "ana", timezone="UTC")
        for said, words in (
            ("/journal review on friday 7pm", "Fridays at 19:00"),
            ("/journal review on sat 8:30 a.m.", "Saturdays at 08:30"),
            ("/journal review on sunday 21:15", "Sundays at 21:15"),
        ):
            r = await app.dispatcher.handle(make_inbound(said, sender="ana"))
            assert r.reply is not None and words in r.reply, (said, r.reply)
        r = await app.dispatcher.handle(
            make_inbound("/journal review on friday 13pm", sender="ana")
        )
        assert r.reply is not None and "'13pm' is neither a weekday nor a time" in r.reply


async def test_briefing_mentions_a_change_only_when_the_data_supports_it(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    clock = ManualClock(at(SUNDAY, 6))
    async with jobs_app(tmp_path, clock, fake_llm) as app:
        ana = await make_user(app, "ana", timezone="UTC")
        await load(app, fake_llm, ana.id or 0, SUNDAY)
        fake_llm.add(say("Good morning Ana."))
        text, by_llm = await app.jobs.briefings.compose(ana, at(SUNDAY, 7, 30))
        assert by_llm and text == "Good morning Ana."
        system = fake_llm.chat_requests[-1]["messages"][0]["content"]
        assert "From your journal:\n- Your stress has been rising for 8 days" in system

        calm = await make_user(app, "calm", timezone="UTC")
        flat = [e for e in planted_journal(SUNDAY, 40) if "Ordinary day" in e.text]
        for e in flat[-30:]:
            await app.journal.save(
                calm.id or 0, ref=f"c:{e.day}", day=e.day, written_at=at(e.day, 20),
                text=e.text, source="import",
            )  # fmt: skip
        fake_llm.add(say("Morning."))
        await app.jobs.briefings.compose(calm, at(SUNDAY, 7, 30))
        system = fake_llm.chat_requests[-1]["messages"][0]["content"]
        assert "From your journal" not in system


def entry(day: date, stress: float) -> JournalEntry:
    return JournalEntry(
        user_id=1, ref=str(day), day=day, written_at=at(day, 20), text="x",
        happiness=50, stress=stress, energy=50, scorer="llm:t",
    )  # fmt: skip


def test_notable_change_needs_a_sustained_large_move() -> None:
    d = SUNDAY
    days = [d - timedelta(days=i) for i in range(6, -1, -1)]
    wiggle = [entry(x, 40 + (i % 2) * 6) for i, x in enumerate(days)]
    assert notable_change(wiggle, []) is None
    small = [entry(x, 40 + i) for i, x in enumerate(days)]  # rising, but only 6 points
    assert notable_change(small, []) is None
    big = [entry(x, 30 + 5 * i) for i, x in enumerate(days)]
    assert (
        notable_change(big, [])
        == "Your stress has been rising for 7 days in your journal (+30 points)."
    )
    usual = [entry(d - timedelta(days=10 + i), 30) for i in range(10)]
    high = [entry(x, 60 + (i % 2) * 3) for i, x in enumerate(days)]
    assert (
        notable_change(high, usual) == "Your stress this week (61) is well above your usual (30)."
    )
    assert notable_change(high[:3], usual) is None  # three entries are too few

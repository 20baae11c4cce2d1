"""Journal charts: "show my stress this month" gets a PNG photo on Telegram (through the real
python-telegram-bot code and the loopback Bot API) plus the same series in words."""

from __future__ import annotations

import io
from datetime import UTC, date, datetime, time, timedelta
from zoneinfo import ZoneInfo

import pytest
from PIL import Image as PILImage

from bot.agent.journal.analytics import series
from bot.agent.journal.chart import render_chart
from bot.agent.journal.tools import period_days
from bot.errors import ToolError
from storage.models import JournalEntry
from storage.repos.users import UserRepo
from tests.fakes.llm import FakeLLM
from tests.fakes.slack_api import FakeSlack, dm_event
from tests.fakes.telegram_api import FakeTelegram
from tests.support.app import add_user, channel
from tests.support.builders import make_inbound
from tests.support.journal import ScoringModel, planted_journal
from tests.support.slack import ANA_DM, Slack
from tests.support.telegram import CHAT, Starter, eventually


async def load(app, fake_llm: FakeLLM, user_id: int, today: date, days: int = 150) -> None:
    planted = planted_journal(today, days)
    fake_llm.default = ScoringModel(planted)
    for e in planted:
        await app.journal.save(
            user_id,
            ref=f"gen:{e.day.isoformat()}",
            day=e.day,
            written_at=datetime.combine(e.day, time(21), UTC),
            text=e.text,
            source="import",
        )


def png_size(data: bytes) -> tuple[int, int]:
    assert data.startswith(b"\x89PNG\r\n\x1a\n")
    with PILImage.open(io.BytesIO(data)) as img:
        return img.size


async def test_show_my_stress_sends_a_photo_on_telegram(
    telegram: Starter, tg: FakeTelegram, fake_llm: FakeLLM
) -> None:
    app = await telegram()
    async with app.db.session() as s:
        [ana] = await UserRepo(s).all()
    today = datetime.now(UTC).date()
    await load(app, fake_llm, ana.id or 0, today, days=60)

    await tg.send_text(CHAT, "show my stress last month")
    await tg.wait_for(lambda: bool(tg.photos.get(CHAT)) and bool(tg.sent.get(CHAT)))
    [photo] = tg.photos[CHAT]
    assert png_size(photo.data) == (1200, 750)
    assert photo.filename == "stress.png" and photo.caption.startswith("Your stress, 01 ")
    [text] = await tg.wait_texts(CHAT, 1)
    first_of_month = today.replace(day=1)
    entries = (first_of_month - (first_of_month - timedelta(days=1)).replace(day=1)).days
    assert text.startswith("Your stress, last month: ") and f"from {entries} entries" in text
    assert "lowest" in text and "highest" in text
    # Photo first, then the words; nothing went to the language model for the chart.
    sent = [c.method for c in tg.calls if c.method in ("sendPhoto", "sendMessage")]
    assert sent == ["sendPhoto", "sendMessage"]
    assert not any("tools" in r for r in fake_llm.chat_requests)

    async def stored() -> bool:
        async with app.db.session() as s:
            from sqlmodel import select

            from storage.models import Message

            rows = (await s.exec(select(Message).where(Message.direction == "out"))).all()
        return any(r.text == text for r in rows)

    await eventually(stored)


async def test_chart_words_periods_and_too_little(app, fake_llm: FakeLLM) -> None:
    user = await add_user(app, "u1")
    today = datetime.now(UTC).date()
    await load(app, fake_llm, user.id or 0, today, days=20)
    await app.dispatcher.handle(make_inbound("Show me my mood last week"))
    out = channel(app).sent[-1]
    assert out.image is not None and png_size(out.image.data) == (1200, 750)
    assert out.text.startswith("Your happiness, last week: ") and "from 7 entries" in out.text

    await app.dispatcher.handle(make_inbound("Can you graph my stress over the past 10 days?"))
    out = channel(app).sent[-1]
    assert out.image is not None and out.text.startswith("Your stress, past 10 days: ")
    assert "from 10 entries" in out.text

    await app.dispatcher.handle(make_inbound("/chart energy"))
    out = channel(app).sent[-1]
    assert out.text.startswith("Your energy, last 30 days: ")
    assert "from 20 entries" in out.text and out.image is not None

    await app.dispatcher.handle(make_inbound("show my stress in 2019"))
    out = channel(app).sent[-1]
    assert out.image is None and "only 0 journal entries, too little to tell" in out.text

    await app.dispatcher.handle(make_inbound("/chart stress before my wedding"))
    assert "can't chart 'before my wedding'" in channel(app).sent[-1].text

    other = await add_user(app, "u2")
    await app.dispatcher.handle(make_inbound("show my stress this month", sender="u2"))
    out = channel(app).sent[-1]
    assert out.address.chat_id == "u2" and out.image is None and "only 0" in out.text
    del other


async def test_a_period_that_cannot_be_charted_is_explained_with_examples(
    app, fake_llm: FakeLLM
) -> None:
    await add_user(app, "u1")
    for asked in (
        "/chart stress tomorrow",
        "/chart stress before my wedding",
        "/chart energy next week",
    ):
        await app.dispatcher.handle(make_inbound(asked))
        said = channel(app).sent[-1].text
        assert "Try for" not in said and "tell the user" not in said, said
        assert "/chart stress this month" in said, said  # an example that works
        assert said.endswith("."), said

    await app.dispatcher.handle(make_inbound("/chart stress 2024-02-30 to 2024-03-01"))
    said = channel(app).sent[-1].text
    assert "to 2024:" not in said, said  # read as a half-remembered year before
    assert "2024-02-30" in said, said


def test_render_chart_draws_gaps_and_many_points() -> None:
    start = date(2024, 1, 1)
    entries = [
        JournalEntry(
            id=i, user_id=1, ref=str(i), day=start + timedelta(days=2 * i),
            written_at=datetime(2024, 1, 1, tzinfo=UTC), text="x", stress=float(10 + i),
            scorer="lexicon",
        )
        for i in range(40)
    ]  # fmt: skip
    points = series(entries, "stress", start, start + timedelta(days=79), "day")
    assert sum(1 for p in points if p.mean is None) == 40
    assert png_size(render_chart(points, "stress", "Your stress", "day")) == (1200, 750)


async def test_show_my_energy_uploads_the_chart_on_slack(
    http: Slack, fake_slack: FakeSlack, fake_llm: FakeLLM
) -> None:
    async with http.app.db.session() as s:
        [ana] = await UserRepo(s).all()
    today = datetime.now(UTC).date()
    await load(http.app, fake_llm, ana.id or 0, today, days=20)

    await http.post(dm_event("show my energy last week"))
    [upload] = fake_slack.uploads
    assert upload["channel"] == ANA_DM and upload["filename"] == "energy.png"
    assert png_size(upload["data"]) == (1200, 750)
    assert upload["title"].startswith("Your energy, ")
    [posted] = fake_slack.posted
    assert posted["channel"] == ANA_DM
    assert (
        posted["text"].startswith("Your energy, last week: ") and "from 7 entries" in posted["text"]
    )
    methods = [c.method for c in fake_slack.calls if c.method.startswith(("files.", "chat."))]
    assert methods == [
        "files.getUploadURLExternal",
        "files.completeUploadExternal",
        "chat.postMessage",
    ]


async def test_one_entry_is_counted_as_one_entry(app, fake_llm: FakeLLM) -> None:
    user = await add_user(app, "u1")
    await load(app, fake_llm, user.id or 0, datetime.now(UTC).date(), days=1)
    await app.dispatcher.handle(make_inbound("/chart stress"))
    out = channel(app).sent[-1]
    assert out.image is None
    assert "only 1 journal entry, too little to tell" in out.text


def test_the_model_is_told_a_day_it_asked_for_does_not_exist() -> None:
    """The journal tools share the period reading with /chart: the model gets the same news."""
    now = datetime(2024, 6, 1, 12, tzinfo=UTC)
    with pytest.raises(ToolError, match="2024-02-30 is not a day on the calendar"):
        period_days(now, ZoneInfo("UTC"), None, None, "2024-02-30 to 2024-03-01")
    first, last, _ = period_days(now, ZoneInfo("UTC"), None, None, "2024-02-29 to 2024-03-01")
    assert (first, last) == (date(2024, 2, 29), date(2024, 3, 1))

"""Journal insights on a generated 150-day journal with planted patterns: the series finds them,
the current state's action items cite real entries, summaries are cached and refreshed on edit,
users never see each other's journal, and everything says "too little to tell" when it is."""

from __future__ import annotations

import json
import re
from datetime import UTC, date, datetime, time, timedelta

from bot.agent.tools.base import ToolContext
from storage.repos.journal import JournalRepo
from tests.fakes.llm import call, say
from tests.support.app import add_user
from tests.support.builders import make_inbound
from tests.support.journal import IMPROVE_START, STRESS_START, ScoringModel, planted_journal


async def load(app, fake_llm, user_id: int, today: date):
    planted = planted_journal(today)
    model = ScoringModel(planted)
    fake_llm.default = model
    for e in planted:
        await app.journal.save(
            user_id,
            ref=f"gen:{e.day.isoformat()}",
            day=e.day,
            written_at=datetime.combine(e.day, time(21), UTC),
            text=e.text,
            source="import",
        )
    return planted, model


def ctx_for(app, user_id: int, now: datetime) -> ToolContext:
    return ToolContext(user_id=user_id, db=app.db, now=now, timezone="UTC")


async def run(app, ctx: ToolContext, name: str, **args) -> str:
    text, ok = await app.tools.call(ctx, name, json.dumps(args, default=str))
    assert ok, text
    return str(text)


def bucket_means(text: str) -> dict[str, float]:
    return {
        m.group(1): float(m.group(2))
        for m in re.finditer(r"^- (.+?): ([\d.]+) \(", text, re.MULTILINE)
    }


async def test_series_finds_the_stressful_fortnight_and_the_improving_month(app, fake_llm) -> None:
    now = datetime.now(UTC)
    today = now.date()
    user = await add_user(app, "ana")
    await load(app, fake_llm, user.id or 0, today)
    ctx = ctx_for(app, user.id or 0, now)

    daily = await run(
        app,
        ctx,
        "get_time_series",
        metric="stress",
        start=(today - timedelta(days=149)).isoformat(),
        end=today.isoformat(),
        bucket="day",
    )
    means = bucket_means(daily)
    assert len(means) == 150
    high = {label for label, v in means.items() if v >= 75}
    fortnight = {
        f"{today - timedelta(days=b):%a %d %b %Y}"
        for b in range(STRESS_START - 13, STRESS_START + 1)
    }
    last_days = {f"{today - timedelta(days=b):%a %d %b %Y}" for b in range(3)}
    assert high == fortnight | last_days  # the planted fortnight, and the recent crunch

    first = today - timedelta(days=IMPROVE_START)
    monthly = await run(
        app,
        ctx,
        "get_time_series",
        metric="happiness",
        start=first.isoformat(),
        end=(first + timedelta(days=27)).isoformat(),
        bucket="week",
    )
    weekly = list(bucket_means(monthly).values())
    assert len(weekly) >= 4
    assert weekly == sorted(weekly) and weekly[-1] - weekly[0] >= 25  # improving week by week
    assert "rising" in monthly.splitlines()[-1]


async def test_named_periods_are_hard_windows(app, fake_llm) -> None:
    now = datetime.now(UTC)
    user = await add_user(app, "ana")
    await load(app, fake_llm, user.id or 0, now.date())
    ctx = ctx_for(app, user.id or 0, now)
    week = await run(app, ctx, "get_time_series", metric="energy", when="last week", bucket="day")
    assert len(bucket_means(week)) == 7
    text, ok = await app.tools.call(
        ctx, "get_time_series", json.dumps({"metric": "stress", "when": "before my wedding"})
    )
    assert not ok and "can't turn" in text and "ask for a date" in text


async def test_current_state_action_items_cite_real_entries(app, fake_llm) -> None:
    now = datetime.now(UTC)
    today = now.date()
    user = await add_user(app, "ana")
    await load(app, fake_llm, user.id or 0, today)
    ctx = ctx_for(app, user.id or 0, now)
    text = await run(app, ctx, "get_current_state")
    assert "- stress:" in text and "rising" in text.split("- stress:")[1].splitlines()[0]
    stressors = next(line for line in text.splitlines() if line.startswith("Stressors:"))
    assert "Marta" in stressors or "work" in stressors
    items = text.split("Suggested action items")[1].splitlines()[1:]
    assert 1 <= len(items) <= 3
    async with app.db.session() as s:
        real = {e.id: e for e in await JournalRepo(s).all_for(user.id)}
    for line in items:
        numbers = [int(n) for n in re.findall(r"\[(\d+)\]", line)]
        assert numbers, line
        for n in numbers:
            cited = ctx.sources.entries[n]
            assert cited.kind == "journal"
            entry = real[int(cited.source_id)]
            assert entry.user_id == user.id and cited.snippet == entry.text
    # The stress item rests on the recent high-stress days.
    first_item = [int(n) for n in re.findall(r"\[(\d+)\]", items[0])]
    days = [real[int(ctx.sources.entries[n].source_id)].day for n in first_item]
    assert all((today - d).days < 7 for d in days)


async def test_agent_answer_cites_journal_entries_end_to_end(app, fake_llm) -> None:
    now = datetime.now(UTC)
    user = await add_user(app, "u1")
    await load(app, fake_llm, user.id or 0, now.date())
    fake_llm.add(
        call("get_current_state"),
        say("Stress is rising this week; plan one step with Marta [1]."),
    )
    result = await app.dispatcher.handle(make_inbound("what's going on with me lately?"))
    assert result.status == "answered"
    tools_offered = {t["function"]["name"] for t in fake_llm.chat_requests[-2]["tools"]}
    assert {"get_time_series", "get_current_state", "get_month_summary"} <= tools_offered
    tool_result = fake_llm.chat_requests[-1]["messages"][-1]["content"]
    assert "Suggested action items" in tool_result
    async with app.db.session() as s:
        from storage.repos.messages import MessageRepo

        answers = await MessageRepo(s).recent_answers(user.id or 0, 1)
    cited = answers[0][0].citations or []
    assert cited and cited[0]["kind"] == "journal"


async def test_month_and_year_summaries_are_cached_and_refreshed_on_edit(
    any_db_app, fake_llm
) -> None:
    app = any_db_app  # SQLite, then PostgreSQL
    now = datetime.now(UTC)
    today = now.date()
    user = await add_user(app, "ana")
    _, model = await load(app, fake_llm, user.id or 0, today)
    ctx = ctx_for(app, user.id or 0, now)
    month = today - timedelta(days=STRESS_START)
    args = {"year": month.year, "month": month.month}

    first = await run(app, ctx, "get_month_summary", **args)
    assert "NARRATIVE 1" in first and "(Summary written just now.)" in first
    assert "Averages (0-100): happiness" in first and "Key days:" in first
    second = await run(app, ctx, "get_month_summary", **args)
    assert "NARRATIVE 1" in second and "no entry changed since" in second
    assert len(model.narratives) == 1  # cached: the smart model was not asked again

    async with app.db.session() as s:
        [entry] = await JournalRepo(s).between(user.id or 0, month, month)
    model.extra["Edited: a wonderful calm day."] = {
        "happiness": 95, "stress": 5, "energy": 80, "themes": ["rest"], "people": [],
        "reason": "edited",
    }  # fmt: skip
    await app.journal.edit(user.id or 0, entry.id or 0, "Edited: a wonderful calm day.")
    async with app.db.session() as s:
        row = await JournalRepo(s).summary(user.id or 0, f"{month:%Y-%m}")
    assert row is not None and row.stale
    third = await run(app, ctx, "get_month_summary", **args)
    assert "NARRATIVE 2" in third and "summary was written again" in third
    assert len(model.narratives) == 2
    assert "Edited: a wonderful calm day." in model.narratives[-1]

    year = await run(app, ctx, "get_year_summary", year=today.year)
    assert "NARRATIVE 3" in year and "By month:" in year
    again = await run(app, ctx, "get_year_summary", year=today.year)
    assert "no entry changed since" in again and len(model.narratives) == 3


async def test_users_never_see_each_others_journal(app, fake_llm) -> None:
    now = datetime.now(UTC)
    ana = await add_user(app, "ana")
    ben = await add_user(app, "ben")
    await load(app, fake_llm, ana.id or 0, now.date())
    ben_ctx = ctx_for(app, ben.id or 0, now)
    state = await run(app, ben_ctx, "get_current_state")
    assert "only 0 journal entries, too little to tell" in state
    series = await run(app, ben_ctx, "get_time_series", metric="stress", bucket="month")
    assert "only 0 journal entries, too little to tell" in series
    year = await run(app, ben_ctx, "get_year_summary", year=now.year)
    assert "too little to tell" in year
    assert ben_ctx.sources.entries == {}
    # Two entries are still too few.
    fake_llm.default = None
    fake_llm.add(
        say('{"happiness": 50, "stress": 50, "energy": 50}'),
        say('{"happiness": 50, "stress": 50, "energy": 50}'),
    )
    await app.dispatcher.handle(make_inbound("/journal one", sender="ben"))
    await app.dispatcher.handle(make_inbound("/journal two", sender="ben"))
    state = await run(app, ctx_for(app, ben.id or 0, now), "get_current_state")
    assert "only 2 journal entries, too little to tell" in state


async def test_summaries_without_a_model_are_written_locally(app_factory) -> None:
    application = await app_factory(None)
    user = await add_user(application, "solo")
    today = datetime.now(UTC).date()
    for i, text in enumerate(
        ["Calm day, good walk with Sara.", "Stressed about the deadline.", "Happy dinner."]
    ):
        day = today - timedelta(days=i)
        await application.journal.save(
            user.id or 0, ref=f"t{i}", day=day,
            written_at=datetime.combine(day, time(20), UTC), text=text, source="chat",
        )  # fmt: skip
    ctx = ctx_for(application, user.id or 0, datetime.now(UTC))
    text = await run(application, ctx, "get_year_summary", year=today.year)
    assert "by your 3 entries" in text and "Averages (0-100)" in text

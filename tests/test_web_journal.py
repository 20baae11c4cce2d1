"""The journal on the web page: recent entries with scores, charts as PNGs behind the session,
and the series in the REST API; one user never sees another's journal."""

from __future__ import annotations

import io
from datetime import UTC, date, datetime, time, timedelta

from PIL import Image as PILImage

from bot.app.build import App
from tests.fakes.llm import FakeLLM
from tests.support.app import add_user
from tests.support.journal import ScoringModel, planted_journal
from tests.support.web import client_for, sign_in


async def load(app: App, fake_llm: FakeLLM, user_id: int, today: date, days: int) -> None:
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


async def test_journal_page_shows_entries_and_charts_only_to_their_owner(
    app: App, fake_llm: FakeLLM
) -> None:
    ann = await add_user(app, "ann")
    bob = await add_user(app, "bob")
    today = app.clock.now().date()
    await load(app, fake_llm, ann.id or 0, today, days=40)
    newest = (await app.journal.recent(ann.id or 0, 1))[0]
    async with client_for(app) as client:
        await sign_in(app, client, ann)
        page = await client.get("/journal")
        assert page.status_code == 200
        for metric in ("happiness", "stress", "energy"):
            assert f'src="/journal/chart.png?metric={metric}&amp;days=30"' in page.text
        assert "from 30 entries" in page.text
        assert f'id="entry-{newest.id}"' in page.text and newest.text[:30] in page.text
        assert f"stress {newest.stress:.0f}" in page.text
        png = await client.get("/journal/chart.png", params={"metric": "stress", "days": 30})
        assert png.status_code == 200 and png.headers["content-type"] == "image/png"
        assert "no-store" in png.headers["cache-control"]
        with PILImage.open(io.BytesIO(png.content)) as img:
            assert img.size == (1200, 750)
        bad = await client.get("/journal/chart.png", params={"metric": "salary"})
        assert bad.status_code == 404
    async with client_for(app) as client:
        # Not signed in: the picture is not served, the page asks to sign in.
        assert (await client.get("/journal/chart.png")).status_code == 303
        await sign_in(app, client, bob)
        page = await client.get("/journal")
        assert "No journal entries yet." in page.text and newest.text[:30] not in page.text
        assert '<img class="chart"' not in page.text and "too little to tell" in page.text
        theirs = await client.get("/journal/chart.png", params={"metric": "stress"})
        assert theirs.status_code == 404


async def test_api_series_is_bucketed_validated_and_scoped_to_the_token(
    app: App, fake_llm: FakeLLM
) -> None:
    ann = await add_user(app, "ann")
    bob = await add_user(app, "bob")
    today = app.clock.now().date()
    await load(app, fake_llm, ann.id or 0, today, days=40)
    _, ann_token = await app.web.auth.new_api_token(ann.id or 0, "ann")
    _, bob_token = await app.web.auth.new_api_token(bob.id or 0, "bob")
    as_ann = {"Authorization": f"Bearer {ann_token}"}
    async with client_for(app) as client:
        assert (await client.get("/api/v1/journal/series?metric=stress")).status_code == 401
        daily = await client.get("/api/v1/journal/series?metric=stress", headers=as_ann)
        assert daily.status_code == 200, daily.text
        body = daily.json()
        assert body["end"] == today.isoformat() and len(body["points"]) == 30
        assert body["count"] == 30 and all(p["count"] == 1 for p in body["points"])
        start = (today - timedelta(days=27)).isoformat()
        weekly = await client.get(
            "/api/v1/journal/series",
            params={"metric": "energy", "start": start, "end": today.isoformat(), "bucket": "week"},
            headers=as_ann,
        )
        points = weekly.json()["points"]
        assert sum(p["count"] for p in points) == 28 and len(points) in (4, 5)
        entry_ids = [i for p in points for i in p["entry_ids"]]
        mine = {e.id for e in await app.journal.entries(ann.id or 0, date.min, today)}
        assert set(entry_ids) <= mine
        for query in (
            "metric=salary",
            f"metric=stress&start={today}&end={today - timedelta(days=3)}",
            "metric=stress&bucket=hour",
            "metric=stress&start=2000-01-01",
        ):
            wrong = await client.get(f"/api/v1/journal/series?{query}", headers=as_ann)
            assert wrong.status_code == 422, query
        theirs = await client.get(
            "/api/v1/journal/series?metric=stress", headers={"Authorization": f"Bearer {bob_token}"}
        )
        assert theirs.json()["count"] == 0
        assert all(p["mean"] is None and p["entry_ids"] == [] for p in theirs.json()["points"])

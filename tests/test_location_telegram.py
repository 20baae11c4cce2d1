"""Telegram location and live location through the fake Bot API (issue 24)."""

from __future__ import annotations

import time
from typing import Any

from sqlmodel import col, select

from bot.app.build import App
from storage.models import LocationPoint, Message
from tests.fakes.llm import FakeLLM
from tests.fakes.telegram_api import FakeTelegram
from tests.support.telegram import CHAT, Starter, eventually

HOME = (52.5200, 13.4050)


def live(
    server: FakeTelegram, message_id: int, lat: float, lon: float, **kw: Any
) -> dict[str, Any]:
    loc = {"latitude": lat, "longitude": lon, "horizontal_accuracy": 12.5, **kw}
    return server.message(CHAT, message_id=message_id, location=loc)


async def stored(app: App) -> list[LocationPoint]:
    async with app.db.session() as s:
        return list((await s.exec(select(LocationPoint).order_by(col(LocationPoint.ts)))).all())


async def test_live_location_stores_every_update_and_never_wakes_the_agent(
    telegram: Starter,  # the fixtures of test_telegram
    tg: FakeTelegram,
    fake_llm: FakeLLM,
) -> None:
    app = await telegram()
    # Before /location on: nothing is kept, and the person is told why.
    await tg.push({"message": live(tg, 900, *HOME)})
    texts = await tg.wait_texts(CHAT, 1)
    assert "Location history is off" in texts[-1]
    assert await stored(app) == []

    await tg.send_text(CHAT, "/location on")
    assert "Location is on" in (await tg.wait_texts(CHAT, 2))[-1]

    start = int(time.time()) + 2
    first = live(tg, 901, *HOME, live_period=900)
    first["date"] = start
    await tg.push({"message": first})
    assert "live location" in (await tg.wait_texts(CHAT, 3))[-1]
    for k in range(1, 4):
        edit = live(tg, 901, HOME[0] + 0.001 * k, HOME[1], live_period=900)
        edit["date"] = start
        edit["edit_date"] = start + 30 * k
        await tg.push({"edited_message": edit})

    async def four() -> bool:
        return len(await stored(app)) == 4

    await eventually(four)
    points = await stored(app)
    assert [round(p.lat, 3) for p in points] == [52.52, 52.521, 52.522, 52.523]
    assert all(p.accuracy_m == 12.5 and p.source == "telegram" for p in points)
    # The same edit delivered twice is one point; no reply was sent for any update.
    await tg.push({"edited_message": edit})
    await tg.send_text(CHAT, "/location")
    texts = await tg.wait_texts(CHAT, 4)
    assert "Location is on" in texts[-1]
    assert len(await stored(app)) == 4
    # No chat turn: the agent was never asked and the history holds no location messages.
    assert not [r for r in fake_llm.chat_requests if "location" in str(r).lower()]
    async with app.db.session() as s:
        rows = (await s.exec(select(Message).where(Message.text == ""))).all()
    assert list(rows) == []

    # /location off stops recording at once: the next update is dropped.
    await tg.send_text(CHAT, "/location off")
    assert "Location is off" in (await tg.wait_texts(CHAT, 5))[-1]
    late = live(tg, 901, 52.6, 13.5, live_period=900)
    late["edit_date"] = start + 300
    await tg.push({"edited_message": late})
    await tg.send_text(CHAT, "/location")
    await tg.wait_texts(CHAT, 6)
    assert len(await stored(app)) == 4

"""Telegram location messages -> InboundMessage (pure, no server) (#24)."""

from __future__ import annotations

from typing import Any

from telegram import Message

from bot.adapters.telegram.events import shared_location


def msg(chat_type: str = "private", **extra: Any) -> Message:
    data: dict[str, Any] = {
        "message_id": 7,
        "date": 1774000000,
        "chat": {"id": 555, "type": chat_type},
        "from": {"id": 555, "is_bot": False, "first_name": "Ana"},
        "location": {"latitude": 52.52, "longitude": 13.405, "horizontal_accuracy": 9.5},
    }
    data.update(extra)
    return Message.de_json(data, None)


def test_a_shared_location_carries_its_point() -> None:
    inbound = shared_location(msg(), account="1", edited=False)
    assert inbound is not None and inbound.location is not None
    assert (inbound.location.lat, inbound.location.lon) == (52.52, 13.405)
    assert inbound.location.accuracy_m == 9.5
    assert not inbound.location.live and not inbound.location.update
    assert inbound.text == ""


def test_each_live_update_is_its_own_message_at_its_edit_time() -> None:
    loc = {"latitude": 52.53, "longitude": 13.4, "live_period": 900}
    a = shared_location(msg(location=loc, edit_date=1774000030), account="1", edited=True)
    b = shared_location(msg(location=loc, edit_date=1774000060), account="1", edited=True)
    assert a is not None and b is not None and a.location is not None
    assert a.location.live and a.location.update
    assert a.location.ts.timestamp() == 1774000030
    assert a.dedupe_key != b.dedupe_key


def test_locations_in_groups_and_from_bots_are_not_ours() -> None:
    assert shared_location(msg("group"), account="1", edited=False) is None
    extra: dict[str, Any] = {"from": {"id": 9, "is_bot": True, "first_name": "B"}}
    assert shared_location(msg("private", **extra), account="1", edited=False) is None
    assert shared_location(msg(location=None), account="1", edited=False) is None

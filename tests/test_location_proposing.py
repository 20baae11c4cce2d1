"""The rules that turn stays into proposed events, in two time zones and across DST (#24)."""

from __future__ import annotations

from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from bot.location.proposing import Busy, StayFacts, suggestions

ZONES = [ZoneInfo("Europe/Berlin"), ZoneInfo("America/New_York")]


def at(tz: ZoneInfo, day: int, hh: int, mm: int = 0, month: int = 3) -> datetime:
    return datetime(2026, month, day, hh, mm, tzinfo=tz)


def stay(i: int, a: datetime, b: datetime, place: str | None = "gym", kind: str = "normal"):
    return StayFacts(i, a, b, place, kind)


@pytest.mark.parametrize("tz", ZONES, ids=str)
def test_the_rules(tz: ZoneInfo) -> None:
    stays = [
        stay(1, at(tz, 24, 18), at(tz, 24, 19, 15)),  # gym: proposed
        stay(2, at(tz, 24, 12, 35), at(tz, 24, 12, 45), "lunch"),  # 10 minutes: too short
        stay(3, at(tz, 24, 19, 45), at(tz, 25, 7, 50), "home", "home"),  # home-like
        stay(4, at(tz, 24, 9), at(tz, 24, 17), "office", "ignored"),  # ignored
        stay(5, at(tz, 25, 14), at(tz, 25, 15), "dentist"),  # overlaps a timed event
        stay(6, at(tz, 26, 14), at(tz, 26, 15), None),  # unknown place, all-day event that day
        stay(7, at(tz, 26, 18), at(tz, 27, 1, 30), "bar"),  # past 22:00: 4 h activity part
        stay(8, at(tz, 27, 20), at(tz, 28, 1, 30), "club"),  # activity part only 2 h: no
        stay(9, at(tz, 27, 22, 30), at(tz, 28, 9), "friend's"),  # began after 22:00: night
    ]
    events = [
        Busy(at(tz, 25, 14, 30), at(tz, 25, 15, 30)),
        Busy(at(tz, 26, 0), at(tz, 27, 0)),  # all day: does not block
    ]
    got = suggestions(stays, events, tz)
    assert [s.stay_id for s in got] == [1, 6, 7]
    assert got[0].title(tz) == "Time at gym, 18:00\u201319:15"
    assert got[1].title(tz).startswith("Time at a new place")
    assert got[2].end == at(tz, 26, 22)  # split at 22:00 local


def test_a_stay_across_the_dst_change_is_cut_at_local_22() -> None:
    berlin = ZoneInfo("Europe/Berlin")  # clocks go forward on 29 March 2026 at 02:00
    s = stay(1, at(berlin, 28, 18), at(berlin, 29, 4))
    (got,) = suggestions([s], [], berlin)
    assert got.end.astimezone(berlin).hour == 22
    assert got.end - got.start == timedelta(hours=4)
    ny = ZoneInfo("America/New_York")  # clocks go back on 1 November 2026
    all_day_25h = Busy(at(ny, 1, 0, month=11), at(ny, 2, 0, month=11))
    s2 = stay(2, at(ny, 1, 10, month=11), at(ny, 1, 12, month=11))
    assert [x.stay_id for x in suggestions([s2], [all_day_25h], ny)] == [2]

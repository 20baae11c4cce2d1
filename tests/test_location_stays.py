"""Stay-point detection on a generated week of noisy GPS traces (issue 24)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

from bot.location.geo import Fix, distance_m
from bot.location.places import NamedPlace, find_by_name, match_place
from bot.location.stays import detect_stays
from tests.support.gps import PLACES, generate, score


def test_a_week_of_noisy_traces_gives_back_the_planted_stays() -> None:
    start = datetime(2026, 3, 23, tzinfo=ZoneInfo("Europe/Berlin"))  # a Monday
    fixes, planted = generate(start)
    found = detect_stays(fixes)
    s = score(found, planted)
    print("\nstays:", len(found), "planted:", len(planted), {k: round(v, 2) for k, v in s.items()})
    assert s["precision"] >= 0.95
    assert s["recall"] >= 0.95
    assert s["start_median_min"] <= 3
    assert s["end_median_min"] <= 3
    # The 10-minute stop at the kiosk is passing through, not a stay.
    assert not any(distance_m(d.lat, d.lon, *PLACES["kiosk"]) < 100 for d in found)
    # The Friday night out runs past midnight as one stay.
    bar = [d for d in found if distance_m(d.lat, d.lon, *PLACES["bar"]) < 100]
    assert len(bar) == 1
    assert bar[0].duration > timedelta(hours=5)


def test_order_and_repeats_do_not_change_the_stays() -> None:
    start = datetime(2026, 3, 23, tzinfo=ZoneInfo("Europe/Berlin"))
    fixes, _ = generate(start, days=2)
    shuffled = list(reversed(fixes)) + fixes[::7]
    assert detect_stays(shuffled) == detect_stays(fixes)


def test_a_long_silence_splits_a_stay() -> None:
    t0 = datetime(2026, 3, 1, 10, tzinfo=UTC)
    near = [Fix(t0 + timedelta(minutes=m), 52.52, 13.405, 10) for m in range(0, 31, 2)]
    later = [Fix(t0 + timedelta(hours=5, minutes=m), 52.52, 13.405, 10) for m in range(0, 31, 2)]
    assert len(detect_stays(near + later)) == 2


def test_poor_fixes_alone_make_no_stay() -> None:
    t0 = datetime(2026, 3, 1, 10, tzinfo=UTC)
    poor = [Fix(t0 + timedelta(minutes=m), 52.52, 13.405, 900) for m in range(60)]
    assert detect_stays(poor) == []


def test_places_match_by_radius_and_names_by_alias() -> None:
    gym = NamedPlace(1, "Gym", *PLACES["gym"], 80, ("fitness", "the club"))
    home = NamedPlace(2, "home", *PLACES["home"], 120, (), "home")
    assert match_place(*PLACES["gym"], [gym, home]) == gym
    assert match_place(*PLACES["bar"], [gym, home]) is None
    assert find_by_name("the gym", [gym, home]) == gym
    assert find_by_name("Club", [gym, home]) == gym
    assert find_by_name("office", [gym, home]) is None

"""Local time arithmetic: users' zones, HH:MM settings, quiet hours, wording of times.

Everything stored is UTC; everything a user sees or sets is in their IANA zone. Daylight-saving
changes are handled by building local wall-clock times and letting zoneinfo convert them.
"""

from __future__ import annotations

from datetime import UTC, date, datetime, time, timedelta
from zoneinfo import ZoneInfo

from bot.clock import parse_hhmm


def hhmm(t: time) -> str:
    """A time as ``HH:MM``."""
    return f"{t.hour:02d}:{t.minute:02d}"


def local_instant(day: date, at: time, tz: ZoneInfo) -> datetime:
    """The UTC instant of wall-clock ``at`` on ``day`` in ``tz``.

    A time that does not exist (the hour skipped when clocks go forward) lands at the same
    distance after the change; a time that exists twice (clocks go back) means the first one.
    """
    return datetime.combine(day, at, tzinfo=tz).astimezone(UTC)


def _amount(shift: timedelta) -> str:
    minutes = abs(int(shift.total_seconds() // 60))
    if minutes == 60:
        return "an hour"
    return f"{minutes // 60} hours" if minutes % 60 == 0 else f"{minutes} minutes"


def clock_change_note(day: date, at: time, tz: ZoneInfo) -> str:
    """Plain words when wall-clock ``at`` on ``day`` is skipped or repeated by a clock change.

    Empty for an ordinary time. What ``local_instant`` makes of such a time is what is said:
    a skipped time comes as much later as the clocks jump, a repeated one is the first.
    """
    wall = datetime.combine(day, at, tzinfo=tz)
    before, after = wall.utcoffset(), wall.replace(fold=1).utcoffset()
    if before is None or after is None or before == after:
        return ""
    real = wall.astimezone(UTC).astimezone(tz)
    when = f"{wall:%a} {day.day} {wall:%b}"
    if real.replace(tzinfo=None) != wall.replace(tzinfo=None):
        return (
            f"There is no {hhmm(at)} on {when} in your time zone (the clocks go forward "
            f"{_amount(after - before)}), so it comes at {real:%H:%M}."
        )
    return (
        f"{hhmm(at)} comes twice on {when} in your time zone (the clocks go back "
        f"{_amount(after - before)}): I mean the first, before they go back."
    )


def local_day_bounds(day: date, tz: ZoneInfo) -> tuple[datetime, datetime]:
    """UTC start (inclusive) and end (exclusive) of a local day (23 or 25 h on DST days)."""
    return local_instant(day, time(0), tz), local_instant(day + timedelta(days=1), time(0), tz)


def in_quiet_hours(now: datetime, tz: ZoneInfo, start: str | None, end: str | None) -> bool:
    """True when ``now`` falls inside the user's quiet window (which may span midnight)."""
    if not start or not end:
        return False
    s, e = parse_hhmm(start), parse_hhmm(end)
    t = now.astimezone(tz).time().replace(second=0, microsecond=0)
    if s == e:
        return False
    if s < e:
        return s <= t < e
    return t >= s or t < e


def quiet_hours_end(now: datetime, tz: ZoneInfo, end: str) -> datetime:
    """The next moment the quiet window ends, as a UTC instant after ``now``."""
    e = parse_hhmm(end)
    local = now.astimezone(tz)
    for offset in range(3):
        candidate = local_instant(local.date() + timedelta(days=offset), e, tz)
        if candidate > now:
            return candidate
    return now  # unreachable: an end time always comes within two days


def when_words(at: datetime, tz: ZoneInfo, now: datetime) -> str:
    """How a time reads to a user: ``Tue 17:00``, with the date when it is a week or more away."""
    local = at.astimezone(tz)
    days = (local.date() - now.astimezone(tz).date()).days
    if 0 <= days < 7:
        return f"{local:%a} {local:%H:%M}"
    return f"{local:%a} {local.day} {local:%b} {local:%H:%M}"


_MONTH_FIRST_ZONES = (
    "America/New_York", "America/Chicago", "America/Denver", "America/Los_Angeles",
    "America/Phoenix", "America/Anchorage", "America/Detroit", "America/Boise",
    "America/Juneau", "America/Sitka", "America/Nome", "America/Adak", "America/Menominee",
    "America/Metlakatla", "America/Yakutat", "America/Indiana/", "America/Kentucky/",
    "America/North_Dakota/", "Pacific/Honolulu", "US/", "Asia/Manila", "Pacific/Guam",
    "America/Puerto_Rico",
)  # fmt: skip
"""Zones where people write the month first (12/31) when they have not said otherwise."""


def day_first(date_order: str | None, tz_name: str) -> bool:
    """Whether 3/4 means the 3rd of April for this user: their setting, else their zone."""
    if date_order in ("dmy", "mdy"):
        return date_order == "dmy"
    return not tz_name.startswith(_MONTH_FIRST_ZONES)

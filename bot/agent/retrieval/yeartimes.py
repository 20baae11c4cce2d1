"""Named times of a year, as plain date spans: seasons, holidays, parts of a year, decades.

``timeparse`` reads the words; this module only knows the calendar. Every function returns
``(first day, day after the last)`` in local dates. Seasons are meteorological (three whole
months) and follow the user's hemisphere, guessed from the time zone: in Sydney "summer" is
December to February. A season that starts in December is counted to the year most of it
lies in ("winter 2024" in the north is December 2023 to February 2024).
"""

from __future__ import annotations

from datetime import date, timedelta

Span = tuple[date, date]
"""(first day, day after the last)."""

SEASONS = ("spring", "summer", "autumn", "fall", "winter")
"""Season words (``fall`` is autumn)."""
_NORTH_START = {"spring": 3, "summer": 6, "autumn": 9, "fall": 9, "winter": 12}
"""First month of each season in the northern hemisphere."""
_SOUTHERN_ZONES = (
    "Australia/", "Antarctica/", "Pacific/Auckland", "Pacific/Chatham", "Pacific/Fiji",
    "Pacific/Tongatapu", "Pacific/Apia", "Pacific/Noumea", "Pacific/Efate", "NZ",
    "America/Sao_Paulo", "America/Argentina/", "America/Buenos_Aires", "America/Santiago",
    "America/Montevideo", "America/Asuncion", "America/La_Paz", "America/Lima",
    "America/Campo_Grande", "America/Cuiaba", "America/Porto_Velho", "America/Recife",
    "America/Bahia", "America/Fortaleza", "America/Belem", "America/Maceio", "Chile/",
    "Brazil/", "Africa/Johannesburg", "Africa/Maputo", "Africa/Harare", "Africa/Lusaka",
    "Africa/Windhoek", "Africa/Gaborone", "Africa/Maseru", "Africa/Mbabane", "Africa/Blantyre",
    "Africa/Lubumbashi", "Indian/Antananarivo", "Indian/Mauritius", "Indian/Reunion",
)  # fmt: skip
"""Zone names (or their prefixes) south of the equator, where the seasons are turned round."""


def southern(zone: str) -> bool:
    """Whether the time zone ``zone`` (an IANA key) lies in the southern hemisphere."""
    return zone.startswith(_SOUTHERN_ZONES)


def _months(year: int, month: int, count: int) -> Span:
    """``count`` whole months from ``month`` of ``year`` (months past December roll over)."""
    first = date(year + (month - 1) // 12, (month - 1) % 12 + 1, 1)
    total = first.year * 12 + first.month - 1 + count
    return first, date(total // 12, total % 12 + 1, 1)


def season(word: str, year: int, zone: str) -> Span:
    """The season ``word`` of ``year`` in the zone's hemisphere."""
    start = _NORTH_START[word]
    if southern(zone):
        start = (start + 6 - 1) % 12 + 1
    if start == 12:  # mostly in the next year: counted to that one
        return _months(year - 1, 12, 3)
    return _months(year, start, 3)


def latest_season(word: str, today: date, zone: str, *, ended: bool) -> Span:
    """The latest such season that has begun (``ended``: that is over) by ``today``."""
    for year in range(today.year + 1, today.year - 3, -1):
        first, after = season(word, year, zone)
        if (after <= today) if ended else (first <= today):
            return first, after
    raise AssertionError("a season comes round every year")  # pragma: no cover


def this_season(word: str, today: date, zone: str) -> Span:
    """The season said with "this".

    The one now, else one starting within a month ("this winter" in late November is the
    coming one), else this year's.
    """
    for year in range(today.year - 1, today.year + 2):
        first, after = season(word, year, zone)
        if first <= today < after or timedelta(0) < first - today <= timedelta(days=31):
            return first, after
    return season(word, today.year, zone)


def easter(year: int) -> date:
    """Western Easter Sunday of ``year`` (the anonymous Gregorian computus)."""
    a, b, c = year % 19, year // 100, year % 100
    d, e = divmod(b, 4)
    g = (8 * b + 13) // 25
    h = (19 * a + b - d - g + 15) % 30
    i, k = divmod(c, 4)
    m = (32 + 2 * e + 2 * i - h - k) % 7
    n = (a + 11 * h + 22 * m) // 451
    month, day = divmod(h + m - 7 * n + 114, 31)
    return date(year, month, day + 1)


def _nth_weekday(year: int, month: int, weekday: int, nth: int) -> date:
    first = date(year, month, 1)
    return first + timedelta(days=(weekday - first.weekday()) % 7 + 7 * (nth - 1))


def holiday(name: str, year: int) -> Span:
    """The days of a holiday in ``year``; ``name`` is a key of ``HOLIDAYS``."""
    if name == "easter":  # Good Friday to Easter Monday
        sunday = easter(year)
        return sunday - timedelta(days=2), sunday + timedelta(days=2)
    if name == "thanksgiving":  # the fourth Thursday of November and the long weekend
        thursday = _nth_weekday(year, 11, 3, 4)
        return thursday, thursday + timedelta(days=4)
    month, day, length = _FIXED[name]
    first = date(year, month, day)
    return first, first + timedelta(days=length)


_FIXED = {
    "christmas": (12, 24, 3),
    "christmas eve": (12, 24, 1),
    "christmas day": (12, 25, 1),
    "new year's eve": (12, 31, 1),
    "new year's day": (1, 1, 1),
    "halloween": (10, 31, 1),
    "valentine's day": (2, 14, 1),
}
"""(month, first day, days) of the holidays on a fixed date."""
HOLIDAYS = (*_FIXED, "easter", "thanksgiving")
"""Every holiday ``holiday`` knows."""


def latest_holiday(name: str, today: date) -> Span:
    """The latest such holiday that has begun by ``today``."""
    for year in (today.year, today.year - 1):
        first, after = holiday(name, year)
        if first <= today:
            return first, after
    raise AssertionError("a holiday comes round every year")  # pragma: no cover


YEAR_PARTS: dict[str, tuple[int, int]] = {
    "early": (1, 4),
    "beginning": (1, 4),
    "start": (1, 4),
    "mid": (5, 4),
    "middle": (5, 4),
    "late": (9, 4),
    "end": (9, 4),
    "first half": (1, 6),
    "second half": (7, 6),
    "q1": (1, 3),
    "q2": (4, 3),
    "q3": (7, 3),
    "q4": (10, 3),
    "first quarter": (1, 3),
    "second quarter": (4, 3),
    "third quarter": (7, 3),
    "fourth quarter": (10, 3),
}
"""(first month, months) of each named part of a year."""


def year_part(part: str, year: int) -> Span:
    """A named part of ``year`` ("late 2024": September to December)."""
    month, count = YEAR_PARTS[part]
    return _months(year, month, count)


DECADE_WORDS = {
    "twenties": 2, "thirties": 3, "forties": 4, "fifties": 5, "sixties": 6, "seventies": 7,
    "eighties": 8, "nineties": 9,
}  # fmt: skip
"""Decades said in words, by their tens digit."""


def decade(first_year: int) -> Span:
    """The ten years from ``first_year`` ("the 2010s": 2010 to 2019)."""
    return date(first_year, 1, 1), date(first_year + 10, 1, 1)

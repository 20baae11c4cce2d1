"""The words and patterns the reminder parser knows (see bot.jobs.reminders.phrases)."""

from __future__ import annotations

import re
from datetime import time

WEEKDAYS = {
    "mon": 0, "monday": 0, "tue": 1, "tues": 1, "tuesday": 1, "wed": 2, "weds": 2,
    "wednesday": 2, "thu": 3, "thur": 3, "thurs": 3, "thursday": 3, "fri": 4, "friday": 4,
    "sat": 5, "saturday": 5, "sun": 6, "sunday": 6,
}  # fmt: skip
MONTHS = {
    "jan": 1, "feb": 2, "mar": 3, "apr": 4, "may": 5, "jun": 6, "jul": 7, "aug": 8,
    "sep": 9, "sept": 9, "oct": 10, "nov": 11, "dec": 12,
}  # fmt: skip
PART_TIMES = {
    "morning": time(9),
    "afternoon": time(15),
    "evening": time(19),
    "night": time(21),
    "tonight": time(20),
}
DEFAULT_TIME = time(9)
NUMBERS = {
    "a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6,
    "seven": 7, "eight": 8, "nine": 9, "ten": 10, "fifteen": 15, "twenty": 20, "thirty": 30,
    "forty": 40, "forty-five": 45, "fifty": 50, "a couple of": 2, "a few": 3, "half an": 0.5,
    "half a": 0.5,
}  # fmt: skip
DAY_PREFIXES = ["mon", "tue", "wed", "thu", "fri", "sat", "sun"]
DAY_NAMES = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]

WD = r"(?:mon|tues?|wed(?:nes)?|weds|thu(?:rs?)?|fri|sat(?:ur)?|sun)(?:day)?"
MON = (
    r"(?:jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|"
    r"sept?(?:ember)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)"
)
NUM = r"(?:\d+(?:[.,]\d+)?|a couple of|a few|half an?|an?|one|two|three|four|five|six|seven|" + (
    r"eight|nine|ten|fifteen|twenty|thirty|forty-five|forty|fifty)"
)
UNIT = r"(?:seconds?|secs?|minutes?|mins?|m|hours?|hrs?|h|days?|d|weeks?|wks?|w)"
AMPM = r"(?P<ap>a\.?m\.?|p\.?m\.?)"

REMIND = re.compile(
    # "/remind me tomorrow ...": the command took "remind", the "me" is left at the start
    r"^\s*me\b(?=\s)|"
    r"\b(?:(?:please|pls|can you|could you)\s+)*(?:set\s+(?:me\s+)?an?\s+reminder(?:\s+for\s+me)?|"
    r"remind(?:\s+me)?|reminder)\b[:,]?",
    re.IGNORECASE,
)
EVERY_N = re.compile(
    rf"\bevery\s+(?P<n>\d+|{NUM})?\s*(?P<unit>minutes?|mins?|hours?|hrs?|h)\b", re.IGNORECASE
)
EVERY_DAYS = re.compile(
    rf"\b(?:every|each)\s+(?P<days>{WD}s?(?:\s*(?:,|and|&|,\s*and)\s*{WD}s?)*)\b", re.IGNORECASE
)
ON_PLURAL = re.compile(rf"\b(?:on\s+)?(?P<days>{WD}s)\b", re.IGNORECASE)
EVERY_WEEKDAY = re.compile(
    r"\b(?:every|each)\s+(?:week\s*day|work\s*day)s?\b|\bon\s+weekdays\b", re.IGNORECASE
)
EVERY_WEEKEND = re.compile(
    r"\b(?:every|each)\s+weekends?(?:\s+day)?\b|\bon\s+weekends\b", re.IGNORECASE
)
EVERY_DAY = re.compile(
    r"\b(?:every|each)\s+(?:single\s+)?(?:day|(?P<part>morning|afternoon|evening|night))\b|"
    r"\bdaily\b",
    re.IGNORECASE,
)
EVERY_WEEK = re.compile(r"\b(?:every\s+week|weekly)\b", re.IGNORECASE)
HOUR_AND_HALF = re.compile(r"\bin\s+(?:an?|one)\s+hour\s+and\s+a\s+half\b", re.IGNORECASE)
IN_HMM = re.compile(r"\bin\s+(?P<h>\d+)\s*h\s*(?P<m>\d{1,2})(?:\s*m(?:in)?s?)?\b", re.IGNORECASE)
IN = re.compile(
    rf"\bin\s+(?P<n>{NUM})\s*(?P<unit>{UNIT})\b"
    r"(?:\s*(?:and\s+)?(?:(?P<n2>\d+)\s*(?P<unit2>minutes?|mins?|m)\b))?",
    re.IGNORECASE,
)
IN_PART = re.compile(r"\bin\s+the\s+(?P<part>morning|afternoon|evening)\b", re.IGNORECASE)
DAY_AFTER = re.compile(r"\b(?:the\s+)?day\s+after\s+tomorrow\b", re.IGNORECASE)
TOMORROW = re.compile(
    r"\b(?:tomorrow|tmrw|tmr)(?:\s+(?P<part>morning|afternoon|evening|night))?\b", re.IGNORECASE
)
TONIGHT = re.compile(r"\btonight\b", re.IGNORECASE)
THIS_PART = re.compile(r"\bthis\s+(?P<part>morning|afternoon|evening)\b", re.IGNORECASE)
TODAY = re.compile(r"\btoday\b", re.IGNORECASE)
NEXT_WEEK = re.compile(r"\bnext\s+week\b", re.IGNORECASE)
WEEKDAY = re.compile(
    rf"\b(?:on\s+)?(?:(?P<next>next|this|coming)\s+)?(?P<wd>{WD})\b"
    r"(?:\s+(?P<part>morning|afternoon|evening|night))?",
    re.IGNORECASE,
)
ISO_DATE = re.compile(r"\b(?:on\s+)?(?P<y>\d{4})-(?P<m>\d{1,2})-(?P<d>\d{1,2})\b")
DAY_MONTH = re.compile(
    rf"\b(?:on\s+)?(?:the\s+)?(?P<d>\d{{1,2}})(?:st|nd|rd|th)?\s+(?:of\s+)?(?P<mon>{MON})\b",
    re.IGNORECASE,
)
MONTH_DAY = re.compile(
    rf"\b(?:on\s+)?(?P<mon>{MON})\s+(?P<d>\d{{1,2}})(?:st|nd|rd|th)?\b", re.IGNORECASE
)
NTH = re.compile(r"\b(?:on\s+)?the\s+(?P<d>\d{1,2})(?:st|nd|rd|th)\b", re.IGNORECASE)
NOON = re.compile(r"\b(?:at\s+)?(?P<w>noon|midday|midnight)\b", re.IGNORECASE)
CLOCK = re.compile(
    rf"(?:\bat\s+|@\s*|\b)(?P<h>\d{{1,2}})[:.](?P<m>\d{{2}})\s*{AMPM}?", re.IGNORECASE
)
HOUR_AMPM = re.compile(rf"(?:\bat\s+|@\s*|\b)(?P<h>\d{{1,2}})\s*{AMPM}(?!\w)", re.IGNORECASE)
AT_HOUR = re.compile(
    r"(?:\bat\s+|@\s*)(?P<h>\d{1,2})(?:\s*o'?clock)?\b|\b(?P<h2>\d{1,2})\s*o'?clock\b",
    re.IGNORECASE,
)
PAST_DAY = (
    rf"(?:the\s+day\s+before\s+yesterday|yesterday|last\s+night|earlier\s+today|"
    rf"(?:last|this\s+past)\s+(?:{WD}|week(?:end)?|month|year)|"
    rf"\d+\s+(?:minutes?|mins?|hours?|hrs?|days?|weeks?)\s+ago)"
)
"""A day or moment already gone ("yesterday", "last Monday", "2 hours ago")."""
_TIME_WORD = r"(?:at\s+|@\s*)?\d{1,2}(?:[:.]\d{2})?\s*(?:[ap]\.?m\.?|o'?clock)?"
PAST_WHEN = re.compile(
    rf"\b{PAST_DAY}\s*,?\s+{_TIME_WORD}(?!\w)|"  # yesterday at 9
    rf"(?<!\w){_TIME_WORD}\s+{PAST_DAY}\b|"  # at 9 yesterday, 9pm last night
    rf"^\s*(?:please\s+)?(?:remind\s+me\s+)?{PAST_DAY}\b",  # remind me yesterday to ...
    re.IGNORECASE,
)
"""A past day given as the reminder's time (not a past day the task merely mentions)."""
LEADING = re.compile(r"^(?:to|that|about|of|and|then|on|at|for|-|:|,)\s+", re.IGNORECASE)
TRAILING = re.compile(r"\s+(?:at|on|in|by|and|please|pls|for)$", re.IGNORECASE)
ORDINALS = {
    "first": 1, "1st": 1, "second": 2, "2nd": 2, "third": 3, "3rd": 3, "fourth": 4, "4th": 4,
    "last": -1,
}  # fmt: skip
ORD = r"(?:first|1st|second|2nd|third|3rd|fourth|4th|last)"
MONTHLY_NTH = re.compile(
    rf"\b(?:(?:every|each)\s+|on\s+the\s+|the\s+)(?P<nth>{ORD})\s+(?P<wd>{WD})\s+"
    r"(?:of\s+)?(?:the|each|every|a)\s+month\b",
    re.IGNORECASE,
)
MONTHLY_DAY = re.compile(
    r"\b(?:(?:every|each)\s+month\s+on\s+the\s+(?P<d>\d{1,2})(?:st|nd|rd|th)?|"
    r"(?:on\s+)?the\s+(?P<d2>\d{1,2})(?:st|nd|rd|th)?\s+(?:of\s+)?(?:every|each)\s+month|"
    r"monthly\s+on\s+the\s+(?P<d3>\d{1,2})(?:st|nd|rd|th)?)\b",
    re.IGNORECASE,
)
EVERY_N_WEEKS = re.compile(
    rf"\b(?:every|each)\s+(?:(?P<n>\d+|two|three|four|other)\s+weeks?|fortnight)"
    rf"(?:\s+on)?\s+(?P<wd>{WD})\b|\bevery\s+other\s+(?P<wd2>{WD})\b|"
    rf"\bfortnightly\s+on\s+(?P<wd3>{WD})\b",
    re.IGNORECASE,
)
_YEAR_WORD = r"(?:(?:every|each)\s+year|yearly|annually)\s+on\s+(?:the\s+)?"
_NTH_DAY = r"\d{1,2})(?:st|nd|rd|th)?"
YEARLY = re.compile(
    rf"\b{_YEAR_WORD}(?P<d>{_NTH_DAY}\s+(?:of\s+)?(?P<mon>{MON})\b|"
    rf"\b{_YEAR_WORD}(?P<mon2>{MON})\s+(?P<d2>{_NTH_DAY}(?!\w)|"
    rf"\b(?:every|each)\s+(?:the\s+)?(?P<d3>{_NTH_DAY}\s+(?:of\s+)?(?P<mon3>{MON})\b|"
    rf"\b(?:every|each)\s+(?P<mon4>{MON})\s+(?P<d4>{_NTH_DAY}(?!\w)",
    re.IGNORECASE,
)
"""A day of the year that repeats: "every year on 12 June", "annually on June 12th",
"every 3 March"."""
MONTH_NAMES = [
    "January", "February", "March", "April", "May", "June", "July", "August", "September",
    "October", "November", "December",
]  # fmt: skip
EVERY_N_DAYS = re.compile(r"\bevery\s+(?P<n>\d+|two|three|four|other)\s+days\b", re.IGNORECASE)
REPEAT_WORD = re.compile(
    r"\b(?:every|each|daily|weekly|monthly|fortnightly|yearly|annually|biweekly)\b", re.IGNORECASE
)
NUMERIC_DATE = re.compile(
    r"\b(?:on\s+)?(?:(?P<a>\d{1,2})/(?P<b>\d{1,2})(?:/(?P<y>\d{4}|\d{2}))?|"
    r"(?P<a2>\d{1,2})\.(?P<b2>\d{1,2})\.(?P<y2>\d{4}|\d{2}))\b"
)
"""31/12, 12/31, 31/12/2025, 31.12.2025 (a dot date needs its year: 9.30 is a time)."""

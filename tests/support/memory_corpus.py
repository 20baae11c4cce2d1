"""A deterministic test corpus: ~600 messages over 76 days with labelled questions.

Several people (Ana, Ben, Carlos, Dana, Eli), topics (teeth, garden, car, work project
"Falcon", book club, health, travel, moving, music) and sources (notes, chats, work Slack,
pendant transcripts). Key messages carry the details questions ask about; filler and
distractors share their words and people so that neither retriever wins by accident.

Records are import-file lines (``{"id", "ts", "speaker", "text", "conversation"}``), so the
same corpus also exercises ``lifebot import``.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

TZ = ZoneInfo("Europe/Lisbon")
NOW = datetime(2024, 6, 15, 18, 0, tzinfo=TZ).astimezone(UTC)  # a Saturday evening
FIRST_DAY = date(2024, 4, 1)
LAST_DAY = date(2024, 6, 15)

# (id, local date, hh:mm, speaker, conversation, text)
KEY: list[tuple[str, str, str, str, str, str]] = [
    ("k-dentist-1", "2024-05-06", "08:40", "me", "notes",
     "Dentist appointment moved to Thursday 23 May at 9:30, Dr. Okafor wants to check the "
     "cracked molar."),
    ("k-dentist-2", "2024-05-23", "11:05", "me", "notes",
     "Dr. Okafor says the molar needs a crown, second visit in three weeks."),
    ("k-ana-job", "2024-04-18", "19:12", "Ana", "chat-ana",
     "I got the offer from Lumen Labs! Starting as design lead in June."),
    ("k-ben-race", "2024-05-02", "21:30", "Ben", "chat-ben",
     "Signed up for the Porto half marathon in October, want to train together on Sundays?"),
    ("k-garden-1", "2024-04-10", "18:20", "me", "notes",
     "Planted three tomato seedlings and some basil on the balcony."),
    ("k-garden-2", "2024-05-12", "09:15", "me", "notes",
     "The tomatoes have yellow leaves, maybe I'm giving them too much water."),
    ("k-garden-3", "2024-06-09", "10:02", "me", "notes",
     "First cherry tomatoes are ripening on the balcony!"),
    ("k-car", "2024-05-28", "17:45", "me", "notes",
     "The mechanic said the Golf needs new brake pads, the quote was 240 euros."),
    ("k-book", "2024-05-15", "20:10", "Carlos", "chat-carlos",
     "Book club picked The Overstory for June, we meet at my place on the 20th."),
    ("k-allergy", "2024-04-24", "12:30", "me", "notes",
     "Allergist confirmed I'm allergic to birch pollen; take cetirizine in spring."),
    ("k-cat", "2024-04-29", "16:00", "me", "notes",
     "Miso had her vaccination at the vet, the next booster is due in April next year."),
    ("k-falcon-1", "2024-05-20", "10:30", "Dana", "work",
     "Falcon launch slipped to July 8 because the payments API isn't certified yet."),
    ("k-falcon-2", "2024-06-12", "15:20", "Dana", "work",
     "Falcon go/no-go meeting moved to June 19, legal still reviewing the terms."),
    ("k-lisbon", "2024-05-30", "22:15", "me", "notes",
     "Booked flights to Lisbon for the 2nd of August, staying in an Airbnb in Alfama."),
    ("k-piano", "2024-05-08", "19:40", "me", "notes",
     "Eli wants me to practise the Chopin nocturne slower, hands separately first."),
    ("k-flat", "2024-06-04", "13:10", "me", "notes",
     "Signed the lease for the flat on Rua das Flores, move-in is July 1."),
    ("k-sat-climb", "2024-06-08", "11:30", "me", "notes",
     "Went climbing at the Boulder Lounge with Ben, finally sent the purple V4."),
    ("k-sat-dinner", "2024-06-08", "21:00", "me", "notes",
     "Dinner at Ana's place, she made feijoada and we played cards."),
    ("k-yesterday", "2024-06-14", "17:30", "me", "notes",
     "Finished the quarterly report and sent it to Dana."),
    ("k-hike", "2024-06-02", "16:45", "me", "notes",
     "Hiked the Peneda trail with Carlos, 18 km and a swim in the river."),
    ("k-pendant", "2024-06-11", "09:05", "ambient", "pendant",
     "so the plumber is coming on Thursday morning to fix the leaking kitchen tap"),
]  # fmt: skip

# Distractors share people and words with key messages but do not answer the questions.
DISTRACTORS: list[tuple[str, str, str, str, str]] = [
    ("2024-04-22", "18:00", "Ana", "chat-ana", "My sister is visiting next week, want to meet?"),
    ("2024-05-18", "10:00", "Ben", "chat-ben", "Can I borrow your car on Saturday?"),
    ("2024-05-09", "09:45", "Dana", "work", "Falcon standup: design review went fine."),
    ("2024-05-27", "09:50", "Dana", "work", "Falcon beta feedback looks good overall."),
    ("2024-04-15", "20:00", "me", "notes", "Need to floss more, gums were sore this week."),
    ("2024-05-25", "12:00", "me", "notes", "Bought new soil and pots for the balcony."),
    ("2024-06-05", "19:00", "Carlos", "chat-carlos", "Halfway through the book, it's slow."),
    ("2024-04-30", "08:00", "me", "notes", "Washed the Golf and checked the tyre pressure."),
    ("2024-05-14", "18:30", "me", "notes", "Piano lesson cancelled, Eli is sick."),
    ("2024-06-01", "10:00", "me", "notes", "Pollen count is high today, eyes itching."),
]

FILLER_ME = [
    "Had coffee with {p} near the office.",
    "Long day, too many meetings.",
    "Ran {n} km along the river this morning.",
    "Grocery run: {food}, {food2} and bread.",
    "Watched a documentary about {topic} tonight.",
    "Cooked {food} for dinner, turned out fine.",
    "Called mum, she says hi to {p}.",
    "Slept badly, need more rest.",
    "Cleaned the kitchen and did the laundry.",
    "Read a few chapters before bed.",
    "Paid the electricity bill.",
    "Bus was late again, walked the last part.",
    "Lunch with {p}: we talked about {topic}.",
]
FILLER_OTHER = [
    "Are you free for lunch {day}?",
    "Did you see the news about {topic}?",
    "Thanks for yesterday!",
    "Running late, sorry.",
    "Sending you the photos later.",
    "Happy Friday!",
    "Have you tried the new bakery on the corner?",
]
FILLER_WORK = [
    "Reminder: timesheets are due {day}.",
    "Deploy went out without issues.",
    "Can someone review my pull request?",
    "Retro notes are in the wiki.",
]
FILLER_AMBIENT = [
    "yeah I think we should take the train instead",
    "no no the meeting is in the other room",
    "could you pass me the salt",
    "I'll be there in ten minutes",
]
PEOPLE = ["Ana", "Ben", "Carlos", "Dana"]
FOODS = ["pasta", "rice", "lentils", "salmon", "eggs", "spinach", "apples", "yoghurt"]
TOPICS = ["whales", "the elections", "electric cars", "Roman history", "coffee", "space"]
DAYS = ["tomorrow", "on Monday", "on Thursday", "next week"]


@dataclass(frozen=True)
class Question:
    """A labelled question: which source ids answer it (empty: nothing does)."""

    text: str
    kind: str
    """topic, person, time, recency or none."""
    expected: tuple[str, ...]
    window: tuple[str, str] | None = None
    """(first, last) local dates a time-scoped answer must stay inside."""


QUESTIONS: list[Question] = [
    Question("What did the dentist say about my tooth?", "topic", ("k-dentist-2", "k-dentist-1")),
    Question("How much will fixing the brakes cost?", "topic", ("k-car",)),
    Question("Which book are we reading for book club?", "topic", ("k-book",)),
    Question("What am I allergic to?", "topic", ("k-allergy",)),
    Question("When is the cat due for her next vaccine?", "topic", ("k-cat",)),
    Question("Why was the Falcon launch delayed?", "topic", ("k-falcon-1",)),
    Question("Where am I staying in Lisbon?", "topic", ("k-lisbon",)),
    Question("When do I move into the new apartment?", "topic", ("k-flat",)),
    Question("When is the plumber coming?", "topic", ("k-pendant",)),
    Question("How are my tomato plants doing?", "topic",
             ("k-garden-1", "k-garden-2", "k-garden-3")),
    Question("What did Ana tell me about her new job?", "person", ("k-ana-job",)),
    Question("Which race is Ben training for?", "person", ("k-ben-race",)),
    Question("What did Eli say about my piano practice?", "person", ("k-piano",)),
    Question("What did Carlos say about book club?", "person", ("k-book",)),
    Question("What did I do last Saturday?", "time", ("k-sat-climb", "k-sat-dinner"),
             ("2024-06-08", "2024-06-08")),
    Question("What did I do yesterday?", "time", ("k-yesterday",), ("2024-06-14", "2024-06-14")),
    Question("What did I do two weekends ago?", "time", ("k-hike",), ("2024-06-01", "2024-06-02")),
    Question("What did I plant in April?", "time", ("k-garden-1",), ("2024-04-01", "2024-04-30")),
    Question("What did Dana say about Falcon this week?", "time", ("k-falcon-2",),
             ("2024-06-10", "2024-06-15")),
    Question("What's my latest note about the tomatoes?", "recency", ("k-garden-3",)),
    Question("What did Dana say last about Falcon?", "recency", ("k-falcon-2",)),
    Question("What did I say last?", "recency", ("k-last",)),
    # Paraphrases: few or none of the stored words.
    Question("Which doctor is treating my broken tooth?", "topic", ("k-dentist-1", "k-dentist-2")),
    Question("What is wrong with the car's stopping power?", "topic", ("k-car",)),
    Question("Where will I live from July?", "topic", ("k-flat",)),
    # Multi-hop: the answer is spread over messages on different days.
    Question("What sports am I doing with Ben?", "person", ("k-ben-race", "k-sat-climb")),
    Question("Which Falcon dates did Dana move?", "person", ("k-falcon-1", "k-falcon-2")),
    Question("What did I say about scuba diving?", "none", ()),
    Question("What's my passport number?", "none", ()),
    Question("When did I go skiing in the Alps?", "none", ()),
    Question("What did I do on 2024-03-10?", "none", (), ("2024-03-10", "2024-03-10")),
]  # fmt: skip


@dataclass
class Corpus:
    """The generated records and the questions about them."""

    records: list[dict[str, str]] = field(default_factory=list)
    questions: list[Question] = field(default_factory=lambda: list(QUESTIONS))


def _ts(day: date, hhmm: str) -> datetime:
    h, m = (int(x) for x in hhmm.split(":"))
    return datetime(day.year, day.month, day.day, h, m, tzinfo=TZ).astimezone(UTC)


def build_corpus(seed: int = 7, filler_per_day: tuple[int, int] = (6, 10)) -> Corpus:
    """The corpus, identical for the same seed."""
    rng = random.Random(seed)
    rows: list[tuple[datetime, dict[str, str]]] = []
    for kid, iso, hhmm, speaker, conv, text in KEY:
        rows.append((_ts(date.fromisoformat(iso), hhmm), _rec(kid, speaker, conv, text)))
    for n, (iso, hhmm, speaker, conv, text) in enumerate(DISTRACTORS):
        ts = _ts(date.fromisoformat(iso), hhmm)
        rows.append((ts, _rec(f"d-{n}", speaker, conv, text)))
    day = FIRST_DAY
    n = 0
    while day <= LAST_DAY:
        weekend = day.weekday() >= 5
        lo, hi = filler_per_day
        count = rng.randint(max(1, lo - 3), max(1, hi - 4)) if weekend else rng.randint(lo, hi)
        for _ in range(count):
            minute = rng.randint(7 * 60, 22 * 60 + 30)
            ts = _ts(day, f"{minute // 60:02d}:{minute % 60:02d}")
            if day == LAST_DAY and ts >= NOW - timedelta(hours=1):
                continue
            speaker, conv, text = _filler(rng, weekend)
            rows.append((ts, _rec(f"f-{n}", speaker, conv, text)))
            n += 1
        day += timedelta(days=1)
    # The newest message of all, for "what did I say last?".
    rows.append((NOW - timedelta(minutes=30), _rec("k-last", "me", "notes", "Note to self: "
                 "buy batteries for the smoke alarm.")))  # fmt: skip
    rows.sort(key=lambda r: r[0])
    corpus = Corpus()
    for ts, rec in rows:
        rec["ts"] = ts.isoformat()
        corpus.records.append(rec)
    return corpus


def _rec(rid: str, speaker: str, conv: str, text: str) -> dict[str, str]:
    return {"id": rid, "speaker": speaker, "text": text, "conversation": conv}


def _filler(rng: random.Random, weekend: bool) -> tuple[str, str, str]:
    fill = {
        "p": rng.choice(PEOPLE),
        "n": str(rng.randint(3, 12)),
        "food": rng.choice(FOODS),
        "food2": rng.choice(FOODS),
        "topic": rng.choice(TOPICS),
        "day": rng.choice(DAYS),
    }
    roll = rng.random()
    if roll < 0.55:
        return "me", "notes", rng.choice(FILLER_ME).format(**fill)
    if roll < 0.8:
        who = rng.choice(PEOPLE[:3])
        return who, f"chat-{who.lower()}", rng.choice(FILLER_OTHER).format(**fill)
    if roll < 0.92 and not weekend:
        return "Dana", "work", rng.choice(FILLER_WORK).format(**fill)
    return "ambient", "pendant", rng.choice(FILLER_AMBIENT)

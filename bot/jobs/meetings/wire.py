"""Meeting transcripts as recorders post them: our JSON body and Omi's conversation webhook.

Both become one ``Meeting`` (validated, times aware). Ours::

    {"meeting_id": "zoom-8472", "title": "Roadmap review", "start": "2026-11-20T15:00:00Z",
     "participants": ["Ana Lima", "Ben Ode"],
     "segments": [{"speaker": "Ana Lima", "start": 0.0, "end": 4.2, "text": "..."}]}

Segment times are seconds from the meeting's start. Omi's "memory created" (conversation)
webhook posts its ``Conversation`` model (BasedHardware/omi, backend/models/conversation.py):
``id``, ``started_at``, ``finished_at``, ``structured`` (``title``, ``overview``,
``action_items[].description``) and ``transcript_segments`` (``text``, ``speaker`` such as
``SPEAKER_00``, ``is_user``, ``start``/``end`` in seconds from ``started_at``).
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from pydantic import AwareDatetime, BaseModel, Field, ValidationError, field_validator

from bot.shapes import items

MAX_OFFSET = 7 * 24 * 3600.0
"""The latest a segment can start or end, in seconds from the meeting's start (a week): a
longer recording is not one meeting, and a time beyond what a date can hold never stored."""
YEARS = (1900, 2999)
"""The years a meeting can have begun in: far enough from the calendar's ends that adding a
week of seconds to the start always gives a date."""


class Segment(BaseModel):
    """One stretch of speech."""

    speaker: str = Field("", max_length=200)
    """Who spoke (a name, or the recorder's label such as SPEAKER_00); "me" for the user."""
    start: float = Field(ge=0)
    """Seconds from the meeting's start."""
    end: float = Field(ge=0)
    text: str = Field(max_length=20_000)

    @field_validator("start", "end")
    @classmethod
    def _within_a_week(cls, value: float) -> float:
        if not value <= MAX_OFFSET:  # also refuses NaN and infinity
            raise ValueError(
                f"{value:g} is not a time in a meeting: give seconds from the meeting's start, "
                f"at most {MAX_OFFSET:.0f} (a week)"
            )
        return value


class Meeting(BaseModel):
    """A meeting transcript in lifebot's own shape (what the job table stores)."""

    meeting_id: str = Field(min_length=1, max_length=200)
    """The recorder's id: a newer post with the same id replaces a pending one."""
    title: str = Field("", max_length=300)
    start: AwareDatetime
    """When the meeting began (with a UTC offset)."""
    participants: list[str] = Field(default_factory=list, max_length=200)
    segments: list[Segment] = Field(min_length=1, max_length=20_000)
    overview: str = Field("", max_length=5000)
    """A summary the recorder made, if any (Omi's ``structured.overview``)."""
    action_items: list[str] = Field(default_factory=list, max_length=200)
    """Action items the recorder found, if any (Omi's ``structured.action_items``)."""

    @field_validator("start")
    @classmethod
    def _a_real_year(cls, value: datetime) -> datetime:
        if not YEARS[0] <= value.year <= YEARS[1]:
            raise ValueError(
                f"a meeting that began in the year {value.year} is not one I can keep "
                f"(years {YEARS[0]} to {YEARS[1]})"
            )
        return value

    @field_validator("segments")
    @classmethod
    def _some_words(cls, value: list[Segment]) -> list[Segment]:
        if not any(seg.text.strip() for seg in value):
            raise ValueError("the transcript has no words (every segment's text is empty)")
        return value


class BadTranscript(ValueError):
    """The body is neither accepted shape; the message says what is wrong, in plain words."""


def _omi(body: dict[str, Any]) -> dict[str, Any]:
    structured = body.get("structured")
    if not isinstance(structured, dict):
        structured = {}
    segments = []
    for seg in items(body.get("transcript_segments")):
        if not isinstance(seg, dict):
            continue
        speaker = "me" if seg.get("is_user") else str(seg.get("speaker") or "")
        segments.append(
            {
                "speaker": speaker,
                "start": seg.get("start", 0),
                "end": seg.get("end", 0),
                "text": seg.get("text", ""),
            }
        )
    actions = [
        " ".join(i["description"].split())
        for i in items(structured.get("action_items"))
        if isinstance(i, dict) and isinstance(i.get("description"), str) and not i.get("completed")
    ]
    people = sorted({s["speaker"] for s in segments if s["speaker"] and s["speaker"] != "me"})
    return {
        "meeting_id": f"omi:{body.get('id') or ''}",
        "title": structured.get("title") or "",
        "start": body.get("started_at") or body.get("created_at"),
        "participants": people,
        "segments": segments,
        "overview": structured.get("overview") or "",
        "action_items": [i for i in actions if i],
    }


def parse_meeting(body: object) -> Meeting:
    """Our body or Omi's conversation webhook, validated; BadTranscript says what is wrong."""
    if not isinstance(body, dict):
        raise BadTranscript("the body must be a JSON object")
    if body.get("discarded"):
        raise BadTranscript("Omi marked this conversation as discarded; nothing to keep")
    data = _omi(body) if "transcript_segments" in body else body
    try:
        return Meeting.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or 'body'}: {e['msg']}" for e in exc.errors()[:5]
        )
        raise BadTranscript(problems) from None


def segment_time(meeting: Meeting, seg: Segment) -> datetime:
    """When a segment was said."""
    return meeting.start + timedelta(seconds=seg.start)

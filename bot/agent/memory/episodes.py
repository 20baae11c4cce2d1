"""Episodes: a stream of messages cut at time gaps, with a title, summary, people and topics.

An episode also ends when it holds ``EPISODE_LINES`` lines, the most the fast model reads to
summarize one: a day of talk without a long pause (a pendant in an office) used to be one
episode whose summary covered only its last lines, and every pass read the whole day again.

Titles and summaries start deterministic (so an episode exists even when the LLM is down)
and are rewritten by the fast model when it is reachable (``Episode.summarized``).
"""

from __future__ import annotations

import collections
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

from sqlmodel.ext.asyncio.session import AsyncSession

from storage.models import Episode
from storage.repos.episodes import CursorRepo, EpisodeRepo, StreamLine, scope_of
from storage.search.fulltext import fts_terms

EPISODE_LINES = 80
"""The most lines one episode holds: what the fast model reads to summarize it."""

CHANNEL_WORDS = {"device": "Overheard", "import": "Imported chat", "console": "Chat"}


def speaker_of(msg: StreamLine) -> str:
    """Who said a message, as people would name them ("me" for the user)."""
    meta = msg.meta or {}
    name = str(meta.get("speaker") or "")
    if name:
        return name
    return "ambient" if msg.channel == "device" else "me"


def segment(
    msgs: Sequence[StreamLine],
    gap: timedelta,
    *,
    after: datetime | None = None,
    room: int = 0,
    max_lines: int = EPISODE_LINES,
) -> tuple[list[StreamLine], list[list[StreamLine]]]:
    """Split time-ordered messages wherever ``gap`` passes without one or a group is full.

    ``after`` is the end of the previous episode and ``room`` how many more lines it takes:
    the first lines within ``gap`` of it that fit continue that episode. Returns (the lines
    continuing it, the new groups of at most ``max_lines``).
    """
    carried: list[StreamLine] = []
    groups: list[list[StreamLine]] = []
    last = after
    for msg in msgs:
        close = last is not None and msg.created_at - last <= gap
        if close and not groups and len(carried) < room:
            carried.append(msg)
        elif close and groups and len(groups[-1]) < max_lines:
            groups[-1].append(msg)
        else:
            groups.append([msg])
        last = msg.created_at
    return carried, groups


def deterministic_summary(
    msgs: Sequence[StreamLine], tz: ZoneInfo
) -> tuple[str, str, list[str], list[str]]:
    """(title, summary, people, topics) made without a model."""
    people = list(dict.fromkeys(s for s in map(speaker_of, msgs) if s not in ("me", "ambient")))
    first = msgs[0]
    when = first.created_at.astimezone(tz)
    what = CHANNEL_WORDS.get(first.channel, "Chat" if people else "Notes")
    with_whom = f" with {', '.join(people[:3])}" if people else ""
    title = f"{what}{with_whom}, {when:%a %d %b %Y %H:%M}"
    lines = []
    for m in msgs[:4]:
        text = m.text if len(m.text) <= 90 else m.text[:87] + "..."
        lines.append(f"{speaker_of(m)}: {text}")
    more = f" (+{len(msgs) - 4} more)" if len(msgs) > 4 else ""
    summary = " | ".join(lines) + more
    counts = collections.Counter(w for m in msgs for w in fts_terms(m.text) if len(w) > 3)
    topics = [w for w, _ in counts.most_common(3)]
    return title, summary, people, topics


@dataclass(slots=True, frozen=True)
class Touched:
    """An episode a pass wrote, with what went into it."""

    episode: Episode
    """The episode as stored."""
    new: list[StreamLine]
    """The lines this pass filed into it."""
    lines: Sequence[StreamLine]
    """All its lines, oldest first (at most ``EPISODE_LINES``)."""


class EpisodeBuilder:
    """Groups new messages into episodes, continuing the stream's last one when close."""

    def __init__(self, *, gap_minutes: float = 45.0, max_lines: int = EPISODE_LINES) -> None:
        self.gap = timedelta(minutes=gap_minutes)
        self.max_lines = max_lines

    async def add(
        self, s: AsyncSession, user_id: int, msgs: Sequence[StreamLine], tz: ZoneInfo
    ) -> list[Touched]:
        """File ``msgs`` (one stream, time-ordered) into episodes, in the caller's unit of work.

        The caller moves the stream's cursor in that same unit: filed and read, or neither.
        Returns each touched episode with the new messages that went into it and its lines.
        """
        if not msgs:
            return []
        scope = scope_of(msgs[0])
        out: list[Touched] = []
        repo = EpisodeRepo(s)
        last = await repo.last_in_scope(user_id, scope)
        room = self.max_lines - len(last.source_message_ids or []) if last else 0
        carried, groups = segment(
            msgs,
            self.gap,
            after=last.end_at if last else None,
            room=room,
            max_lines=self.max_lines,
        )
        if carried and last is not None:
            ids = [m.id for m in carried if m.id is not None]
            last.source_message_ids = [*(last.source_message_ids or []), *ids]
            last.end_at = max(last.end_at, carried[-1].created_at)
            # At most max_lines lines: the episode is full before it grows past them.
            everything = await CursorRepo(s).lines(user_id, last.source_message_ids)
            title, summary, people, topics = deterministic_summary(everything, tz)
            last.title, last.summary, last.people, last.topics = title, summary, people, topics
            last.summarized = False
            last.updated_at = carried[-1].created_at
            await repo.save(last)
            out.append(Touched(last, carried, everything))
        for group in groups:
            ids = [m.id for m in group if m.id is not None]
            title, summary, people, topics = deterministic_summary(group, tz)
            ep = await repo.add(
                Episode(
                    user_id=user_id,
                    scope=scope,
                    channel=group[0].channel,
                    title=title,
                    summary=summary,
                    people=people,
                    topics=topics,
                    start_at=group[0].created_at,
                    end_at=group[-1].created_at,
                    source_message_ids=ids,
                    summarized=False,
                )
            )
            out.append(Touched(ep, group, group))
        return out

"""One reply stream for every channel that can edit a message: post a draft, then edit it.

While the agent works, the answer so far (or what the agent is doing) is shown in one draft
message, edited at most once per ``interval`` seconds (Telegram allows about one edit a second
per chat, Slack's ``chat.update`` about fifty a minute per workspace). When the answer is
complete, the draft becomes its first part and any overflow follows.

Each channel supplies only a ``DraftSurface``: how a preview looks, and the four wire calls
(post a draft, edit it, turn it into the final message, send the final message fresh).

Errors, the same on every channel:

- a failed draft post or edit stops the live preview, never the turn: it is logged, and the
  final answer still goes out; ``RateLimited`` only pauses the preview for its Retry-After;
- ``finish`` always delivers the final answer: when the draft cannot be turned into it, the
  answer is sent as a fresh message (an ``Unreachable`` identity is reported, not retried).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Protocol

from bot.errors import ChannelError, RateLimited, Unreachable
from bot.messages import OutboundMessage, Receipt

log = logging.getLogger(__name__)


class DraftSurface(Protocol):
    """What one channel supplies for one answer's draft (the wire calls and the look)."""

    where: str
    """For logs: the channel and chat, never message text."""

    def preview(self, text: str, label: str | None) -> str:
        """The draft's text for the answer so far and the current progress label ('' = none)."""
        ...

    async def post(self, text: str) -> str:
        """Post the first draft; return its handle (the channel's message id)."""
        ...

    async def edit(self, draft: str, text: str) -> None:
        """Replace the draft's text."""
        ...

    async def replace(self, draft: str, msg: OutboundMessage) -> Receipt:
        """Turn the draft into the final message's first part and send any overflow after it."""
        ...

    async def send(self, msg: OutboundMessage) -> Receipt:
        """Send the final message as new message(s)."""
        ...


class DraftStream:
    """The ``ReplyStream`` of every editing channel: throttled draft edits, a final message."""

    def __init__(
        self,
        surface: DraftSurface,
        *,
        interval: float,
        first_draft_waits: bool,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.surface = surface
        self.interval = interval
        """At least this many seconds between two draft posts or edits."""
        self.clock = clock
        self.text = ""
        """The answer so far."""
        self.draft: str | None = None
        """The draft's handle once posted."""
        self._label: str | None = None
        self._shown = ""
        # Waiting before the first draft means quick answers are sent once, whole, no draft.
        self._last = clock() if first_draft_waits else float("-inf")
        self._paused_until = float("-inf")
        self._broken = False

    async def progress(self, label: str) -> None:
        """Show what the agent is doing (the channel decides whether and how)."""
        self._label = label
        await self._refresh()

    async def delta(self, text: str) -> None:
        """Show more of the answer."""
        self.text += text
        self._label = None
        await self._refresh()

    async def _refresh(self) -> None:
        now = self.clock()
        if self._broken or now < self._paused_until or now - self._last < self.interval:
            return
        shown = self.surface.preview(self.text, self._label)
        if not shown.strip() or shown == self._shown:
            return
        self._last = now
        try:
            if self.draft is None:
                self.draft = await self.surface.post(shown)
            else:
                await self.surface.edit(self.draft, shown)
        except RateLimited as exc:
            self._paused_until = self.clock() + exc.retry_after
            return
        except ChannelError as exc:
            # Only the live preview stops; finish() still delivers the answer.
            log.warning("stopped streaming on %s: %s", self.surface.where, exc)
            self._broken = True
            return
        self._shown, self._last = shown, self.clock()

    async def finish(self, msg: OutboundMessage) -> Receipt:
        """Deliver the final answer: into the draft when there is one, else as a new message."""
        wait = self._paused_until - self.clock()
        if wait > 0:
            await asyncio.sleep(wait)  # the Retry-After the channel asked for
        if self.draft is None:
            return await self.surface.send(msg)
        try:
            return await self.surface.replace(self.draft, msg)
        except Unreachable:
            raise  # a fresh message would fail the same way; dispatch records it
        except ChannelError as exc:
            # A repeated first part is better than a lost answer.
            log.warning("could not finish the draft on %s (%s); sent anew", self.surface.where, exc)
            return await self.surface.send(msg)

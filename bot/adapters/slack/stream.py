"""Streaming an answer into Slack: post a first message, then ``chat.update`` it, throttled.

``chat.update`` is a Tier 3 method (about 50 calls a minute per workspace), so one answer
updates at most once per ``interval`` seconds; a 429 pauses the updates for its Retry-After
instead of holding up the agent. The final text is always written by ``finish``.
"""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import Awaitable, Callable
from typing import Any

from bot.adapters.slack.api import SlackCalls
from bot.adapters.slack.format import preview, render
from bot.errors import ChannelError, RateLimited
from bot.messages import Address, OutboundMessage, Receipt

Post = Callable[..., Awaitable[Any]]


class SlackStream:
    """Renders one answer as it streams (the ``ReplyStream`` port)."""

    def __init__(
        self,
        *,
        address: Address,
        calls: SlackCalls,
        post: Post,
        update: Post,
        send: Callable[[OutboundMessage], Awaitable[Receipt]],
        interval: float,
    ) -> None:
        self.address = address
        self.calls = calls
        self._post = post
        self._update = update
        self._send = send
        self.interval = interval
        self._text = ""
        self._label: str | None = None
        self._ts: str | None = None
        self._channel = address.chat_id
        self._shown = ""
        self._last = 0.0
        self._paused_until = 0.0
        self._broken = False

    async def progress(self, label: str) -> None:
        """Show what the agent is doing (``_Searching your notes…_``) under the text so far."""
        self._label = label
        await self._refresh()

    async def delta(self, text: str) -> None:
        """Show more of the answer."""
        self._text += text
        self._label = None
        await self._refresh()

    async def _refresh(self) -> None:
        now = time.monotonic()
        if self._broken or now < self._paused_until:
            return
        if self._ts is not None and now - self._last < self.interval:
            return
        shown = preview(self._text, self._label)
        if shown == self._shown:
            return
        try:
            if self._ts is None:
                resp = await self.calls.once(
                    "chat.postMessage", lambda: self._post(text=shown, **self._thread())
                )
                self._ts, self._channel = str(resp["ts"]), str(resp["channel"])
            else:
                ts = self._ts
                await self.calls.once(
                    "chat.update",
                    lambda: self._update(channel=self._channel, ts=ts, text=shown),
                )
        except RateLimited as exc:
            self._paused_until = time.monotonic() + exc.retry_after
            return
        except ChannelError:
            # Stop streaming; finish() makes one clean attempt and reports the failure.
            self._broken = True
            raise
        self._shown, self._last = shown, time.monotonic()

    def _thread(self) -> dict[str, Any]:
        return {"thread_ts": self.address.thread_id} if self.address.thread_id else {}

    async def finish(self, msg: OutboundMessage) -> Receipt:
        """Write the final answer: update the streamed message, post any overflow after it."""
        wait = self._paused_until - time.monotonic()
        if wait > 0:
            await asyncio.sleep(wait)  # the Retry-After Slack asked for
        if self._ts is None:
            return await self._send(msg)
        parts = render(msg)
        head, ts = parts[0], self._ts
        update: dict[str, Any] = {"channel": self._channel, "ts": ts, "text": head.text}
        if head.blocks is not None:
            update["blocks"] = head.blocks
        await self.calls.call("chat.update", lambda: self._update(**update))
        for part in parts[1:]:
            kwargs: dict[str, Any] = {"text": part.text, **self._thread()}
            if part.blocks is not None:
                kwargs["blocks"] = part.blocks
            await self.calls.call("chat.postMessage", functools.partial(self._post, **kwargs))
        return Receipt("slack", ts, self._channel)

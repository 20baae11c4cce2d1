"""Streaming an answer into Slack: the wire calls behind the shared ``DraftStream``.

``chat.update`` is a Tier 3 method (about 50 calls a minute per workspace), so one answer
updates at most once per ``interval`` seconds; a 429 pauses the updates for its Retry-After
instead of holding up the agent (``bot/adapters/draft.py`` does both).
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from typing import Any

from bot.adapters.slack.api import SlackCalls
from bot.adapters.slack.format import preview, render
from bot.messages import Address, OutboundMessage, Receipt

Post = Callable[..., Awaitable[Any]]


class SlackDraft:
    """Slack's draft surface for one answer (``DraftStream`` does the throttling)."""

    def __init__(
        self,
        *,
        address: Address,
        calls: SlackCalls,
        post: Post,
        update: Post,
        send: Callable[[OutboundMessage], Awaitable[Receipt]],
    ) -> None:
        self.address = address
        self.calls = calls
        self._post = post
        self._update = update
        self._send = send
        self._channel = address.chat_id
        self.where = f"slack channel {address.chat_id}"

    def preview(self, text: str, label: str | None) -> str:
        """The text so far in mrkdwn, an ellipsis, and what the agent is doing."""
        return preview(text, label)

    async def post(self, text: str) -> str:
        """Post the draft (no retries: a missed preview is not worth a wait); its ``ts``."""
        resp = await self.calls.once(
            "chat.postMessage", lambda: self._post(text=text, **self._thread())
        )
        self._channel = str(resp["channel"])
        return str(resp["ts"])

    async def edit(self, draft: str, text: str) -> None:
        """``chat.update`` the draft."""
        await self.calls.once(
            "chat.update", lambda: self._update(channel=self._channel, ts=draft, text=text)
        )

    async def replace(self, draft: str, msg: OutboundMessage) -> Receipt:
        """Update the draft into the first part, post any overflow after it (with retries)."""
        parts = render(msg)
        head = parts[0]
        update: dict[str, Any] = {"channel": self._channel, "ts": draft, "text": head.text}
        if head.blocks is not None:
            update["blocks"] = head.blocks
        await self.calls.call("chat.update", lambda: self._update(**update))
        for part in parts[1:]:
            kwargs: dict[str, Any] = {"text": part.text, **self._thread()}
            if part.blocks is not None:
                kwargs["blocks"] = part.blocks
            await self.calls.call("chat.postMessage", functools.partial(self._post, **kwargs))
        return Receipt("slack", draft, self._channel)

    async def send(self, msg: OutboundMessage) -> Receipt:
        """The whole answer as new messages."""
        return await self._send(msg)

    def _thread(self) -> dict[str, Any]:
        return {"thread_ts": self.address.thread_id} if self.address.thread_id else {}

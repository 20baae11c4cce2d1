"""A local terminal channel: the person at the console is the owner. Try lifebot with no tokens."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import sys
import threading
from typing import TextIO

from bot.adapters.base import MessageHandler
from bot.clock import Clock
from bot.messages import Address, InboundMessage, OutboundMessage, Receipt

log = logging.getLogger(__name__)

CONSOLE_ACCOUNT = "local"
"""The console channel's one account."""
CONSOLE_SENDER = "owner"
"""The console's one sender: the owner at this terminal."""
ADDRESS = Address("console", CONSOLE_ACCOUNT, "console")
PROMPT = "you> "


class ConsoleStream:
    """Prints an answer as it streams."""

    def __init__(self, console: ConsoleAdapter) -> None:
        self.console = console
        self.started = False

    def _begin(self) -> None:
        if not self.started:
            self.console.write("lifebot> ")
            self.started = True

    async def progress(self, label: str) -> None:
        """Show a tool's progress label on its own line."""
        self.console.write(f"  ({label})\n")

    async def delta(self, text: str) -> None:
        """Print more of the answer."""
        self._begin()
        self.console.write(text)

    async def finish(self, msg: OutboundMessage) -> Receipt:
        """End the answer (printing it whole if nothing streamed)."""
        if not self.started:
            return await self.console.send(msg)
        self.console.write("\n" + _buttons_and_sources(msg))
        self.console.prompt()
        return Receipt("console", str(next(self.console.ids)), ADDRESS.chat_id)


def _buttons_and_sources(msg: OutboundMessage) -> str:
    lines = [
        f"  [{c.index}] {c.kind} {c.ts:%Y-%m-%d %H:%M}" if c.ts else f"  [{c.index}] {c.kind}"
        for c in msg.citations
    ]
    if msg.buttons:
        lines.append("  buttons: " + "  ".join(f"[{b.label}] (type {b.data})" for b in msg.buttons))
    return "".join(line + "\n" for line in lines)


class ConsoleAdapter:
    """Reads lines from a terminal (or any text stream) and prints replies."""

    name = "console"

    def __init__(
        self, clock: Clock, stdin: TextIO | None = None, stdout: TextIO | None = None
    ) -> None:
        self.clock = clock
        self.stdin = stdin or sys.stdin
        self.stdout = stdout or sys.stdout
        self.ids = itertools.count(1)
        self._msg_ids = itertools.count(1)
        self._queue: asyncio.Queue[str | None] = asyncio.Queue()
        self._reader: asyncio.Task[None] | None = None
        self.finished = asyncio.Event()
        """Set when reading stops: /quit, the end of the input, or Ctrl-C."""
        self.quit_asked = False
        """True when the person typed /quit (not merely the end of the input)."""
        self.interactive = self.stdin.isatty()

    def write(self, text: str) -> None:
        """Write to the terminal at once."""
        self.stdout.write(text)
        self.stdout.flush()

    def prompt(self) -> None:
        """Show the input prompt when a person is typing."""
        if self.interactive:
            self.write(PROMPT)

    async def start(self, on_message: MessageHandler) -> None:
        """Start reading lines; each line is one message to the dispatcher."""
        loop = asyncio.get_running_loop()

        def pump() -> None:
            # A daemon thread, so a blocked readline never holds up shutdown.
            for line in self.stdin:
                loop.call_soon_threadsafe(self._queue.put_nowait, line)
            loop.call_soon_threadsafe(self._queue.put_nowait, None)

        threading.Thread(target=pump, name="console-stdin", daemon=True).start()
        self._reader = asyncio.create_task(self._consume(on_message), name="console-reader")
        self.prompt()

    async def _consume(self, on_message: MessageHandler) -> None:
        try:
            while (line := await self._queue.get()) is not None:
                text = line.strip()
                if not text:
                    self.prompt()
                    continue
                if text in {"/quit", "/exit"}:
                    self.quit_asked = True
                    break
                await on_message(
                    InboundMessage(
                        address=ADDRESS,
                        sender_id=CONSOLE_SENDER,
                        message_id=f"{self.clock.now().timestamp():.6f}-{next(self._msg_ids)}",
                        text=text,
                        received_at=self.clock.now(),
                        sender_name="owner",
                    )
                )
        finally:
            self.finished.set()

    def open_stream(self, address: Address, reply_to: str | None) -> ConsoleStream:
        """Stream an answer to the terminal."""
        return ConsoleStream(self)

    async def send(self, msg: OutboundMessage) -> Receipt:
        """Print a whole message."""
        self.write(f"lifebot> {msg.text}\n{_buttons_and_sources(msg)}")
        self.prompt()
        return Receipt("console", str(next(self.ids)), ADDRESS.chat_id)

    async def stop(self) -> None:
        """Stop reading."""
        if self._reader is not None and not self._reader.done():
            self._reader.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._reader

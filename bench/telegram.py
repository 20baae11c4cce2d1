"""Telegram: time from an incoming update to the reply request, against the console.

Both channels drive the same app (same database, agent and instant fake LLM) in one run. For
Telegram the clock starts when the fake Bot API makes the update available to the waiting
long poll and stops when the fake receives the sendMessage carrying the reply: it covers the
getUpdates answer, PTB's parsing, the adapter, dispatch, the agent turn and the HTTP send. For
the console it starts when the line is written to the adapter's input and stops when the
reply's last line is printed. The difference is what the Telegram channel itself costs.

Run: .venv/bin/python -m bench.telegram
"""

from __future__ import annotations

import asyncio
import io
import os
import tempfile
import time
from pathlib import Path

from bench._stats import ms, pct, summary
from bot.adapters.console import ConsoleAdapter
from bot.app.build import App, build_app, start_app, start_channels
from bot.config import Settings
from bot.dispatch.identity import ensure_console_owner
from storage.repos.users import UserRepo
from tests.fakes.llm import FakeLLM, Step
from tests.fakes.telegram_api import BOT_ID, TOKEN, FakeTelegram

MESSAGES = 200
WARM_UP = 20
CHAT = 555


class TimedOutput(io.StringIO):
    """The console's stdout: notes when each reply's last line is printed."""

    def __init__(self) -> None:
        super().__init__()
        self.buffer_text = ""
        self.times: list[float] = []
        self.replied = asyncio.Event()

    def write(self, text: str) -> int:
        """Collect text; a newline after "lifebot> " ends a reply."""
        self.buffer_text += text
        if "lifebot> " in self.buffer_text and self.buffer_text.endswith("\n"):
            self.times.append(time.perf_counter())
            self.buffer_text = ""
            self.replied.set()
        return len(text)


async def start(tmp: Path, llm: FakeLLM, tg: FakeTelegram) -> App:
    settings = Settings(
        _env_file=None,
        data_dir=tmp,
        openai_base_url=llm.url,
        openai_api_key="bench",
        llm_model="fake-smart",
        llm_fast_model="fake-fast",
        telegram_bot_token=TOKEN,
        telegram_api_url=tg.api_url,
        telegram_poll_timeout=10,
        jobs_enabled=False,
        log_level="WARNING",
    )
    app = build_app(settings)
    await start_app(app)
    async with app.db.session() as s:
        user = await UserRepo(s).create("Ana")
        assert user.id is not None
        await UserRepo(s).add_identity(
            user.id, "telegram", str(BOT_ID), str(CHAT), chat_id=str(CHAT)
        )
        await ensure_console_owner(s, "UTC")
    await start_channels(app)
    return app


async def telegram_turn(tg: FakeTelegram) -> float:
    before = len(tg.calls_to("sendMessage"))
    update_id = await tg.send_text(CHAT, "hi")
    await tg.wait_for(lambda: len(tg.calls_to("sendMessage")) > before)
    return tg.calls_to("sendMessage")[before].at - tg.pushed_at[update_id]


async def console_turn(write_fd: int, out: TimedOutput) -> float:
    out.replied.clear()
    began = time.perf_counter()
    os.write(write_fd, b"hi\n")
    await asyncio.wait_for(out.replied.wait(), 10)
    return out.times[-1] - began


async def measure() -> None:
    llm, tg = FakeLLM(), FakeTelegram()
    llm.default = lambda _body: Step(text="Hello!")
    await llm.start()
    await tg.start()
    read_fd, write_fd = os.pipe()
    out = TimedOutput()
    with tempfile.TemporaryDirectory() as tmp, open(read_fd, encoding="utf-8") as stdin:  # noqa: ASYNC230  (a pipe end, not a disk file)
        app = await start(Path(tmp), llm, tg)
        console = ConsoleAdapter(app.clock, stdin=stdin, stdout=out)
        app.add_channel(console)
        await console.start(app.dispatcher.handle)
        try:
            for _ in range(WARM_UP):
                await telegram_turn(tg)
                await console_turn(write_fd, out)
            via_telegram: list[float] = []
            via_console: list[float] = []
            for _ in range(MESSAGES):  # interleaved, so both see the same conditions
                via_telegram.append(await telegram_turn(tg))
                via_console.append(await console_turn(write_fd, out))
        finally:
            os.close(write_fd)
            await app.close()
            await tg.stop()
            await llm.stop()
    print(f"update -> reply request, {MESSAGES} greetings each, instant fake LLM, SQLite")
    print(f"  telegram (PTB, long polling)  {summary(via_telegram)}")
    print(f"  console (same agent turn)     {summary(via_console)}")
    extra = pct(via_telegram, 50) - pct(via_console, 50)
    ratio = pct(via_telegram, 50) / pct(via_console, 50)
    print(f"  telegram costs {ms(extra)} more at p50 (ratio {ratio:.2f}x the console)")


def main() -> None:
    asyncio.run(measure())


if __name__ == "__main__":
    main()

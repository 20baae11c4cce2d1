"""The one keyed lock dispatch and the Telegram update processor share."""

from __future__ import annotations

import asyncio

import pytest

from bot.locks import ConversationLock, KeyedLocks


async def test_one_key_runs_in_order_other_keys_run_alongside() -> None:
    """Holders of one key queue in arrival order; another key never waits for them."""
    locks = KeyedLocks[int]()
    port: ConversationLock[int] = locks
    log: list[str] = []
    gate = asyncio.Event()

    async def work(key: int, name: str, wait: bool) -> None:
        async with port.hold(key):
            log.append(f"{name}+")
            if wait:
                await gate.wait()
            log.append(f"{name}-")

    first = asyncio.create_task(work(1, "a", wait=True))
    second = asyncio.create_task(work(1, "b", wait=False))
    await asyncio.sleep(0)
    await work(2, "other", wait=False)  # finishes while key 1 is still held
    assert log == ["a+", "other+", "other-"]
    gate.set()
    await asyncio.gather(first, second)
    assert log == ["a+", "other+", "other-", "a-", "b+", "b-"]


async def test_a_released_key_is_forgotten_even_after_an_error() -> None:
    """The table never grows with the number of chats, and a failing body frees the key."""
    locks = KeyedLocks[str]()

    async def failing() -> None:
        async with locks.hold("chat"):
            assert len(locks) == 1
            raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        await failing()
    assert len(locks) == 0
    async with locks.hold("chat"):  # not left locked by the error
        pass
    assert len(locks) == 0

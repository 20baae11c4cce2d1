"""The LLM fakes never answer what nobody scripted: such calls, and unused steps, fail the test."""

from __future__ import annotations

import pytest

from bot.agent.llm import ChatResult, OpenAILLM
from bot.errors import LLMRequestError
from tests.fakes.llm import FakeLLM, say
from tests.fakes.scripted_llm import ScriptedLLM, text, tools


async def test_scripted_llm_streams_its_steps_and_fails_beyond_them() -> None:
    llm = ScriptedLLM(text("Hello there", chunk=5), tools("lookup", {"what": "x"}))
    items = [item async for item in llm.stream([{"role": "user", "content": "hi"}])]
    assert items[:-1] == ["Hello", " ther", "e"]
    assert isinstance(items[-1], ChatResult) and items[-1].text == "Hello there"
    [result] = [item async for item in llm.stream([{"role": "user", "content": "go"}])]
    assert isinstance(result, ChatResult)
    assert [(c.name, c.arguments) for c in result.tool_calls] == [("lookup", '{"what": "x"}')]

    with pytest.raises(AssertionError, match="unscripted call #3"):
        await llm.complete([{"role": "user", "content": "one more"}], fast=True)
    with pytest.raises(AssertionError, match="unscripted call #3: complete\\(fast=True\\)"):
        llm.check()


async def test_scripted_llm_fails_on_unused_steps_and_tools_for_complete() -> None:
    llm = ScriptedLLM(tools("lookup"), text("never asked for"))
    with pytest.raises(AssertionError, match="cannot propose tools"):
        await llm.complete([{"role": "user", "content": "classify"}])
    with pytest.raises(AssertionError, match="scripted step never used: Reply\\(deltas=\\('never"):
        llm.check()


async def test_loopback_llm_refuses_an_unscripted_call_and_names_it() -> None:
    fake = FakeLLM()
    await fake.start()
    client = OpenAILLM(
        base_url=fake.url, api_key="k", model="fake-smart", fast_model="fake-fast", max_retries=1
    )
    try:
        fake.add(say("scripted"))
        assert await client.complete([{"role": "user", "content": "first"}]) == "scripted"
        with pytest.raises(LLMRequestError):
            await client.complete([{"role": "user", "content": "nobody scripted me"}], fast=True)
        fake.add(say("left over"))
    finally:
        await client.close()
        await fake.stop()
    with pytest.raises(AssertionError) as failure:
        fake.check()
    message = str(failure.value)
    assert "unscripted call #2: model='fake-fast'" in message
    assert "last='nobody scripted me'" in message
    assert "scripted step never used" in message
    assert len(fake.chat_requests) == 2  # a permanent error: the client did not retry it

"""The openai-based LLM client against the loopback fake: streaming, retries, failures."""

from __future__ import annotations

import pytest

from bot.agent.llm import ChatResult, OpenAILLM
from bot.errors import LLMNotConfigured, LLMRequestError, LLMUnavailable
from tests.fakes.llm import FakeLLM, call, fail, hang, say

_clients: list[OpenAILLM] = []


@pytest.fixture(autouse=True)
async def _close_clients():
    yield
    while _clients:
        await _clients.pop().close()


def client(fake: FakeLLM, *, timeout: float = 5.0, retries: int = 2) -> OpenAILLM:
    llm = OpenAILLM(
        base_url=fake.url,
        api_key="k",
        model="smart",
        fast_model="fast",
        timeout=timeout,
        max_retries=retries,
        base_delay=0.01,
    )
    _clients.append(llm)
    return llm


async def collect(llm: OpenAILLM, **kwargs) -> tuple[list[str], ChatResult]:
    deltas: list[str] = []
    result = ChatResult()
    async for item in llm.stream([{"role": "user", "content": "hi"}], **kwargs):
        if isinstance(item, ChatResult):
            result = item
        else:
            deltas.append(item)
    return deltas, result


async def test_streams_text_in_pieces(fake_llm: FakeLLM) -> None:
    fake_llm.add(say("The quick brown fox jumps over the lazy dog."))
    deltas, result = await collect(client(fake_llm))
    assert len(deltas) > 1
    assert "".join(deltas) == result.text == "The quick brown fox jumps over the lazy dog."
    assert fake_llm.chat_requests[0]["model"] == "smart"


async def test_the_api_key_goes_with_every_streamed_and_plain_call(fake_llm: FakeLLM) -> None:
    # chat requests go through the client's own post: its bearer auth must come along
    fake_llm.add(say("hello"), say('{"route": "chat"}'))
    llm = client(fake_llm)
    await collect(llm)
    await llm.complete([{"role": "user", "content": "x"}], fast=True, json_mode=True)
    assert fake_llm.keys == ["Bearer k", "Bearer k"]


async def test_streamed_tool_call_arguments_are_reassembled(fake_llm: FakeLLM) -> None:
    fake_llm.add(call("create_task", {"title": "water the plants", "due": None}))
    _, result = await collect(client(fake_llm), tools=[])
    [tc] = result.tool_calls
    assert tc.name == "create_task"
    assert tc.arguments == '{"title": "water the plants", "due": null}'


async def test_429_is_retried_after_the_servers_retry_after(fake_llm: FakeLLM) -> None:
    fake_llm.add(fail(429, retry_after=0.3), say("ok now"))
    _, result = await collect(client(fake_llm))
    assert result.text == "ok now"
    gap = fake_llm.times[1] - fake_llm.times[0]
    assert gap >= 0.29  # Retry-After honoured, not the 0.01 s backoff


async def test_500s_are_retried_then_reported_as_unavailable(fake_llm: FakeLLM) -> None:
    fake_llm.add(fail(500), fail(502), fail(503))
    with pytest.raises(LLMUnavailable, match="failed"):
        await collect(client(fake_llm, retries=2))
    assert len(fake_llm.chat_requests) == 3


async def test_a_hanging_server_times_out_as_unavailable(fake_llm: FakeLLM) -> None:
    fake_llm.add(hang(1.5), hang(1.5))
    with pytest.raises(LLMUnavailable, match="did not answer in time"):
        await collect(client(fake_llm, timeout=0.3, retries=1))


async def test_bad_key_and_unknown_model_are_not_retried(fake_llm: FakeLLM) -> None:
    fake_llm.add(fail(401))
    with pytest.raises(LLMRequestError, match="OPENAI_API_KEY"):
        await collect(client(fake_llm))
    fake_llm.add(fail(404))
    with pytest.raises(LLMRequestError, match="LIFEBOT_LLM_MODEL"):
        await client(fake_llm).complete([{"role": "user", "content": "x"}])
    assert len(fake_llm.chat_requests) == 2


async def test_unconfigured_llm_says_how_to_configure() -> None:
    llm = OpenAILLM(base_url=None, api_key=None, model="m", fast_model="f")
    with pytest.raises(LLMNotConfigured, match="OPENAI_BASE_URL"):
        await llm.complete([{"role": "user", "content": "x"}])
    await llm.close()


async def test_complete_uses_the_fast_model_and_json_mode(fake_llm: FakeLLM) -> None:
    fake_llm.add(say('{"route": "chat"}'))
    text = await client(fake_llm).complete(
        [{"role": "user", "content": "x"}], fast=True, json_mode=True
    )
    assert text == '{"route": "chat"}'
    body = fake_llm.chat_requests[0]
    assert body["model"] == "fast"
    assert body["response_format"] == {"type": "json_object"}

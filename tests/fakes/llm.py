"""A loopback OpenAI-compatible server that each test scripts.

Real ``openai`` client code runs against it: streaming (SSE) and plain chat completions, tool
calls, 429 with Retry-After, 500s, hangs and malformed tool arguments. Every request body is
recorded for assertions.

A call nobody scripted is a test failure, never a placeholder answer: the server answers it with
an HTTP 400 (a permanent error, so the client does not retry it into more noise), records which
request it was, and ``check`` (run by the ``fake_llm`` fixture at teardown) fails the test with
that list, and with any scripted step left unused.
"""

from __future__ import annotations

import asyncio
import hashlib
import itertools
import json
import ssl
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web


@dataclass
class Step:
    """One scripted response."""

    text: str | None = None
    tool_calls: list[tuple[str, str]] = field(default_factory=list)
    """(name, raw JSON arguments) pairs."""
    status: int = 200
    error: Mapping[str, object] | None = None
    """The body's ``error`` object for a failing status (a generic one when None)."""
    retry_after: float | None = None
    hang: float = 0.0
    delay: float = 0.0
    chunk_size: int = 8
    chunk_delay: float = 0.0
    """Seconds between streamed chunks (a slow model, for streaming UIs)."""


def say(text: str, *, delay: float = 0.0) -> Step:
    """Answer with text."""
    return Step(text=text, delay=delay)


def call(name: str, args: dict[str, Any] | str | None = None, *more: tuple[str, Any]) -> Step:
    """Answer with one or more tool calls; ``args`` may be a raw (even malformed) string."""
    calls = [(name, args if isinstance(args, str) else json.dumps(args or {}))]
    calls += [(n, a if isinstance(a, str) else json.dumps(a)) for n, a in more]
    return Step(tool_calls=calls)


def fail(
    status: int, retry_after: float | None = None, error: Mapping[str, object] | None = None
) -> Step:
    """Answer with an HTTP error (``error``: the server's own error object)."""
    return Step(status=status, retry_after=retry_after, error=error)


def hang(seconds: float) -> Step:
    """Do not answer for ``seconds``."""
    return Step(hang=seconds)


Responder = Callable[[dict[str, Any]], Step | None]
"""Answers a request the script does not cover; ``None`` means "not scripted" (a failure)."""


def describe(body: dict[str, Any]) -> str:
    """A short, readable name for one chat request (for failure messages)."""
    messages = body.get("messages") or [{}]
    first = " ".join(str(messages[0].get("content") or "").split())[:60]
    last = " ".join(str(messages[-1].get("content") or "").split())[:80]
    tools = f", {len(body['tools'])} tools" if body.get("tools") else ""
    stream = ", stream" if body.get("stream") else ""
    return f"model={body.get('model')!r}{stream}{tools}; first={first!r}; last={last!r}"


class FakeLLM:
    """The server. ``script`` is consumed in order; ``default`` answers when it is empty."""

    def __init__(self) -> None:
        self.script: list[Step] = []
        self.default: Responder | None = None
        self.problems: list[str] = []
        """Unscripted calls, each named by its request; ``check`` fails on any."""
        self.requests: list[dict[str, Any]] = []
        self.times: list[float] = []
        self.keys: list[str | None] = []
        """The Authorization header of each chat request, in order (None when absent)."""
        self._ids = itertools.count(1)
        self._runner: web.AppRunner | None = None
        self.url = ""

    def add(self, *steps: Step) -> FakeLLM:
        """Queue responses."""
        self.script.extend(steps)
        return self

    @property
    def chat_requests(self) -> list[dict[str, Any]]:
        """Bodies of chat-completion requests, in order."""
        return [r for r in self.requests if "messages" in r]

    async def start(self, tls: ssl.SSLContext | None = None) -> str:
        """Listen on a free loopback port; return the base URL (with /v1).

        ``tls``: serve HTTPS with this server context (the URL is then ``https://``).
        """
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self._chat)
        app.router.add_get("/v1/models", self._models)
        app.router.add_post("/v1/embeddings", self._embeddings)
        # A hung request (``hang``) is the test's leftover once the test is done: stopping the
        # server must not wait out its sleep (aiohttp waits up to a minute by default).
        self._runner = web.AppRunner(app, shutdown_timeout=0.2)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0, ssl_context=tls)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        self.url = f"{'https' if tls else 'http'}://127.0.0.1:{port}/v1"
        return self.url

    async def stop(self) -> None:
        """Shut the server down."""
        if self._runner is not None:
            await self._runner.cleanup()

    def check(self) -> None:
        """Fail when a call was not scripted or a scripted step was never used."""
        problems = list(self.problems)
        problems += [f"scripted step never used: {step}" for step in self.script]
        if problems:
            raise AssertionError("fake LLM:\n  " + "\n  ".join(problems))

    def _next(self, body: dict[str, Any]) -> Step:
        if self.script:
            return self.script.pop(0)
        step = self.default(body) if self.default is not None else None
        if step is not None:
            return step
        self.problems.append(f"unscripted call #{len(self.chat_requests)}: {describe(body)}")
        return Step(status=400)

    async def _models(self, _request: web.Request) -> web.Response:
        return web.json_response(
            {"object": "list", "data": [{"id": "fake-smart", "object": "model"}]}
        )

    async def _embeddings(self, request: web.Request) -> web.Response:
        body = await request.json()
        self.requests.append(body)
        inputs = body["input"] if isinstance(body["input"], list) else [body["input"]]
        data = []
        for i, text in enumerate(inputs):
            digest = hashlib.sha256(str(text).encode()).digest()
            vec = [(b - 128) / 128 for b in digest[:16]]
            data.append({"object": "embedding", "index": i, "embedding": vec})
        return web.json_response({"object": "list", "data": data, "model": body.get("model")})

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        self.requests.append(body)
        self.times.append(time.monotonic())
        self.keys.append(request.headers.get("Authorization"))
        step = self._next(body)
        if step.hang:
            await asyncio.sleep(step.hang)
        if step.delay:
            await asyncio.sleep(step.delay)
        if step.status != 200:
            headers = {}
            if step.retry_after is not None:
                headers["Retry-After"] = str(step.retry_after)
            return web.json_response(
                {"error": step.error or {"message": f"fake error {step.status}", "type": "fake"}},
                status=step.status,
                headers=headers,
            )
        cid = f"chatcmpl-{next(self._ids)}"
        model = body.get("model", "fake")
        if body.get("stream"):
            return await self._stream(request, step, cid, model)
        message: dict[str, Any] = {"role": "assistant", "content": step.text}
        if step.tool_calls:
            message["tool_calls"] = [
                {
                    "id": f"call_{cid}_{i}",
                    "type": "function",
                    "function": {"name": n, "arguments": a},
                }
                for i, (n, a) in enumerate(step.tool_calls)
            ]
        return web.json_response(
            {
                "id": cid,
                "object": "chat.completion",
                "created": int(time.time()),
                "model": model,
                "choices": [
                    {
                        "index": 0,
                        "message": message,
                        "finish_reason": "tool_calls" if step.tool_calls else "stop",
                    }
                ],
            }
        )

    async def _stream(
        self, request: web.Request, step: Step, cid: str, model: str
    ) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)

        async def send(delta: dict[str, Any], finish: str | None = None) -> None:
            chunk = {
                "id": cid,
                "object": "chat.completion.chunk",
                "created": int(time.time()),
                "model": model,
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
            }
            await resp.write(f"data: {json.dumps(chunk)}\n\n".encode())

        await send({"role": "assistant", "content": ""})
        text = step.text or ""
        for i in range(0, len(text), step.chunk_size):
            await send({"content": text[i : i + step.chunk_size]})
            if step.chunk_delay:
                await asyncio.sleep(step.chunk_delay)
        for i, (name, args) in enumerate(step.tool_calls):
            await send(
                {
                    "tool_calls": [
                        {
                            "index": i,
                            "id": f"call_{cid}_{i}",
                            "type": "function",
                            "function": {"name": name, "arguments": ""},
                        }
                    ]
                }
            )
            half = len(args) // 2
            for part in (args[:half], args[half:]):
                await send({"tool_calls": [{"index": i, "function": {"arguments": part}}]})
        await send({}, "tool_calls" if step.tool_calls else "stop")
        await resp.write(b"data: [DONE]\n\n")
        await resp.write_eof()
        return resp

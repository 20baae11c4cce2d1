"""The LLM port and its one implementation on ``openai.AsyncOpenAI``.

Works against any OpenAI-compatible endpoint (OpenAI, Ollama, vLLM, llama.cpp server).
Retries 429, 5xx and timeouts with backoff (honouring Retry-After) through bot.retry; once a
stream has produced text it is never retried, so the user never sees an answer twice.
"""

from __future__ import annotations

import base64
import functools
import json
import logging
import re
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from bot.errors import LLMInputTooLong, LLMNotConfigured, LLMRequestError, LLMUnavailable
from bot.messages import clean_text
from bot.metrics import Counter
from bot.retry import retry_transient
from bot.tls import httpx2_context

if TYPE_CHECKING:
    import openai

log = logging.getLogger(__name__)

LLM_CALLS = Counter(
    "lifebot_llm_calls_total",
    "Calls to the language model, by model (smart or fast).",
    ("model",),
)
LLM_ERRORS = Counter(
    "lifebot_llm_errors_total",
    "Calls to the language model that failed after their retries, by kind: auth, model, "
    "rate_limited, server, rejected, timeout, unreachable.",
    ("kind",),
)


@functools.cache
def _errors() -> tuple[
    tuple[type[Exception], ...], tuple[type[Exception], ...], tuple[type[Exception], ...]
]:
    """(every LLM error, HTTP errors, transport errors), imported on first use.

    ``openai`` takes most of a second to import, so commands that never call the model
    (``lifebot --help``, ``memory search``) do not pay for it.
    """
    import httpx  # noqa: PLC0415
    import openai  # noqa: PLC0415

    http: tuple[type[Exception], ...] = (httpx.HTTPError,)
    transport: tuple[type[Exception], ...] = (httpx.TransportError,)
    try:  # openai 3.x moved to httpx2; 1.x and 2.x use httpx. Catch whichever is in use.
        import httpx2  # noqa: PLC0415

        http = (*http, httpx2.HTTPError)
        transport = (*transport, httpx2.TransportError)
    except ImportError:  # pragma: no cover - depends on the installed openai
        pass
    return (openai.OpenAIError, *http), http, transport


@dataclass(slots=True)
class ToolCall:
    """A tool call the model proposed; arguments are raw JSON text until validated."""

    id: str
    name: str
    arguments: str

    def to_openai(self) -> dict[str, Any]:
        """The wire form used in an assistant message's ``tool_calls``."""
        return {
            "id": self.id,
            "type": "function",
            "function": {"name": self.name, "arguments": self.arguments},
        }


@dataclass(slots=True)
class ChatResult:
    """What one model call produced."""

    text: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    finish_reason: str | None = None


class LLM(Protocol):
    """The port the agent talks to."""

    def stream(
        self,
        messages: list[dict[str, Any]],
        *,
        tools: list[dict[str, Any]] | None = None,
        fast: bool = False,
    ) -> AsyncIterator[str | ChatResult]:
        """Yield text deltas as they arrive, then exactly one ChatResult."""
        ...

    async def complete(
        self, messages: list[dict[str, Any]], *, fast: bool = False, json_mode: bool = False
    ) -> str:
        """One non-streaming call without tools; returns the text."""
        ...


def _retry_after(exc: openai.APIStatusError) -> float:
    try:
        value = exc.response.headers.get("retry-after")
        return float(value) if value is not None else 0.0
    except (TypeError, ValueError):
        return 0.0


def classify_openai_error(exc: BaseException) -> float | None:
    """Transient (retry, with a delay hint) or permanent (None)."""
    import openai  # noqa: PLC0415

    transport = _errors()[2]
    if isinstance(exc, openai.RateLimitError):
        return _retry_after(exc)
    if isinstance(exc, openai.APIStatusError):
        return _retry_after(exc) if exc.status_code >= 500 else None
    if isinstance(exc, (openai.APITimeoutError, openai.APIConnectionError, *transport)):
        return 0.0
    return None


def error_kind(exc: BaseException) -> str:
    """What kind of failure an openai/httpx error is (the metric's ``kind`` label)."""
    import openai  # noqa: PLC0415

    kinds: tuple[tuple[type[BaseException], str], ...] = (
        (openai.AuthenticationError, "auth"),
        (openai.NotFoundError, "model"),
        (openai.RateLimitError, "rate_limited"),
        (openai.APITimeoutError, "timeout"),
    )
    for kind, name in kinds:
        if isinstance(exc, kind):
            return name
    if isinstance(exc, openai.APIStatusError):
        return "server" if exc.status_code >= 500 else "rejected"
    return "unreachable"


_OVER_CONTEXT = re.compile(
    r"context_length_exceeded|exceed_context_size|maximum context length|context (?:size|window|"
    r"length)|too many tokens|input is too long|prompt is too long",
    re.IGNORECASE,
)
"""How servers say a request is longer than the model's window: OpenAI's code
``context_length_exceeded``, llama.cpp's ``exceed_context_size_error`` ("request (4476 tokens)
exceeds the available context size"), vLLM's "This model's maximum context length is ..."."""


def _over_context(exc: Any) -> bool:
    """Whether a refused request was refused for its length (400 or 413 with such words)."""
    if exc.status_code not in (400, 413):
        return False
    body = exc.body
    said = " ".join(str(v) for v in body.values()) if isinstance(body, dict) else str(body or "")
    return bool(_OVER_CONTEXT.search(f"{said} {exc.message}"))


def translate_openai_error(exc: BaseException, base_url: str) -> Exception:  # noqa: PLR0911  (one plain message per error kind reads best as a ladder)
    """Turn an openai/httpx error into lifebot's error tree with plain words (and count it)."""
    import openai  # noqa: PLC0415

    LLM_ERRORS.inc(error_kind(exc))
    if isinstance(exc, openai.AuthenticationError):
        return LLMRequestError(
            f"the LLM endpoint at {base_url} refused the API key (401): check OPENAI_API_KEY"
        )
    if isinstance(exc, openai.NotFoundError):
        return LLMRequestError(
            f"the LLM endpoint at {base_url} does not know that model (404): check "
            "LIFEBOT_LLM_MODEL and LIFEBOT_LLM_FAST_MODEL"
        )
    if isinstance(exc, openai.RateLimitError):
        return LLMUnavailable(
            f"the LLM endpoint at {base_url} is rate limiting us", retry_after=_retry_after(exc)
        )
    if isinstance(exc, openai.APIStatusError):
        if exc.status_code >= 500:
            return LLMUnavailable(f"the LLM endpoint at {base_url} failed ({exc.status_code})")
        if _over_context(exc):
            return LLMInputTooLong(
                f"the model at {base_url} cannot read that much at once ({exc.status_code})"
            )
        return LLMRequestError(
            f"the LLM endpoint at {base_url} rejected the request ({exc.status_code})"
        )
    if isinstance(exc, openai.APITimeoutError):
        return LLMUnavailable(f"the LLM endpoint at {base_url} did not answer in time")
    return LLMUnavailable(f"cannot reach the LLM endpoint at {base_url}")


CHAT_PATH = "/chat/completions"
BEARER: Any = {"security": {"bearer_auth": True}}
"""The request options ``chat.completions.create`` gives the client (the API key's bearer auth).

Chat requests go through the client's own ``post`` (the SDK's documented way to a request it
does not type): messages and tools are plain JSON already, and the answer is read as the JSON
the server sent. ``create`` walks its typed parameters (about 40, most omitted) on every
request to convert them (4 ms for a 21-message history with our 24 tools, had they been
passed typed rather than as ``extra_body``), then builds typed models of every streamed chunk
that are read once here and thrown away. The client, its connection pool, SSE reading, error
events, timeouts and HTTP errors stay the SDK's.
"""


class OpenAILLM:
    """LLM on the ``openai`` client; one instance per process."""

    def __init__(
        self,
        *,
        base_url: str | None,
        api_key: str | None,
        model: str,
        fast_model: str,
        timeout: float = 30.0,
        max_retries: int = 3,
        base_delay: float = 0.5,
    ) -> None:
        self.configured = bool(base_url or api_key)
        self.base_url = base_url or "https://api.openai.com/v1"
        self.model = model
        self.fast_model = fast_model
        self.max_retries = max_retries
        self.base_delay = base_delay
        # Retries are ours (one helper, Retry-After honoured), so the SDK's own are off.
        self._api_key = api_key or "not-needed"
        self._timeout = timeout
        self._client: openai.AsyncOpenAI | None = None

    @property
    def client(self) -> openai.AsyncOpenAI:
        """The SDK client, made on first use (importing ``openai`` is slow)."""
        if self._client is None:
            import openai  # noqa: PLC0415

            self._client = openai.AsyncOpenAI(
                base_url=self.base_url,
                api_key=self._api_key,
                timeout=self._timeout,
                max_retries=0,
                # The SDK's aiohttp transport: its HTTP parser is C where httpx's is Python,
                # about a sixth of lifebot's CPU per message went into the HTTP client.
                http_client=openai.DefaultAioHttpClient(
                    timeout=self._timeout, verify=httpx2_context()
                ),
            )
        return self._client

    def _check(self) -> None:
        if not self.configured:
            raise LLMNotConfigured(
                "no language model is configured: set OPENAI_API_KEY (OpenAI) or "
                "OPENAI_BASE_URL (Ollama, vLLM, llama.cpp server), then restart lifebot"
            )

    async def stream(
        self,
        messages: list[dict[str, Any]],
        *,
        tools: list[dict[str, Any]] | None = None,
        fast: bool = False,
    ) -> AsyncIterator[str | ChatResult]:
        """Stream one chat completion: text deltas, then the ChatResult."""
        self._check()
        LLM_CALLS.inc("fast" if fast else "smart")
        body: dict[str, Any] = {
            "model": self.fast_model if fast else self.model,
            "stream": True,
            "messages": messages,
        }
        if tools:
            body["tools"] = tools

        async def open_stream() -> Any:
            return await self.client.post(
                CHAT_PATH,
                body=body,
                cast_to=object,
                options=BEARER,
                stream=True,
                stream_cls=_chunk_stream(),
            )

        try:
            stream = await retry_transient(
                open_stream,
                classify=classify_openai_error,
                attempts=self.max_retries,
                base_delay=self.base_delay,
                what="LLM request",
            )
        except _errors()[0] as exc:
            raise translate_openai_error(exc, self.base_url) from exc

        result = ChatResult()
        parts: list[str] = []
        calls: dict[int, dict[str, str]] = {}
        try:
            async for chunk in stream:
                choice = _first_choice(chunk)
                if choice is None:
                    continue
                delta = choice.get("delta") or {}
                # What no database or channel takes (a NUL, half an emoji) is cleaned as it
                # arrives: a model's slip must not fail the turn that stores it.
                content = clean_text(delta.get("content") or "")
                if content:
                    parts.append(content)
                    yield content
                for tc in delta.get("tool_calls") or ():
                    empty = {"id": "", "name": "", "arguments": ""}
                    slot = calls.setdefault(tc.get("index"), empty)
                    if tc.get("id"):
                        slot["id"] = tc["id"]
                    function = tc.get("function")
                    if function is not None:
                        slot["name"] += function.get("name") or ""
                        slot["arguments"] += function.get("arguments") or ""
                if choice.get("finish_reason"):
                    result.finish_reason = choice["finish_reason"]
        except _errors()[0] as exc:
            raise translate_openai_error(exc, self.base_url) from exc
        result.text = "".join(parts)
        result.tool_calls = [
            ToolCall(
                id=clean_text(c["id"]) or f"call_{i}",
                name=clean_text(c["name"]),
                arguments=clean_text(c["arguments"]) or "{}",
            )
            for i, c in sorted(calls.items())
        ]
        yield result

    async def complete(
        self, messages: list[dict[str, Any]], *, fast: bool = False, json_mode: bool = False
    ) -> str:
        """One non-streaming call without tools."""
        self._check()
        LLM_CALLS.inc("fast" if fast else "smart")
        body: dict[str, Any] = {
            "model": self.fast_model if fast else self.model,
            "messages": messages,
        }
        if json_mode:
            body["response_format"] = {"type": "json_object"}

        async def call() -> Any:
            return await self.client.post(CHAT_PATH, body=body, cast_to=object, options=BEARER)

        try:
            resp = await retry_transient(
                call,
                classify=classify_openai_error,
                attempts=self.max_retries,
                base_delay=self.base_delay,
                what="LLM request",
            )
        except _errors()[0] as exc:
            raise translate_openai_error(exc, self.base_url) from exc
        choice = _first_choice(resp)
        message = choice.get("message") if choice is not None else None
        return clean_text(str(message.get("content") or "")) if isinstance(message, dict) else ""

    async def list_models(self) -> list[str]:
        """Model ids the endpoint offers (for ``lifebot doctor``)."""
        self._check()
        try:
            page = await self.client.models.list()
        except _errors()[0] as exc:
            raise translate_openai_error(exc, self.base_url) from exc
        return [m.id for m in page.data]

    async def close(self) -> None:
        """Close the HTTP connection pool (if a request ever opened one)."""
        if self._client is not None:
            await self._client.close()


@functools.cache
def _chunk_stream() -> type[openai.AsyncStream[object]]:
    """The SDK's own stream (its SSE reading, error events and timeouts), yielding plain JSON."""
    import openai  # noqa: PLC0415

    return openai.AsyncStream[object]


def _first_choice(chunk: object) -> dict[str, Any] | None:
    """A streamed chunk's first choice (None for a chunk without one, such as usage)."""
    if not isinstance(chunk, dict):
        return None
    choices = chunk.get("choices")
    if not choices or not isinstance(choices[0], dict):
        return None
    return choices[0]


def parse_json_object(text: str) -> dict[str, Any]:
    """Parse a JSON object from model text, tolerating code fences; {} when it is not one."""
    cleaned = text.strip().removeprefix("```json").removeprefix("```").removesuffix("```")
    try:
        value = json.loads(cleaned)
    except json.JSONDecodeError:
        return {}
    return value if isinstance(value, dict) else {}


def data_url(data: bytes, mime_type: str) -> str:
    """A picture inline, as the ``url`` of an ``image_url`` content part (nothing is fetched)."""
    return f"data:{mime_type};base64,{base64.b64encode(data).decode('ascii')}"


def image_parts(text: str, urls: Sequence[str]) -> list[dict[str, Any]]:
    """A user message's content with pictures (OpenAI content parts): words, then pictures."""
    parts: list[dict[str, Any]] = [{"type": "text", "text": text}]
    parts += [{"type": "image_url", "image_url": {"url": u}} for u in urls]
    return parts

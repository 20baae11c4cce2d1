"""An in-process fake of our own ``LLM`` port (bot/agent/llm.py), scripted step by step.

In the spirit of pydantic-ai's ``FunctionModel``: no HTTP and no ``openai`` client; each model
call takes the next scripted step (streamed text deltas, tool calls, or an error). It fails
loudly instead of guessing: a call beyond the script, or a step that cannot answer that kind of
call (tool calls for ``complete``), raises AssertionError in the code under test and is
recorded; ``check`` (run by the ``scripted_llm`` fixture at teardown) names every such call and
every step left unused.

Use it for agent-loop tests that need no HTTP. Tests of the real OpenAI client path (streaming
over SSE, retries, error translation) use the loopback server in tests/fakes/llm.py.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from bot.agent.llm import ChatResult, ToolCall


@dataclass(frozen=True, slots=True)
class Reply:
    """One scripted model answer."""

    deltas: tuple[str, ...] = ()
    """Text pieces, streamed in order (``complete`` returns them joined)."""
    tool_calls: tuple[tuple[str, str], ...] = ()
    """(name, raw JSON arguments) pairs; only a streamed call may propose tools."""
    error: Exception | None = None
    """Raised instead of answering (e.g. LLMUnavailable)."""
    before: Callable[[], object] | None = None
    """Runs when the step is taken, before anything is yielded: e.g. move a test clock to
    stand for a slow model."""


def text(answer: str, *, chunk: int = 8, before: Callable[[], object] | None = None) -> Reply:
    """Answer ``answer``, streamed in pieces of ``chunk`` characters."""
    parts = tuple(answer[i : i + chunk] for i in range(0, len(answer), chunk))
    return Reply(deltas=parts, before=before)


def tools(
    name: str,
    args: dict[str, Any] | str | None = None,
    *more: tuple[str, Any],
    before: Callable[[], object] | None = None,
) -> Reply:
    """Propose one or more tool calls; ``args`` may be a raw (even malformed) string."""
    calls = [(name, args if isinstance(args, str) else json.dumps(args or {}))]
    calls += [(n, a if isinstance(a, str) else json.dumps(a)) for n, a in more]
    return Reply(tool_calls=tuple(calls), before=before)


def error(exc: Exception) -> Reply:
    """Fail the call with ``exc``."""
    return Reply(error=exc)


@dataclass(slots=True)
class Call:
    """One call the code under test made."""

    kind: Literal["stream", "complete"]
    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]] | None = None
    fast: bool = False
    json_mode: bool = False
    result: ChatResult | None = field(default=None, repr=False)
    """What the fake answered (None when the call failed)."""

    def describe(self) -> str:
        """A short, readable name for the call (for failure messages)."""
        last = " ".join(str(self.messages[-1].get("content") or "").split())[:80]
        offered = f", {len(self.tools)} tools" if self.tools else ""
        return f"{self.kind}(fast={self.fast}{offered}); last={last!r}"


class ScriptedLLM:
    """The fake: ``steps`` are taken in order, one per call, whichever method is called."""

    def __init__(self, *steps: Reply) -> None:
        self.steps: list[Reply] = list(steps)
        self.calls: list[Call] = []
        self.problems: list[str] = []

    def add(self, *steps: Reply) -> ScriptedLLM:
        """Queue more steps."""
        self.steps.extend(steps)
        return self

    def check(self) -> None:
        """Fail when a call was not scripted or a scripted step was never used."""
        problems = [*self.problems, *(f"scripted step never used: {s}" for s in self.steps)]
        if problems:
            raise AssertionError("scripted LLM:\n  " + "\n  ".join(problems))

    def _take(self, call: Call) -> Reply:
        self.calls.append(call)
        if not self.steps:
            return self._fail(f"unscripted call #{len(self.calls)}: {call.describe()}")
        step = self.steps.pop(0)
        if call.kind == "complete" and step.tool_calls:
            return self._fail(f"call #{len(self.calls)} cannot propose tools: {call.describe()}")
        if step.before is not None:
            step.before()
        if step.error is not None:
            raise step.error
        return step

    def _fail(self, problem: str) -> Reply:
        self.problems.append(problem)
        raise AssertionError(f"scripted LLM: {problem}")

    async def stream(
        self,
        messages: list[dict[str, Any]],
        *,
        tools: list[dict[str, Any]] | None = None,
        fast: bool = False,
    ) -> AsyncIterator[str | ChatResult]:
        """Yield the step's text deltas, then its ChatResult (as the real port does)."""
        call = Call("stream", list(messages), tools, fast)
        step = self._take(call)
        for delta in step.deltas:
            yield delta
        call.result = ChatResult(
            text="".join(step.deltas),
            tool_calls=[
                ToolCall(id=f"call_{len(self.calls)}_{i}", name=name, arguments=args)
                for i, (name, args) in enumerate(step.tool_calls)
            ],
            finish_reason="tool_calls" if step.tool_calls else "stop",
        )
        yield call.result

    async def complete(
        self, messages: list[dict[str, Any]], *, fast: bool = False, json_mode: bool = False
    ) -> str:
        """The step's text, whole."""
        call = Call("complete", list(messages), fast=fast, json_mode=json_mode)
        step = self._take(call)
        call.result = ChatResult(text="".join(step.deltas), finish_reason="stop")
        return call.result.text

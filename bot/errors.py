"""One documented error tree for lifebot.

Third-party errors are translated into these at the boundary (``raise ... from exc``) so the
rest of the code only ever catches lifebot errors. Errors carry data, not just text.
"""

from __future__ import annotations


class BotError(Exception):
    """Base of every error lifebot raises on purpose."""


class ConfigError(BotError):
    """The configuration is invalid; the message names the setting and the fix."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = problems
        super().__init__("\n".join(problems))


class StorageError(BotError):
    """The database could not do what was asked."""


class AccessDenied(BotError):
    """A user asked for something they may not see or change."""


class ChannelError(BotError):
    """A channel (Telegram, Slack, device, console) failed to deliver or receive."""


class TransientChannelError(ChannelError):
    """A delivery failure that is worth retrying (network, 5xx)."""


class RateLimited(TransientChannelError):
    """The peer asked us to slow down; ``retry_after`` is in seconds."""

    def __init__(self, message: str, retry_after: float) -> None:
        self.retry_after = retry_after
        super().__init__(message)


class Away(ChannelError):
    """The peer is not connected to this process now (offline, or connected to another)."""


class Unreachable(ChannelError):
    """A permanent failure for one identity: blocked bot, revoked token, not in channel."""


class AgentError(BotError):
    """The agent could not produce an answer."""


class LLMNotConfigured(AgentError):
    """No LLM endpoint or key is configured."""


class LLMUnavailable(AgentError):
    """The LLM endpoint could not be reached or kept failing after retries."""

    def __init__(self, message: str, retry_after: float | None = None) -> None:
        self.retry_after = retry_after
        super().__init__(message)


class LLMRequestError(AgentError):
    """The LLM endpoint refused the request (bad model name, bad key, bad request)."""


class ToolError(AgentError):
    """A tool failed in a way the model should see and may correct (bad argument, not found)."""

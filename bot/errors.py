"""One documented error tree for lifebot: every error we raise on purpose lives here.

Third-party errors are translated into these at the boundary (``raise ... from exc``) so the
rest of the code only ever catches lifebot errors. Errors carry data, not just text.

::

    BotError
    ├── ConfigError              bad settings; names each setting and its fix
    ├── StorageError             the database could not do what was asked
    │   └── NewerDatabaseError       its schema comes from a newer lifebot (carries the fix)
    ├── ChannelError             a channel failed to deliver or receive
    │   ├── TransientChannelError    worth retrying (network, 5xx)
    │   │   └── RateLimited          the peer said slow down (retry_after)
    │   ├── Away                     the peer is not connected here now (a pendant offline)
    │   └── Unreachable              permanent for one identity (blocked, not in channel)
    ├── AgentError               the language model could not answer: dispatch tells the
    │   │                        user "I can't reach my language model" and retries later
    │   ├── LLMNotConfigured
    │   ├── LLMUnavailable           (retry_after)
    │   └── LLMRequestError
    │       └── LLMInputTooLong      longer than the model's window: told to send it in parts,
    │                                not kept for /retry
    ├── ToolError                model-fixable: goes back to the model as a tool result
    ├── EmbeddingError           no vectors now; callers fall back to full-text search
    ├── TranscriptionError       speech could not become text
    ├── SynthesisError           text could not become speech (engine missing or failed)
    ├── ImportFileError          a history file cannot be imported at all
    └── CalendarError            an outside calendar (ICS file or feed, CalDAV) cannot be read
                                 or written; the message says why in plain words

``ToolError`` and ``EmbeddingError`` are deliberately not ``AgentError``: neither means the
language model is unreachable, and neither should ever reach the user as if it did.
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


class NewerDatabaseError(StorageError):
    """The database's schema was written by a newer lifebot than this one."""

    fix = "run the newer lifebot that upgraded it, or restore a backup taken before the upgrade"
    """What the operator can do, in plain words."""


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


class LLMInputTooLong(LLMRequestError):
    """The model cannot read this much at once (its context window): trying again won't help."""


class ToolError(BotError):
    """A tool failed in a way the model should see and may correct (bad argument, not found)."""


class EmbeddingError(BotError):
    """The embedding model could not embed (endpoint down, model files missing)."""


class TranscriptionError(BotError):
    """Speech could not be turned into text (model missing, unreadable audio)."""


class SynthesisError(BotError):
    """Text could not be turned into speech (espeak-ng missing or failing)."""


class ImportFileError(BotError):
    """The file cannot be imported at all (missing, not JSON Lines or a Telegram export)."""


class CalendarError(BotError):
    """An outside calendar (ICS file, ICS feed, CalDAV server) cannot be read or written."""

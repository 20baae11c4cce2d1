"""Calling the Slack Web API: translate slack_sdk errors into our error tree, retry the transient.

Every Web API call of the adapter goes through ``SlackCalls.call`` so a 429 is always waited out
(Retry-After) and a revoked token or a missing channel membership always surfaces as
``Unreachable`` with a cause a person can act on.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp
from slack_sdk.errors import SlackApiError, SlackClientError

from bot.errors import ChannelError, RateLimited, TransientChannelError, Unreachable
from bot.retry import retry_transient

log = logging.getLogger(__name__)

_TOKEN_FIX = "reinstall the Slack app to the workspace and update SLACK_BOT_TOKEN"  # noqa: S105  (advice, not a secret)
UNREACHABLE: dict[str, str] = {
    "invalid_auth": f"Slack rejected the bot token (invalid_auth): {_TOKEN_FIX}",
    "not_authed": f"no bot token was sent (not_authed): {_TOKEN_FIX}",
    "token_revoked": f"the bot token was revoked (token_revoked): {_TOKEN_FIX}",
    "token_expired": f"the bot token expired (token_expired): {_TOKEN_FIX}",
    "account_inactive": f"the bot's account is deactivated (account_inactive): {_TOKEN_FIX}",
    "not_in_channel": (
        "the bot is not a member of that channel (not_in_channel): invite it with "
        "/invite @lifebot, or write to it in a DM"
    ),
    "channel_not_found": (
        "the channel does not exist or the bot cannot see it (channel_not_found)"
    ),
    "is_archived": "the channel is archived (is_archived)",
    "user_disabled": "the Slack user is deactivated (user_disabled)",
    "cannot_dm_bot": "Slack does not allow DMs to this bot user (cannot_dm_bot)",
}
"""Slack errors that will not heal by retrying, with the cause in plain words."""

TRANSIENT = {"internal_error", "fatal_error", "service_unavailable", "request_timeout"}


def error_code(exc: SlackApiError) -> str:
    """The ``error`` field of a failed Web API response."""
    data = getattr(exc.response, "data", None)
    if isinstance(data, dict):
        return str(data.get("error") or "unknown_error")
    return "unknown_error"


def _retry_after(exc: SlackApiError) -> float:
    headers = getattr(exc.response, "headers", None) or {}
    raw = headers.get("Retry-After") or headers.get("retry-after")
    try:
        return max(0.0, float(raw)) if raw is not None else 1.0
    except ValueError:
        return 1.0


def translate(exc: Exception, what: str) -> ChannelError:
    """One slack_sdk / aiohttp failure as a lifebot ChannelError (the caller chains it)."""
    if isinstance(exc, SlackApiError):
        return _translate_api_error(exc, what)
    if isinstance(exc, aiohttp.ClientError | TimeoutError | SlackClientError):
        return TransientChannelError(f"{what} failed: could not reach Slack ({exc})")
    return ChannelError(f"{what} failed: {exc}")


def _translate_api_error(exc: SlackApiError, what: str) -> ChannelError:
    code = error_code(exc)
    status = getattr(exc.response, "status_code", 200)
    if status == 429 or code == "ratelimited":
        delay = _retry_after(exc)
        return RateLimited(f"Slack rate-limited {what}; retry after {delay:g}s", delay)
    if code in UNREACHABLE:
        return Unreachable(f"{what} failed: {UNREACHABLE[code]}")
    if status >= 500 or code in TRANSIENT:
        return TransientChannelError(f"{what} failed: Slack answered {status} {code}")
    if code == "missing_scope":
        return ChannelError(
            f"{what} failed: the Slack app lacks a scope it needs (missing_scope); add the "
            "scopes in docs/slack-app-manifest.yaml and reinstall the app"
        )
    return ChannelError(f"{what} failed: Slack answered {code}")


def classify(exc: BaseException) -> float | None:
    """For ``retry_transient``: Retry-After for 429s, backoff for other transient errors."""
    if isinstance(exc, RateLimited):
        return exc.retry_after
    if isinstance(exc, TransientChannelError):
        return 0.0
    return None


class SlackCalls:
    """Runs Web API calls with translation and retries; one per adapter."""

    def __init__(self, *, attempts: int = 3, max_delay: float = 60.0) -> None:
        self.attempts = attempts
        self.max_delay = max_delay

    async def once(self, what: str, fn: Callable[[], Awaitable[Any]]) -> Any:
        """One attempt; errors translated (used where a retry would hold up the user)."""
        try:
            return await fn()
        except asyncio.CancelledError:
            raise
        except (SlackClientError, aiohttp.ClientError, TimeoutError) as exc:
            err = translate(exc, what)
            if isinstance(err, Unreachable):
                log.error("slack: %s", err)  # noqa: TRY400  (the cause is in the words; no trace)
            raise err from exc

    async def call(self, what: str, fn: Callable[[], Awaitable[Any]]) -> Any:
        """Call with retries of rate limits (honouring Retry-After) and transient failures."""
        return await retry_transient(
            lambda: self.once(what, fn),
            classify=classify,
            attempts=self.attempts,
            max_delay=self.max_delay,
            what=f"slack {what}",
        )

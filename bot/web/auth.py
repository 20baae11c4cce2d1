"""Sign-in without passwords: one-time links, signed session cookies, CSRF tokens, API tokens.

Every secret is 256-bit random and stored only as a hash; the cookie is the session secret plus
an HMAC of it under the server's key, so a forged or truncated cookie never reaches the database.
The key is in the database (``KeySource``): knowing it forges nothing, since a cookie must also
carry a session secret whose hash is stored, and every process on the database shares it.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, Protocol

from bot.clock import Clock
from storage.models import ApiToken, WebSession

LINK_TTL = timedelta(minutes=10)
"""A sign-in link works once, within ten minutes."""
LINK_WINDOW = timedelta(minutes=10)
LINK_LIMIT = 5
"""At most this many links per user per ``LINK_WINDOW``."""
API_PREFIX = "lbk_"
"""API tokens start with this, so a leaked one is easy to recognise."""
READ = "read"
"""A token's scope that may only look: GET requests and read-only MCP tools."""
WRITE = "write"
"""A token's scope that may also change things (POST, PUT, PATCH, DELETE; MCP write tools)."""
SCOPES = (READ, WRITE)


class CredentialStore(Protocol):
    """Where the web's credentials are kept, one transaction per call.

    ``storage.repos.web.Credentials`` is the one implementation; the composition root hands
    it in, so the web room never opens a session on these tables itself.
    """

    async def server_key(self, name: str, fresh: str, now: datetime) -> str:
        """The key kept under ``name`` (``fresh`` is kept the first time)."""
        ...

    async def add_link(
        self,
        user_id: int,
        secret: str,
        now: datetime,
        expires: datetime,
        *,
        since: datetime,
        limit: int,
    ) -> bool:
        """Keep a sign-in link, unless ``limit`` links were made since ``since`` (False)."""
        ...

    async def open_session(
        self, link_secret: str, secret: str, csrf: str, now: datetime, expires: datetime
    ) -> int | None:
        """Spend a link and open a session with it; its user, or None for a spent link."""
        ...

    async def session(self, secret: str, now: datetime) -> WebSession | None:
        """The live session of a secret."""
        ...

    async def end_session(self, session_id: int, now: datetime) -> None:
        """End one session."""
        ...

    async def end_all_sessions(self, user_id: int, now: datetime) -> None:
        """End every session of the user."""
        ...

    async def set_flash(self, session_id: int, value: dict[str, Any] | None) -> None:
        """Keep (or clear) a session's flash value."""
        ...

    async def add_api_token(
        self, user_id: int, name: str, secret: str, now: datetime, scope: str
    ) -> ApiToken:
        """Keep a new API token (its hash)."""
        ...

    async def api_tokens(self, user_id: int) -> list[ApiToken]:
        """The user's live API tokens."""
        ...

    async def revoke_api_token(self, user_id: int, token_id: int, now: datetime) -> bool:
        """Revoke one of the user's API tokens."""
        ...

    async def api_token(self, secret: str, now: datetime) -> ApiToken | None:
        """The live token of a secret."""
        ...

    async def set_ics_token(self, user_id: int, secret: str, now: datetime) -> None:
        """Make ``secret`` the user's calendar feed secret."""
        ...

    async def revoke_ics(self, user_id: int, now: datetime) -> None:
        """Turn the user's calendar feed off."""
        ...

    async def has_ics(self, user_id: int) -> bool:
        """True when the user's calendar feed is on."""
        ...

    async def ics_user(self, secret: str) -> int | None:
        """The user whose feed this secret opens."""
        ...


class KeySource:
    """The cookie-signing key: LIFEBOT_WEB_SECRET, else one kept in the database.

    Every process on the database signs and checks cookies alike, with no setting. Read on
    first use, so building the app does no I/O. An installation that kept its key in
    a file of the data folder (``web_secret``, before issue 28) carries that key into the
    database the first time, so browsers signed in before the upgrade stay signed in.
    """

    NAME = "web_session"
    """The key's name in the ``serverkey`` table."""

    def __init__(
        self, secret: str | None, store: CredentialStore, clock: Clock, old_file: Path
    ) -> None:
        self._secret = secret
        self._store = store
        self._clock = clock
        self._old_file = old_file
        self._key: bytes | None = None
        self._lock = asyncio.Lock()

    async def key(self) -> bytes:
        """The key (generated and kept in the database the first time)."""
        if self._key is None:
            async with self._lock:
                if self._key is None:
                    self._key = await self._load()
        return self._key

    async def _load(self) -> bytes:
        if self._secret:
            return self._secret.encode()
        fresh = await asyncio.to_thread(self._from_old_file) or secrets.token_hex(32)
        kept = await self._store.server_key(self.NAME, fresh, self._clock.now())
        return kept.encode()

    def _from_old_file(self) -> str | None:
        try:
            return self._old_file.read_text().strip() or None
        except FileNotFoundError:
            return None


class LinkRateLimited(Exception):
    """Too many sign-in links asked for in a short time."""


@dataclass(frozen=True, slots=True)
class SignedIn:
    """A new browser session: the cookie value to set and the session's CSRF token."""

    cookie: str
    csrf: str
    user_id: int


class WebAuth:
    """Issues and checks every web credential."""

    def __init__(
        self,
        store: CredentialStore,
        clock: Clock,
        key: KeySource,
        base_url: str,
        session_ttl: timedelta,
    ) -> None:
        self.store = store
        self.clock = clock
        self._key = key
        self.base_url = base_url.rstrip("/")
        self.session_ttl = session_ttl

    # --- links and sessions ----------------------------------------------------------------
    async def issue_link(self, user_id: int) -> str:
        """A one-time sign-in URL; LinkRateLimited after LINK_LIMIT in LINK_WINDOW."""
        now = self.clock.now()
        secret = secrets.token_urlsafe(32)
        kept = await self.store.add_link(
            user_id, secret, now, now + LINK_TTL, since=now - LINK_WINDOW, limit=LINK_LIMIT
        )
        if not kept:
            raise LinkRateLimited
        return f"{self.base_url}/login/{secret}"

    async def sign_in(self, link_secret: str) -> SignedIn | None:
        """Spend a link and open a session; None when the link is unknown, used or expired."""
        now = self.clock.now()
        secret, csrf = secrets.token_urlsafe(32), secrets.token_urlsafe(24)
        user_id = await self.store.open_session(
            link_secret, secret, csrf, now, now + self.session_ttl
        )
        if user_id is None:
            return None
        return SignedIn(f"{secret}.{await self._sign(secret)}", csrf, user_id)

    async def session(self, cookie: str | None) -> WebSession | None:
        """The live session of a cookie, or None (missing, forged, expired or signed out)."""
        if not cookie or "." not in cookie:
            return None
        secret, _, mac = cookie.rpartition(".")
        if not hmac.compare_digest(mac, await self._sign(secret)):
            return None
        return await self.store.session(secret, self.clock.now())

    async def sign_out(self, session_id: int) -> None:
        """End one browser session."""
        await self.store.end_session(session_id, self.clock.now())

    async def sign_out_everywhere(self, user_id: int) -> None:
        """End every browser session of the user."""
        await self.store.end_all_sessions(user_id, self.clock.now())

    async def seal(self, text: str) -> str:
        """A MAC of ``text`` under the server's key, apart from the cookies' (API cursors).

        Every process of a deployment shares the key, so a cursor made by one is good on all.
        """
        return await self._sign("cursor:" + text)

    async def flash(self, session_id: int, value: dict[str, Any] | None) -> None:
        """Keep a form post's result for the session's next page (None: it was shown)."""
        await self.store.set_flash(session_id, value)

    async def page_token(self, nonce: str, link_secret: str) -> str:
        """The token the sign-in page of one link carries, bound to that browser's nonce.

        A page elsewhere cannot make it: it knows neither the server's key nor the nonce,
        which lives in a SameSite=Strict, HttpOnly cookie of the sign-in page's own.
        """
        return await self._sign(f"login:{nonce}:{link_secret}")

    async def _sign(self, secret: str) -> str:
        key = await self._key.key()
        return hmac.new(key, secret.encode(), hashlib.sha256).hexdigest()[:32]

    # --- API tokens --------------------------------------------------------------------------
    async def new_api_token(
        self, user_id: int, name: str, scope: str = READ
    ) -> tuple[ApiToken, str]:
        """A new API token; the clear value is returned once and never stored.

        ``scope`` is READ (the default: it may only look) or WRITE (it may change things too).
        """
        if scope not in SCOPES:
            raise ValueError(f"a token's scope is {' or '.join(SCOPES)}, not {scope!r}")
        secret = API_PREFIX + secrets.token_urlsafe(32)
        row = await self.store.add_api_token(
            user_id, name.strip()[:60] or "token", secret, self.clock.now(), scope
        )
        return row, secret

    async def api_tokens(self, user_id: int) -> list[ApiToken]:
        """The user's live API tokens."""
        return await self.store.api_tokens(user_id)

    async def revoke_api_token(self, user_id: int, token_id: int) -> bool:
        """Revoke one of the user's API tokens."""
        return await self.store.revoke_api_token(user_id, token_id, self.clock.now())

    async def api_token(self, authorization: str | None) -> ApiToken | None:
        """The live token of an ``Authorization: Bearer lbk_...`` header, or None."""
        scheme, _, token = (authorization or "").partition(" ")
        token = token.strip()
        if scheme.lower() != "bearer" or not token.startswith(API_PREFIX):
            return None
        return await self.store.api_token(token, self.clock.now())

    async def api_user(self, authorization: str | None) -> int | None:
        """The user of an ``Authorization: Bearer lbk_...`` header, or None."""
        found = await self.api_token(authorization)
        return found.user_id if found is not None else None

    # --- calendar feed -----------------------------------------------------------------------
    async def new_ics_url(self, user_id: int) -> str:
        """A new calendar subscription URL (the previous one stops working)."""
        secret = secrets.token_urlsafe(32)
        await self.store.set_ics_token(user_id, secret, self.clock.now())
        return f"{self.base_url}/calendar/{secret}.ics"

    async def revoke_ics(self, user_id: int) -> None:
        """Turn the calendar feed off."""
        await self.store.revoke_ics(user_id, self.clock.now())

    async def has_ics(self, user_id: int) -> bool:
        """True when the user's calendar feed is on."""
        return await self.store.has_ics(user_id)

    async def ics_user(self, secret: str) -> int | None:
        """The user whose feed this secret opens."""
        return await self.store.ics_user(secret)

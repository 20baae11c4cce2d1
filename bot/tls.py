"""One TLS context per process for each HTTP library lifebot talks through.

An HTTP client made without one reads the whole certificate store into a new context: about
45 ms of CPU each time. lifebot makes several (the model's client two, Telegram's two, the
embedder's, every MCP server's, every calendar refresh's), so a ``serve`` start paid a
quarter of a second for it and every refresh another 45 ms. A context is safe to share
between clients and tasks; each library's own default is kept, made once, so which
certificates are trusted (and ``SSL_CERT_FILE`` / ``SSL_CERT_DIR``) is exactly as before.
"""

from __future__ import annotations

import functools
import ssl


@functools.cache
def httpx_context() -> ssl.SSLContext:
    """What ``httpx`` verifies servers with by default (certifi's bundle, or SSL_CERT_*)."""
    import httpx  # noqa: PLC0415  # slow to import; only clients that use it ask

    return httpx.create_ssl_context()


@functools.cache
def httpx2_context() -> ssl.SSLContext:
    """What ``httpx2`` (the OpenAI SDK's and MCP's client) trusts by default (system store)."""
    import httpx2  # noqa: PLC0415

    return httpx2.create_ssl_context()

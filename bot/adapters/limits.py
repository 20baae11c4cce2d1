"""The one size rule for files people send (photos, image files, PDFs), on every channel.

Telegram, Slack and the web page's upload form all keep a file only up to the
``image_max_bytes`` setting (``LIFEBOT_IMAGE_MAX_BYTES``) and refuse a bigger one with the same
sentence.
"""

from __future__ import annotations


def too_big(size: int | None, limit: int, what: str = "picture") -> str | None:
    """The sentence for an oversized picture or document, or None."""
    if size is not None and size > limit:
        return (
            f"That {what} is too big for me ({size / 1_000_000:.1f} MB; I keep files up to "
            f"{limit / 1_000_000:.1f} MB). Please send a smaller one."
        )
    return None

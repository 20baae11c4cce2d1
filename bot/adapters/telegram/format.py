"""Telegram rendering: light Markdown to Telegram HTML, splitting, sources, keyboards.

Models answer in Markdown; Telegram shows HTML. Everything that is not a recognised, balanced
Markdown construct is escaped and arrives exactly as written (``a < b``, ``<b>``, a lone
``*``). Lengths are UTF-16 code units, the unit Telegram counts in.
"""

from __future__ import annotations

import html
import re
from datetime import datetime

from bot.messages import Citation

MAX_MESSAGE = 4096
"""Telegram's limit for one message's visible text."""
MAX_CALLBACK_BYTES = 64
"""Telegram's limit for a button's callback data."""

_FENCE = re.compile(r"```[ \t]*([\w+-]*)[ \t]*\n(.*?)\n?```", re.DOTALL)
_INLINE_CODE = re.compile(r"`([^`\n]+)`")
_LINK = re.compile(r"\[([^\]\n]+)\]\((https?://(?:[^\s()<>]|\([^\s()<>]*\))+)\)")
"""``[label](url)``; the URL may hold balanced parentheses (Wikipedia's ``a_(b)``)."""
_BOLD = re.compile(r"\*\*(?=\S)(.+?)(?<=\S)\*\*")
_ITALIC_STAR = re.compile(r"(?<![\w*])\*(?=[^\s*])([^*\n]+?)(?<=[^\s*])\*(?![\w*])")
_ITALIC_UNDER = re.compile(r"(?<![\w_])_(?=[^\s_])([^_\n]+?)(?<=[^\s_])_(?![\w_])")
_STRIKE = re.compile(r"~~(?=\S)(.+?)(?<=\S)~~")
_HEADING = re.compile(r"^#{1,6}[ \t]+(.+?)[ \t]*#*$", re.MULTILINE)
_BULLET = re.compile(r"^([ \t]*)[-*][ \t]+", re.MULTILINE)
_TAG = re.compile(r"<(/?)([a-z-]+)[^>]*>")
_PLACEHOLDER = "\x00{}\x00"


def utf16_len(text: str) -> int:
    """Length in UTF-16 code units."""
    return len(text.encode("utf-16-le")) // 2


def cut_utf16(text: str, limit: int) -> str:
    """The longest start of ``text`` of at most ``limit`` UTF-16 units (no half emoji)."""
    units = text.encode("utf-16-le")
    if len(units) <= 2 * limit:
        return text
    head = units[: 2 * max(limit, 0)]
    if head and 0xD8 <= head[-1] <= 0xDB:  # a high surrogate whose pair was cut off
        head = head[:-2]
    return head.decode("utf-16-le")


def escape(text: str) -> str:
    """Escape text for Telegram HTML (``&``, ``<``, ``>``)."""
    return html.escape(text, quote=False)


def markdown_to_html(text: str) -> str:
    """Render the Markdown subset models use (bold, italic, code, links, headings, bullets).

    Anything else is escaped, so it shows exactly as written.
    """
    # Code is cut out first: nothing inside it is Markdown, and it must not be re-escaped.
    kept: list[str] = []

    def keep(fragment: str) -> str:
        kept.append(fragment)
        return _PLACEHOLDER.format(len(kept) - 1)

    def fence(m: re.Match[str]) -> str:
        lang = f' class="language-{m.group(1)}"' if m.group(1) else ""
        return keep(f"<pre><code{lang}>{escape(m.group(2))}</code></pre>")

    text = _FENCE.sub(fence, text.replace("\x00", ""))
    text = _INLINE_CODE.sub(lambda m: keep(f"<code>{escape(m.group(1))}</code>"), text)
    text = _LINK.sub(
        lambda m: keep(f'<a href="{html.escape(m.group(2), quote=True)}">{escape(m.group(1))}</a>'),
        text,
    )
    out = escape(text)
    out = _HEADING.sub(r"<b>\1</b>", out)
    out = _BULLET.sub("\\1• ", out)
    out = _BOLD.sub(r"<b>\1</b>", out)
    out = _ITALIC_STAR.sub(r"<i>\1</i>", out)
    out = _ITALIC_UNDER.sub(r"<i>\1</i>", out)
    out = _STRIKE.sub(r"<s>\1</s>", out)
    out = re.sub("\x00(\\d+)\x00", lambda m: kept[int(m.group(1))], out)
    # Regexes cannot see crossing pairs ("**a _b** c_"): fall back to plain escaped text.
    return out if well_nested(out) else escape(text_without_placeholders(text, kept))


def text_without_placeholders(text: str, kept: list[str]) -> str:
    """Undo ``keep`` for the plain fallback: the fragments' visible text, unformatted."""
    return re.sub(
        "\x00(\\d+)\x00", lambda m: html.unescape(_TAG.sub("", kept[int(m.group(1))])), text
    )


def well_nested(markup: str) -> bool:
    """True when every tag closes in order (Telegram rejects crossing tags)."""
    stack: list[str] = []
    for m in _TAG.finditer(markup):
        if m.group(1):
            if not stack or stack.pop() != m.group(2):
                return False
        else:
            stack.append(m.group(2))
    return not stack


def split_text(text: str, limit: int = MAX_MESSAGE) -> list[str]:
    """Split at paragraph boundaries (then lines, sentences, words) into pieces <= ``limit``."""
    text = text.strip()
    if utf16_len(text) <= limit:
        return [text] if text else []
    for sep in ("\n\n", "\n", ". ", " "):
        parts = text.split(sep)
        if len(parts) > 1:
            return _pack(parts, sep, limit)
    # One unbroken run of characters: cut hard, without splitting a surrogate pair.
    head = cut_utf16(text, limit)
    return [head, *split_text(text[len(head) :], limit)]


def _pack(parts: list[str], sep: str, limit: int) -> list[str]:
    chunks: list[str] = []
    current = ""
    for i, part in enumerate(parts):
        piece = part + (sep.rstrip() if sep == ". " and i < len(parts) - 1 else "")
        candidate = f"{current}{sep if sep != '. ' else ' '}{piece}" if current else piece
        if utf16_len(candidate) <= limit:
            current = candidate
            continue
        if current:
            chunks.append(current)
        if utf16_len(piece) > limit:
            *full, current = split_text(piece, limit)
            chunks.extend(full)
        else:
            current = piece
    if current.strip():
        chunks.append(current)
    return [c.strip() for c in chunks if c.strip()]


def tme_link(chat_id: str, message_id: str) -> str | None:
    """A t.me link to a message, where Telegram has one (supergroups and channels)."""
    if chat_id.startswith("-100") and chat_id[4:].isdigit() and message_id.isdigit():
        return f"https://t.me/c/{chat_id[4:]}/{message_id}"
    return None


def _citation_link(c: Citation) -> str | None:
    if c.link:
        return c.link
    if c.channel == "telegram" and c.source_id.count(":") == 1:
        chat, msg = c.source_id.split(":")
        return tme_link(chat, msg)
    return None


def _when(ts: datetime | str | None) -> str:
    if isinstance(ts, str):
        try:
            ts = datetime.fromisoformat(ts)
        except ValueError:
            return ""
    return f"{ts:%d %b %Y %H:%M}" if ts is not None else ""


def source_lines(citations: list[Citation], snippet_chars: int = 70) -> list[str]:
    """One compact plain line per citation: ``[1] telegram · 03 Mar 2025 14:05 · "snippet"``."""
    lines = []
    for c in sorted(citations, key=lambda c: c.index):
        bits = [b for b in (c.channel or c.kind, _when(c.ts)) if b]
        snippet = " ".join(c.snippet.split())
        if len(snippet) > snippet_chars:
            snippet = snippet[: snippet_chars - 1].rstrip() + "…"
        if snippet:
            bits.append(f"“{snippet}”")
        lines.append(f"[{c.index}] " + " · ".join(bits))
    return lines


def sources_html(citations: list[Citation]) -> str:
    """Sources as a collapsed (expandable) quote, each line linked where a link exists."""
    if not citations:
        return ""
    rendered = []
    ordered = sorted(citations, key=lambda c: c.index)
    for c, line in zip(ordered, source_lines(ordered), strict=True):
        link = _citation_link(c)
        label, _, rest = line.partition(" ")
        head = f'<a href="{html.escape(link, quote=True)}">{label}</a>' if link else label
        rendered.append(f"{head} {escape(rest)}")
    return "<blockquote expandable>" + "\n".join(rendered) + "</blockquote>"


def sources_plain(citations: list[Citation]) -> str:
    """Sources as plain text lines (for the plain-text fallback)."""
    return "\n".join(source_lines(citations))

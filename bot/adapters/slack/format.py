"""Slack text both ways: our Markdown answers to mrkdwn + Block Kit, Slack's markup to plain text.

Slack's mrkdwn needs exactly three characters escaped (``&``, ``<``, ``>``); everything else
is literal. The model writes CommonMark-ish Markdown, so the few constructs whose syntax
differs (bold, strike, links, headings, bullets) are rewritten, and code is left alone.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from bot.errors import ChannelError
from bot.messages import Button, Citation, OutboundMessage

MAX_TEXT = 3000
"""Longest text of one message: a section block holds 3000 characters, and a message that
size still reads as one screen. Longer answers are split into several messages."""
MAX_BUTTONS = 25
"""Block Kit's limit of elements in one actions block."""
MAX_LABEL = 75
MAX_VALUE = 2000
BUTTON_ACTION_PREFIX = "lifebot_button_"
BUTTONS_BLOCK_ID = "lifebot_buttons"

_CODE = re.compile(r"(```.*?(?:```|$)|`[^`\n]*`)", re.DOTALL)
_BOLD = re.compile(r"\*\*(?=\S)(.+?)(?<=\S)\*\*")
_ITALIC = re.compile(r"(?<![*\w])\*(?=[^\s*])(.+?)(?<=[^\s*])\*(?![*\w])")
_STRIKE = re.compile(r"~~(?=\S)(.+?)(?<=\S)~~")
_LINK = re.compile(r"\[([^\]\n]+)\]\((https?://(?:[^\s()]|\([^\s()]*\))+)\)")
"""``[label](url)``; the URL may hold balanced parentheses (Wikipedia's ``a_(b)``)."""
_HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*#*\s*$", re.MULTILINE)
_BULLET = re.compile(r"^(\s*)[-*+]\s+", re.MULTILINE)


@dataclass(frozen=True, slots=True)
class Part:
    """One Slack message of a (possibly split) answer."""

    text: str
    """mrkdwn text; also the notification fallback when ``blocks`` is set."""
    blocks: list[dict[str, Any]] | None = None


def escape(text: str) -> str:
    """Escape the three characters Slack treats as markup (``&`` first, so nothing doubles)."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _prose_to_mrkdwn(text: str) -> str:
    text = escape(text)
    text = _HEADING.sub(lambda m: f"\x00{m.group(1)}\x00", text)
    text = _BULLET.sub(lambda m: f"{m.group(1)}• ", text)
    # Markdown **bold** is mrkdwn *bold*, and Markdown *italic* is mrkdwn _italic_: park the
    # bold markers on a control character so the italic rule cannot see them.
    text = _BOLD.sub(lambda m: f"\x00{m.group(1)}\x00", text)
    text = _ITALIC.sub(lambda m: f"_{m.group(1)}_", text).replace("\x00", "*")
    text = _STRIKE.sub(lambda m: f"~{m.group(1)}~", text)
    # The URL is already escaped (&amp;), which is what Slack expects inside <...>.
    return _LINK.sub(lambda m: f"<{m.group(2)}|{m.group(1).replace('|', '/')}>", text)


def to_mrkdwn(markdown: str) -> str:
    """Markdown from the model -> Slack mrkdwn; code spans and blocks are only escaped."""
    out: list[str] = []
    for i, piece in enumerate(_CODE.split(markdown)):
        out.append(escape(piece) if i % 2 else _prose_to_mrkdwn(piece))
    return "".join(out)


def _cut_point(text: str, limit: int) -> int:
    """Where to cut ``text`` so the first piece is at most ``limit`` characters."""
    window = text[:limit]
    for sep in ("\n\n", "\n", " "):
        at = window.rfind(sep)
        if at > limit // 2:
            return at + len(sep)
    # No good boundary: hard cut, but never inside an entity such as "&amp;".
    amp = window.rfind("&", max(0, limit - 5))
    if amp != -1 and ";" not in window[amp:]:
        return amp or limit
    return limit


def split(text: str, limit: int = MAX_TEXT) -> list[str]:
    """Split mrkdwn into messages of at most ``limit`` characters, keeping code fences closed."""
    chunks: list[str] = []
    rest = text
    reopen = False
    while rest:
        if reopen:
            rest = "```\n" + rest
        if len(rest) <= limit:
            chunks.append(rest)
            break
        at = _cut_point(rest, limit - 4)  # room for a closing fence
        head, rest = rest[:at].rstrip(), rest[at:].lstrip("\n")
        reopen = head.count("```") % 2 == 1
        chunks.append(head + "\n```" if reopen else head)
    return [c for c in chunks if c.strip()] or [""]


def sources(citations: list[Citation]) -> str:
    """A short footer naming the sources behind ``[n]`` markers."""
    if not citations:
        return ""
    lines = []
    for c in citations:
        when = f" {c.ts:%Y-%m-%d %H:%M}" if c.ts else ""
        label = f"[{c.index}]"
        if c.link:
            label = f"<{escape(c.link)}|{label}>"
        lines.append(f"{label} {escape(c.kind)}{when}")
    return "\n\n_Sources_\n" + "\n".join(lines)


def button_blocks(text: str, buttons: list[Button]) -> list[dict[str, Any]]:
    """A section with ``text`` followed by one actions block of buttons."""
    if len(buttons) > MAX_BUTTONS:
        raise ChannelError(f"Slack shows at most {MAX_BUTTONS} buttons on one message")
    elements = []
    for i, b in enumerate(buttons):
        if len(b.data) > MAX_VALUE:
            raise ChannelError(f"button {b.label!r} carries more than {MAX_VALUE} characters")
        label = b.label if len(b.label) <= MAX_LABEL else b.label[: MAX_LABEL - 1] + "…"
        elements.append(
            {
                "type": "button",
                "text": {"type": "plain_text", "text": label or "…", "emoji": True},
                "value": b.data,
                "action_id": f"{BUTTON_ACTION_PREFIX}{i}",
            }
        )
    section = {"type": "section", "text": {"type": "mrkdwn", "text": text or " "}}
    return [section, {"type": "actions", "block_id": BUTTONS_BLOCK_ID, "elements": elements}]


def render(msg: OutboundMessage) -> list[Part]:
    """An outbound message as Slack messages: split text, buttons on the last one."""
    chunks = split(to_mrkdwn(msg.text) + sources(msg.citations))
    parts = [Part(c) for c in chunks]
    if msg.buttons:
        parts[-1] = Part(chunks[-1], button_blocks(chunks[-1], msg.buttons))
    return parts


def preview(markdown: str, label: str | None) -> str:
    """What a streaming answer shows so far: the text, an ellipsis, the progress label."""
    text = to_mrkdwn(markdown)
    if len(text) > MAX_TEXT - 80:
        text = text[: _cut_point(text, MAX_TEXT - 80)].rstrip()
    suffix = f"_{escape(label)}…_" if label else "…"
    return f"{text} {suffix}".strip() if text else suffix


def chosen_blocks(blocks: list[dict[str, Any]], note: str) -> list[dict[str, Any]]:
    """The original message's blocks with our buttons replaced by a note of what was chosen."""
    kept = [b for b in blocks if b.get("block_id") != BUTTONS_BLOCK_ID]
    return [*kept, {"type": "context", "elements": [{"type": "mrkdwn", "text": note}]}]


# --- inbound -------------------------------------------------------------------------------

_ENTITY = re.compile(r"<([^<>]+)>")
_SCHEME = re.compile(r"^(?:mailto:|tel:|https?://)", re.IGNORECASE)


def _link(target: str, label: str) -> str:
    """A link's plain text: the words and the address, or what the person typed.

    Slack links an e-mail address or a bare domain in a message by itself
    (``<mailto:ana@example.org|ana@example.org>``, ``<http://example.com|example.com>``): its
    label is its address, and that is what was typed.
    """
    if not label or label == target or label.rstrip("/") == _SCHEME.sub("", target).rstrip("/"):
        return label or target
    return f"{label} ({target})"


def from_slack(text: str, bot_user_id: str | None = None) -> str:
    """Slack message markup -> plain text for the agent (mentions, links, entities).

    What Slack linked by itself (an e-mail address, a domain) comes back as it was typed; a
    date is its fallback text.
    """

    def entity(m: re.Match[str]) -> str:
        body = m.group(1)
        target, _, label = body.partition("|")
        if target.startswith("@"):
            if bot_user_id and target[1:] == bot_user_id:
                return ""
            return "@" + (label or target[1:])
        if target.startswith("#"):
            return "#" + (label or target[1:])
        if target.startswith("!date^"):
            return label
        if target.startswith("!"):  # a group or @here: its label may carry the @ already
            return "@" + (label.lstrip("@") or target[1:].split("^")[0])
        return _link(target, label)

    text = _ENTITY.sub(entity, text)
    text = text.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")
    return re.sub(r"[ \t]{2,}", " ", text).strip()

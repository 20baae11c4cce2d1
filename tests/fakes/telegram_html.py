"""A strict parser for Telegram's HTML parse mode, as the fake Bot API server uses it.

It turns ``parse_mode=HTML`` text into what the user sees (plain text plus entities) and
rejects what Telegram rejects: unknown tags, unbalanced tags and stray ``<`` or ``&``. Being
at least as strict as Telegram means an escaping bug in the adapter fails a test instead of
reaching a real chat. Lengths are counted in UTF-16 code units, like Telegram does.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass

TAGS = {
    "b": "bold",
    "strong": "bold",
    "i": "italic",
    "em": "italic",
    "u": "underline",
    "ins": "underline",
    "s": "strikethrough",
    "strike": "strikethrough",
    "del": "strikethrough",
    "tg-spoiler": "spoiler",
    "span": "spoiler",
    "a": "text_link",
    "code": "code",
    "pre": "pre",
    "blockquote": "blockquote",
    "tg-emoji": "custom_emoji",
}
NAMED = {"lt": "<", "gt": ">", "amp": "&", "quot": '"'}
_TAG = re.compile(r"<(/?)([a-zA-Z][a-zA-Z0-9-]*)((?:\s+[a-zA-Z-]+(?:=\"[^\"]*\"|='[^']*')?)*)\s*>")
_ATTR = re.compile(r"([a-zA-Z-]+)(?:=\"([^\"]*)\"|='([^']*)')?")
_ENTITY = re.compile(r"&(#x[0-9a-fA-F]+|#[0-9]+|[a-zA-Z]+);")


class ParseError(ValueError):
    """The text would make Telegram answer 400 "can't parse entities"."""


def utf16_len(text: str) -> int:
    """Length in UTF-16 code units, Telegram's unit for lengths and offsets."""
    return len(text.encode("utf-16-le")) // 2


@dataclass
class _Open:
    tag: str
    offset: int
    attrs: dict[str, str]


def parse_html(source: str) -> tuple[str, list[dict[str, object]]]:
    """Return (plain text, entities) or raise ParseError with Telegram's wording."""
    out: list[str] = []
    length = 0
    stack: list[_Open] = []
    entities: list[dict[str, object]] = []
    i = 0
    while i < len(source):
        ch = source[i]
        if ch == "<":
            m = _TAG.match(source, i)
            if m is None:
                raise ParseError(f"Unsupported start tag at byte offset {_byte(source, i)}")
            closing, name = m.group(1) == "/", m.group(2).lower()
            if name not in TAGS:
                raise ParseError(
                    f'Unsupported start tag "{name}" at byte offset {_byte(source, i)}'
                )
            if closing:
                if not stack or stack[-1].tag != name:
                    raise ParseError(f"Unmatched end tag at byte offset {_byte(source, i)}")
                opened = stack.pop()
                entities.append(_entity(opened, length))
            else:
                attrs = {
                    a.group(1).lower(): html.unescape(a.group(2) or a.group(3) or "")
                    for a in _ATTR.finditer(m.group(3))
                }
                stack.append(_Open(name, length, attrs))
            i = m.end()
            continue
        if ch == "&":
            m = _ENTITY.match(source, i)
            if m is None:
                raise ParseError(f"Character entity expected at byte offset {_byte(source, i)}")
            body = m.group(1)
            if body.startswith("#x"):
                text = chr(int("0" + body[1:], 0))
            elif body.startswith("#"):
                text = chr(int(body[1:]))
            elif body in NAMED:
                text = NAMED[body]
            else:
                raise ParseError(f'Unsupported HTML entity "&{body};"')
            out.append(text)
            length += utf16_len(text)
            i = m.end()
            continue
        out.append(ch)
        length += utf16_len(ch)
        i += 1
    if stack:
        raise ParseError(f'Can\'t find end tag corresponding to start tag "{stack[-1].tag}"')
    return "".join(out), [e for e in entities if int(str(e["length"])) > 0]


def _byte(source: str, index: int) -> int:
    return len(source[:index].encode())


def _entity(opened: _Open, end: int) -> dict[str, object]:
    kind = TAGS[opened.tag]
    if opened.tag == "blockquote" and "expandable" in opened.attrs:
        kind = "expandable_blockquote"
    entity: dict[str, object] = {
        "type": kind,
        "offset": opened.offset,
        "length": end - opened.offset,
    }
    if opened.tag == "a":
        entity["url"] = opened.attrs.get("href", "")
    return entity

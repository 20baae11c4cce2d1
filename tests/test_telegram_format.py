"""Telegram rendering: what the user sees for Markdown, long text and sources.

Every rendered piece is parsed with the fake server's strict Telegram-HTML parser, so markup
Telegram would refuse fails here.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from bot.adapters.telegram.format import markdown_to_html, split_text, utf16_len
from bot.adapters.telegram.send import ButtonCodec, render
from bot.messages import Address, Button, Citation, OutboundMessage
from tests.fakes.telegram_html import parse_html

ADDRESS = Address("telegram", "1", "5")


def seen(markdown: str) -> tuple[str, set[str]]:
    """Visible text and entity kinds of the rendered Markdown."""
    text, entities = parse_html(markdown_to_html(markdown))
    return text, {str(e["type"]) for e in entities}


@pytest.mark.parametrize(
    ("markdown", "visible", "kinds"),
    [
        ("**bold** and *it* and _it too_", "bold and it and it too", {"bold", "italic"}),
        ("`a < b && c`", "a < b && c", {"code"}),
        ("```python\nif a < b:\n    print('&')\n```", "if a < b:\n    print('&')", {"pre", "code"}),
        ("# Shopping\n- milk\n- eggs", "Shopping\n• milk\n• eggs", {"bold"}),
        ("~~old~~ new", "old new", {"strikethrough"}),
        ('see [the docs](https://x.org/?a=1&b="2")', "see the docs", {"text_link"}),
        ("[Mercury](https://en.wikipedia.org/wiki/Mercury_(planet))", "Mercury", {"text_link"}),
        # Left exactly as written: HTML-looking text, lone markers, snake_case, maths.
        ("<b>not bold</b> & <script>", "<b>not bold</b> & <script>", set()),
        ("2 * 3 * 4 = 24, a*b, *lonely", "2 * 3 * 4 = 24, a*b, *lonely", set()),
        ("snake_case_name and __init__", "snake_case_name and __init__", set()),
        ("**unclosed bold and `tick", "**unclosed bold and `tick", set()),
    ],
)
def test_markdown_renders_as_telegram_shows_it(
    markdown: str, visible: str, kinds: set[str]
) -> None:
    assert seen(markdown) == (visible, kinds)


def test_crossing_markers_fall_back_to_plain_text_instead_of_broken_markup() -> None:
    text, kinds = seen("**a _b** c_ and `code`")
    assert kinds == set()
    assert text == "**a _b** c_ and code"


def test_split_prefers_paragraphs_then_lines_then_words_and_keeps_every_character() -> None:
    paragraphs = ["A" * 3000, "B" * 3000, "C" * 100]
    assert split_text("\n\n".join(paragraphs)) == ["A" * 3000, "B" * 3000 + "\n\n" + "C" * 100]

    one_paragraph = " ".join(["word"] * 2000)  # 9999 characters, no line breaks
    pieces = split_text(one_paragraph)
    assert all(len(p) <= 4096 for p in pieces)
    assert " ".join(pieces) == one_paragraph


def test_split_counts_utf16_like_telegram() -> None:
    emoji = "😀" * 3000  # 6000 UTF-16 units in 3000 characters: must be split
    pieces = split_text(emoji)
    assert len(pieces) == 2
    assert all(utf16_len(p) <= 4096 for p in pieces)
    assert "".join(pieces) == emoji


def test_sources_are_a_compact_collapsed_quote_with_links_where_possible() -> None:
    msg = OutboundMessage(
        ADDRESS,
        "Your sister's birthday is on 3 May [1][2].",
        citations=[
            Citation(
                1,
                "message",
                "-1001234567890:42",
                channel="telegram",
                ts=datetime(2025, 3, 3, 14, 5, tzinfo=UTC),
                snippet="Ana's birthday is the 3rd of May, don't forget <3",
            ),
            Citation(2, "fact", "7", snippet="sister: Ana", link="https://example.org/f?7&x"),
        ],
    )
    [(html_text, plain)] = render(msg)
    text, entities = parse_html(html_text)
    assert text == plain
    assert text.splitlines()[-2:] == [
        "[1] telegram · 03 Mar 2025 14:05 · “Ana's birthday is the 3rd of May, don't forget <3”",
        "[2] fact · “sister: Ana”",
    ]
    assert {str(e["type"]) for e in entities} == {"expandable_blockquote", "text_link"}
    links = [e["url"] for e in entities if e["type"] == "text_link"]
    assert links == ["https://t.me/c/1234567890/42", "https://example.org/f?7&x"]


def test_buttons_become_a_keyboard_and_long_data_round_trips_through_a_token() -> None:
    codec = ButtonCodec()
    long_data = "proposal:accept:" + "x" * 80
    markup = codec.keyboard([Button("Yes", "yes"), Button("No", "no"), Button("Later", long_data)])
    assert markup is not None
    rows = [[(b.text, b.callback_data) for b in row] for row in markup.inline_keyboard]
    assert [[label for label, _ in row] for row in rows] == [["Yes", "No"], ["Later"]]
    wire = rows[1][0][1]
    assert isinstance(wire, str) and len(wire.encode()) <= 64
    assert codec.decode(wire) == long_data
    assert ButtonCodec().decode(wire) is None  # after a restart the token is unknown: stale

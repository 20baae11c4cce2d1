"""What people see in Slack: escaping, Markdown to mrkdwn, splitting, buttons, inbound text."""

from __future__ import annotations

import pytest

from bot.adapters.slack.format import (
    MAX_TEXT,
    chosen_blocks,
    escape,
    from_slack,
    render,
    split,
    to_mrkdwn,
)
from bot.errors import ChannelError
from bot.messages import Address, Button, OutboundMessage

HERE = Address("slack", "T1", "D1")


def test_the_three_control_characters_are_escaped_once() -> None:
    assert escape("a < b && c > d") == "a &lt; b &amp;&amp; c &gt; d"
    # Already-escaped looking text is the person's literal text and is escaped again.
    assert escape("&lt;") == "&amp;lt;"
    # <!channel> written by the model must never ping a whole channel.
    assert to_mrkdwn("<!channel> look") == "&lt;!channel&gt; look"


@pytest.mark.parametrize(
    ("markdown", "mrkdwn"),
    [
        (
            "[link](https://example.com/a_(b))",
            "<https://example.com/a_(b)|link>",
        ),
        (
            "see [Mercury](https://en.wikipedia.org/wiki/Mercury_(planet)) now.",
            "see <https://en.wikipedia.org/wiki/Mercury_(planet)|Mercury> now.",
        ),
        ("([x](https://x.io/a))", "(<https://x.io/a|x>)"),
    ],
)
def test_a_link_with_parentheses_stays_one_link(markdown: str, mrkdwn: str) -> None:
    assert to_mrkdwn(markdown) == mrkdwn


def test_markdown_becomes_mrkdwn() -> None:
    md = "# Plan\n- **milk** & eggs\n* *soon*\n~~old~~ [docs](https://x.io/?a=1&b=2)"
    assert to_mrkdwn(md) == (
        "*Plan*\n• *milk* &amp; eggs\n• _soon_\n~old~ <https://x.io/?a=1&amp;b=2|docs>"
    )


def test_code_is_escaped_but_not_reformatted() -> None:
    md = "Run `a<b **c**` then:\n```\nif x > 1 and **y**:\n```"
    assert to_mrkdwn(md) == "Run `a&lt;b **c**` then:\n```\nif x &gt; 1 and **y**:\n```"


def test_long_text_splits_on_paragraphs_within_the_limit() -> None:
    paragraphs = [f"Paragraph {i}. " + "word " * 150 for i in range(12)]
    chunks = split("\n\n".join(paragraphs))
    assert len(chunks) > 1
    assert all(len(c) <= MAX_TEXT for c in chunks)
    assert all(c.startswith("Paragraph") for c in chunks)  # cut at paragraph boundaries
    assert " ".join(" ".join(chunks).split()) == " ".join(" ".join(paragraphs).split())


def test_split_never_cuts_an_entity_or_leaves_a_code_fence_open() -> None:
    entities = split("&amp;" * 1500)
    assert all(c.endswith(";") for c in entities)
    assert "".join(entities) == "&amp;" * 1500
    code = split("```\n" + "print(1)\n" * 800 + "```")
    assert len(code) > 1
    assert all(c.count("```") == 2 for c in code)  # each part is a closed code block


def test_buttons_go_on_the_last_part_as_block_kit() -> None:
    msg = OutboundMessage(
        HERE, "x " * 2000, buttons=[Button("Yes", "accept:1"), Button("No", "decline:1")]
    )
    parts = render(msg)
    assert len(parts) == 2
    assert parts[0].blocks is None
    assert parts[1].blocks is not None
    section, actions = parts[1].blocks
    assert section["text"]["text"] == parts[1].text
    assert [(e["text"]["text"], e["value"]) for e in actions["elements"]] == [
        ("Yes", "accept:1"),
        ("No", "decline:1"),
    ]
    assert chosen_blocks(parts[1].blocks, "✓ Yes")[-1]["type"] == "context"
    assert all(b["type"] != "actions" for b in chosen_blocks(parts[1].blocks, "✓ Yes"))


def test_impossible_buttons_are_refused_in_plain_words() -> None:
    too_many = OutboundMessage(HERE, "pick", buttons=[Button(str(i), str(i)) for i in range(26)])
    with pytest.raises(ChannelError, match="at most 25 buttons"):
        render(too_many)


def test_inbound_markup_becomes_plain_text() -> None:
    text = "<@U0BOT> ask <@U2|ana> about <https://a.io|the doc> in <#C1|general> &lt;3 &amp; co"
    assert from_slack(text, "U0BOT") == "ask @ana about the doc (https://a.io) in #general <3 & co"

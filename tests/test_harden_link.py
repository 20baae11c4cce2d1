"""Hardening (#18) item 1: no account takeover through /link in a shared chat."""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator

import pytest
from sqlmodel import select

from bot.app.build import App
from storage.models import ChannelIdentity, PairingRequest
from tests.fakes.channel import RecordingChannel
from tests.fakes.llm import FakeLLM, say
from tests.fakes.slack_api import (
    BOT_USER_ID,
    TEAM_ID,
    FakeSlack,
    block_actions,
    dm_event,
    mention_event,
)
from tests.support.app import AppFactory, add_user, channel
from tests.support.builders import make_inbound
from tests.support.slack import ANA, ANA_DM, Slack, start_slack

CODE = re.compile(r"\b[A-HJ-NP-Z2-9]{8}\b")
MAL, MAL_DM = "U0MAL", "D0MAL"


@pytest.fixture
async def slack(
    app_factory: AppFactory, fake_llm: FakeLLM, fake_slack: FakeSlack
) -> AsyncIterator[Slack]:
    """lifebot on Slack (HTTP mode); Ana is the paired owner and Mallory a colleague."""
    fake_slack.users[MAL] = "Mallory"
    slack = await start_slack(app_factory, fake_llm, fake_slack, "http")
    await add_user(slack.app, ANA, channel_name="slack", account=TEAM_ID, owner=True)
    yield slack
    await slack.adapter.stop()


async def _identities(app: App) -> list[ChannelIdentity]:
    async with app.db.session() as s:
        return list((await s.exec(select(ChannelIdentity))).all())


async def test_link_code_never_shows_in_a_channel_and_a_link_needs_the_owners_yes(
    slack: Slack,
) -> None:
    await slack.post(dm_event("/remember my bank PIN hint is blue horse"))
    await slack.post(mention_event(f"<@{BOT_USER_ID}> /link"))
    await slack.post(mention_event(f"<@{BOT_USER_ID}> /facts"))

    in_channel = " ".join(slack.fake.texts("C0GENERAL"))
    assert not CODE.search(in_channel), in_channel  # no code posted where others read
    assert "blue horse" not in in_channel  # nor a private answer
    assert "private" in in_channel

    # In her DM Ana gets a code; Mallory (who saw nothing) guesses and fails; then, say,
    # shoulder-surfs the code and sends it: Ana is asked, says No, nothing is linked.
    await slack.post(dm_event("/link"))
    [code] = CODE.findall(slack.fake.texts(ANA_DM)[-1])
    await slack.post(dm_event(code, user=MAL, channel=MAL_DM))
    assert len(await _identities(slack.app)) == 1
    ask = slack.fake.texts(ANA_DM)[-1]
    assert "Link Slack Mallory to your account?" in ask
    await slack.post(dm_event("/facts", user=MAL, channel=MAL_DM))
    assert "blue horse" not in " ".join(slack.fake.texts(MAL_DM))

    [ask_msg] = [m for m in slack.fake.posted if m["text"] == ask]
    shown = slack.fake.messages[(ANA_DM, ask_msg["ts"])]
    values = [e["value"] for e in shown["blocks"][-1]["elements"]]
    assert [v.split()[:2] for v in values] == [["/link", "yes"], ["/link", "no"]]
    no = block_actions(shown, value=values[1])
    await slack.post(no, interactive=True)
    assert len(await _identities(slack.app)) == 1
    assert slack.fake.texts(MAL_DM)[-1] == "The link was declined."
    assert "Not linked" in slack.fake.texts(ANA_DM)[-1]
    # The code was single-use: sending it again does not ask again.
    asked = len(slack.fake.texts(ANA_DM))
    await slack.post(dm_event(code, user=MAL, channel=MAL_DM))
    assert len(slack.fake.texts(ANA_DM)) == asked


async def test_link_is_made_only_after_yes_and_the_newest_code_replaces_older(
    app: App,
) -> None:
    other = RecordingChannel("other")
    app.dispatcher.register(other)
    await add_user(app, "ana")
    old = await app.dispatcher.handle(make_inbound("/link", sender="ana"))
    new = await app.dispatcher.handle(make_inbound("/link", sender="ana"))
    assert old.reply is not None and new.reply is not None
    [old_code] = CODE.findall(old.reply)
    [new_code] = CODE.findall(new.reply)

    stale = await app.dispatcher.handle(make_inbound(old_code, sender="ana2", channel="other"))
    assert stale.status == "pairing" and len(await _identities(app)) == 1

    await app.dispatcher.handle(make_inbound(new_code, sender="ana2", channel="other"))
    ask = channel(app).sent[-1]
    assert ask.text.startswith("Link Other ana2 to your account?")
    assert len(await _identities(app)) == 1  # nothing linked before the yes
    [yes, _no] = ask.buttons
    done = await app.dispatcher.handle(make_inbound("Yes", sender="ana", callback_data=yes.data))
    assert done.reply is not None and "Linked" in done.reply
    assert len(await _identities(app)) == 2
    assert "Linked" in other.texts()[-1]


async def test_one_code_used_at_once_by_two_strangers_asks_once(any_db_app: App) -> None:
    app = any_db_app
    await add_user(app, "ana")
    got = await app.dispatcher.handle(make_inbound("/link", sender="ana"))
    assert got.reply is not None
    [code] = CODE.findall(got.reply)
    before = len(channel(app).sent)

    await asyncio.gather(
        *(app.dispatcher.handle(make_inbound(code, sender=f"eve{i}")) for i in range(6))
    )

    assert len(await _identities(app)) <= 2  # the race used to link several at once
    asks = [m for m in channel(app).sent[before:] if m.text.startswith("Link ")]
    assert len(asks) == 1
    async with app.db.session() as s:
        used = (await s.exec(select(PairingRequest).where(PairingRequest.code == code))).one()
    assert used.status != "pending"
    assert len(await _identities(app)) == 1


async def test_link_code_guesses_are_throttled(app: App) -> None:
    await add_user(app, "ana")
    got = await app.dispatcher.handle(make_inbound("/link", sender="ana"))
    assert got.reply is not None
    [code] = CODE.findall(got.reply)
    for n in range(10):
        await app.dispatcher.handle(make_inbound(f"/link ZZZZZZ{n + 2}{n + 2}", sender="eve"))

    late = await app.dispatcher.handle(make_inbound(code, sender="eve"))

    assert late.reply is not None and "Too many codes" in late.reply
    assert not [m for m in channel(app).sent if m.text.startswith("Link ")]


async def test_a_word_shaped_like_a_code_from_a_known_chat_goes_to_the_assistant(
    app: App, fake_llm: FakeLLM
) -> None:
    """Only the sender's own live code is taken for one: "thursday" is a word to answer."""
    await add_user(app, "ana")
    await app.dispatcher.handle(make_inbound("/link", sender="ana"))
    fake_llm.add(say("Thursday it is."))
    got = await app.dispatcher.handle(make_inbound("THURSDAY", sender="ana"))
    assert (got.status, got.reply) == ("answered", "Thursday it is.")


async def test_link_code_sent_from_a_known_chat_is_answered_not_replaced(app: App) -> None:
    """Ana's Slack chat was approved as an account of its own; "/link CODE" there used to
    hand out a new code (and her Telegram code seemed to do nothing)."""
    other = RecordingChannel("other")
    app.dispatcher.register(other)
    await add_user(app, "ana")
    await add_user(app, "ana2", channel_name="other", name="Ana at work")
    got = await app.dispatcher.handle(make_inbound("/link", sender="ana"))
    assert got.reply is not None
    [code] = CODE.findall(got.reply)

    there = await app.dispatcher.handle(
        make_inbound(f"/link {code}", sender="ana2", channel="other")
    )
    assert there.reply is not None
    assert not CODE.findall(there.reply), there.reply  # no new code of its own
    assert "already has a lifebot account of its own" in there.reply
    assert "lifebot users delete" in there.reply
    assert not [m for m in channel(app).sent if m.text.startswith("Link ")]

    # Pasted back into the chat that asked for it: that chat is told where the code goes.
    here = await app.dispatcher.handle(make_inbound(f"/link {code.lower()}", sender="ana"))
    assert here.reply is not None and not CODE.findall(here.reply), here.reply
    assert "from the other channel" in here.reply
    # The code alone (no /link), pasted back there: the same words, not the model's guess.
    bare = await app.dispatcher.handle(make_inbound(f" {code} ", sender="ana"))
    assert bare.status == "command" and bare.reply == here.reply, bare
    # Neither answer used up or replaced the code: a new chat can still link with it.
    await app.dispatcher.handle(make_inbound(code, sender="ana3", channel="other"))
    assert channel(app).sent[-1].text.startswith("Link Other ana3 to your account?")
    assert len(await _identities(app)) == 2

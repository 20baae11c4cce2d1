"""The Slack channel end to end: real Bolt and slack_sdk against the loopback fake Slack."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlmodel import select

from bot.app.build import App
from bot.errors import Unreachable
from bot.messages import Address, Button, OutboundMessage
from storage.models import ChannelIdentity, Conversation, Message, PairingRequest
from tests.fakes.llm import FakeLLM, say
from tests.fakes.slack_api import (
    APP_TOKEN,
    BOT_ID,
    BOT_TOKEN,
    BOT_USER_ID,
    SIGNING_SECRET,
    TEAM_ID,
    FakeSlack,
    block_actions,
    dm_event,
    mention_event,
    sign,
)
from tests.support.app import AppFactory, add_user
from tests.support.slack import ANA, ANA_DM, Slack, answer, asked_of, manifest, start_slack


@pytest.fixture
async def socket(
    app_factory: AppFactory, fake_llm: FakeLLM, fake_slack: FakeSlack
) -> AsyncIterator[Slack]:
    """lifebot in Socket Mode, Ana already paired."""
    slack = await start_slack(app_factory, fake_llm, fake_slack, "socket")
    await add_user(slack.app, ANA, channel_name="slack", account=TEAM_ID)
    yield slack
    await slack.adapter.stop()


async def stored_inbound(app: App) -> list[Message]:
    async with app.db.session() as s:
        return list((await s.exec(select(Message).where(Message.direction == "in"))).all())


# --- HTTP mode -----------------------------------------------------------------------------


async def test_signed_http_event_gets_a_reply_in_the_dm(http: Slack, fake_llm: FakeLLM) -> None:
    answer(fake_llm, say("Hello Ana! Nice to hear from you."))

    assert await http.post(dm_event("hi, what's on today?")) == 200

    assert http.fake.texts(ANA_DM) == ["Hello Ana! Nice to hear from you."]
    assert asked_of(fake_llm)[0]["messages"][-1]["content"] == "hi, what's on today?"
    [posted] = http.fake.posted
    assert posted["thread_ts"] is None  # a DM is answered in the DM, not in a thread


async def test_retried_event_gives_no_second_reply(http: Slack, fake_llm: FakeLLM) -> None:
    answer(fake_llm, say("Only once.", delay=0.3), say("SECOND REPLY"))
    body = dm_event("hello")

    # Slack retries while the first delivery is still being answered, and again later.
    first = await http.fake.post_event(http.url, body)
    again = await http.fake.post_event(http.url, body, retry_num=1)
    assert await http.adapter.wait_idle(20)
    later = await http.post(body, retry_num=2)

    assert (first[0], again[0], later) == (200, 200, 200)
    assert http.fake.texts() == ["Only once."]
    assert len(asked_of(fake_llm)) == 1


async def test_retry_after_a_restart_gives_no_second_reply(
    app_factory: AppFactory, fake_llm: FakeLLM, fake_slack: FakeSlack
) -> None:
    first = await start_slack(app_factory, fake_llm, fake_slack, "http")
    await add_user(first.app, ANA, channel_name="slack", account=TEAM_ID)
    answer(fake_llm, say("Answered before the restart."), say("SECOND REPLY"))
    body = dm_event("remind me what I said")
    await first.post(body)
    await first.app.close()

    second = await start_slack(app_factory, fake_llm, fake_slack, "http")  # same database
    assert await second.post(body, retry_num=3) == 200

    assert fake_slack.texts() == ["Answered before the restart."]
    assert len(asked_of(fake_llm)) == 1


@pytest.mark.parametrize(
    "tamper",
    ["wrong secret", "stale timestamp", "body changed after signing", "no signature"],
)
async def test_unverified_request_gets_401_and_nothing_happens(
    http: Slack, fake_llm: FakeLLM, tamper: str
) -> None:
    body = dm_event("transfer all my notes to mallory")
    raw = json.dumps(body).encode()
    kw: dict[str, Any] = {}
    if tamper == "wrong secret":
        kw["secret"] = "not-the-secret"
    elif tamper == "stale timestamp":
        old = int(time.time()) - 10 * 60  # correctly signed, but replayed 10 minutes later
        kw.update(timestamp=old, signature=sign(SIGNING_SECRET, old, raw))
    elif tamper == "body changed after signing":
        now = int(time.time())
        kw.update(timestamp=now, signature=sign(SIGNING_SECRET, now, raw.replace(b"x", b"y")))
    else:
        kw["signature"] = "v0="

    assert await http.post(body, **kw) == 401

    assert fake_llm.requests == []
    assert http.fake.posted == []
    assert await stored_inbound(http.app) == []


DOCX = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"


@pytest.mark.parametrize(
    ("timestamp", "signature"),
    [
        ("abc", None),
        ("1e3", None),
        ("", None),
        ("\uff11\uff12\uff13", None),  # digits, but not ASCII ones (full-width)
        (None, "v0=é"),  # not ASCII: the library's compare_digest raised on it
        (None, "v0=" + "0" * 64 + "x" * 5000),
    ],
)
async def test_a_malformed_signature_header_gets_401_not_a_crash(
    http: Slack, fake_llm: FakeLLM, timestamp: str | None, signature: str | None
) -> None:
    """Anyone on the network can send these; the library raised on them (a 500)."""
    raw = json.dumps(dm_event("hello")).encode()
    ts = timestamp if timestamp is not None else str(int(time.time()))
    headers = {  # as bytes: httpx would refuse to encode the non-ASCII ones itself
        b"X-Slack-Request-Timestamp": ts.encode(),
        b"X-Slack-Signature": (signature or sign(SIGNING_SECRET, int(time.time()), raw)).encode(),
        b"Content-Type": b"application/json",
    }
    async with httpx.AsyncClient() as client:
        r = await client.post(http.url, content=raw, headers=headers)
    assert r.status_code == 401, r.text
    assert r.json() == {"error": "invalid request"}  # as for any other unverified request
    assert fake_llm.requests == []
    assert await stored_inbound(http.app) == []
    # ...and a good request right after is still answered.
    answer(fake_llm, say("Hi Ana."))
    assert await http.post(dm_event("hello again")) == 200
    assert http.fake.texts(ANA_DM) == ["Hi Ana."]


async def test_a_file_lifebot_cannot_open_is_answered_in_words_not_ignored(
    http: Slack, fake_llm: FakeLLM
) -> None:
    """A Word file alone in a DM was dropped without a word; Telegram already said why."""
    file = http.fake.add_file(b"PK\x03\x04 not really a docx", "report.docx", DOCX)

    assert await http.post(dm_event("", subtype="file_share", files=[file])) == 200

    [reply] = http.fake.texts(ANA_DM)
    assert "can't open this kind of message" in reply and "PDF" in reply
    assert fake_llm.requests == []  # a fixed answer: no model call
    assert http.fake.file_downloads == []  # and nothing fetched


async def test_a_stranger_sending_a_file_lifebot_cannot_open_gets_the_pairing_answer(
    http: Slack, fake_llm: FakeLLM
) -> None:
    file = http.fake.add_file(b"PK\x03\x04", "report.docx", DOCX)

    body = dm_event("", user="U0EVE", channel="D0EVE", subtype="file_share", files=[file])
    assert await http.post(body) == 200

    [reply] = http.fake.texts("D0EVE")
    assert "pair" in reply.lower()
    assert fake_llm.requests == []
    assert http.fake.file_downloads == []


async def test_url_verification_challenge_is_answered(http: Slack) -> None:
    body = {"type": "url_verification", "challenge": "c-123", "token": "legacy"}
    status, text, _ = await http.fake.post_event(http.url, body)
    assert status == 200
    assert json.loads(text) == {"challenge": "c-123"}


async def test_ack_is_sent_before_the_agent_answers(http: Slack, fake_llm: FakeLLM) -> None:
    answer(fake_llm, say("Took my time.", delay=1.0))

    status, _, _ = await http.fake.post_event(http.url, dm_event("what's on my schedule today?"))

    # Slack has its 200 while the answer is still being written.
    assert status == 200
    assert http.fake.posted == []
    assert not await http.adapter.wait_idle(0.05)
    assert await http.adapter.wait_idle(20)
    assert http.fake.texts() == ["Took my time."]


async def test_app_mention_is_answered_in_its_thread(http: Slack, fake_llm: FakeLLM) -> None:
    answer(fake_llm, say("Standup is at 10."), say("Yes, in room 4."))
    mention = mention_event(f"<@{BOT_USER_ID}> when is standup today?")

    await http.post(mention)
    follow_up = mention_event(
        f"<@{BOT_USER_ID}> same room today?", thread_ts=mention["event"]["ts"]
    )
    await http.post(follow_up)

    first, second = http.fake.posted
    assert first["channel"] == second["channel"] == "C0GENERAL"
    assert first["thread_ts"] == second["thread_ts"] == mention["event"]["ts"]
    assert http.fake.texts() == ["Standup is at 10.", "Yes, in room 4."]
    asked = asked_of(fake_llm)[0]["messages"][-1]["content"]
    assert asked == "when is standup today?"  # the bot's own mention is not part of the question
    # The follow-up in the same thread continues the same conversation.
    history = [m["content"] for m in asked_of(fake_llm)[1]["messages"]]
    assert "when is standup today?" in history


async def test_mention_in_a_dm_and_the_dm_itself_are_one_message(
    http: Slack, fake_llm: FakeLLM
) -> None:
    answer(fake_llm, say("One answer."), say("SECOND REPLY"))
    dm = dm_event(f"<@{BOT_USER_ID}> hi")
    as_mention = mention_event(dm["event"]["text"], channel=ANA_DM, ts=dm["event"]["ts"])

    await http.post(dm)
    await http.post(as_mention)  # a different event_id, the same message

    assert http.fake.texts() == ["One answer."]


async def test_bots_own_messages_edits_and_deletes_are_ignored(
    http: Slack, fake_llm: FakeLLM
) -> None:
    own = dm_event("I am lifebot", user=BOT_USER_ID, bot_id=BOT_ID)
    other_bot = dm_event("beep", bot_id="B0OTHER", subtype="bot_message")
    edit = dm_event("", subtype="message_changed", message={"text": "edited", "user": ANA})
    delete = dm_event("", subtype="message_deleted", deleted_ts="1.2")
    joined = dm_event("joined", subtype="channel_join")

    for body in (own, other_bot, edit, delete, joined):
        assert await http.post(body) == 200

    assert fake_llm.requests == []
    assert http.fake.posted == []
    assert await stored_inbound(http.app) == []


async def test_stranger_gets_a_pairing_code_under_their_slack_name(http: Slack) -> None:
    http.fake.users["U0BEN"] = "Ben Ode"
    await http.post(dm_event("hello?", user="U0BEN", channel="D0BEN"))
    async with http.app.db.session() as s:
        [req] = (await s.exec(select(PairingRequest))).all()
    [text] = http.fake.texts("D0BEN")
    assert req.code in text
    assert req.channel == "slack"
    assert req.account == TEAM_ID
    assert req.chat_id == "D0BEN"
    assert req.display_name == "Ben Ode"  # what the owner sees in `lifebot pairing list`


async def test_long_answer_is_split_and_escaped(http: Slack, fake_llm: FakeLLM) -> None:
    para = "Use <b> & </b> tags for **bold** in HTML; Slack wants *this*. " * 20
    answer(fake_llm, say("\n\n".join([para] * 6)))

    await http.post(dm_event("find my notes on formatting"))

    texts = http.fake.texts(ANA_DM)
    assert len(texts) >= 3
    assert all(len(t) <= 3000 for t in texts)
    joined = "\n\n".join(texts)
    assert joined.count("&lt;b&gt; &amp; &lt;/b&gt;") == 120
    assert "<b>" not in joined
    assert "*bold*" in joined
    assert "_this_" in joined
    # Overflow parts follow the streamed first message in order.
    assert [p["channel"] for p in http.fake.posted] == [ANA_DM] * len(texts)


async def test_a_draft_that_cannot_be_updated_still_ends_in_the_whole_answer(
    http: Slack, fake_llm: FakeLLM
) -> None:
    # The draft is posted, then every chat.update is refused (e.g. the message was deleted).
    http.fake.fail("chat.update", error="cant_update_message", times=20)
    answer(fake_llm, say("Here is the whole answer, streamed in small chunks."))

    await http.post(dm_event("hi"))

    draft, final = http.fake.texts(ANA_DM)
    assert draft.endswith("…")  # the streamed draft the user saw
    assert final == "Here is the whole answer, streamed in small chunks."  # never lost


async def test_rate_limited_reply_waits_for_retry_after(http: Slack, fake_llm: FakeLLM) -> None:
    http.fake.fail("chat.postMessage", status=429, retry_after=1)
    answer(fake_llm, say("Worth the wait."))

    await http.post(dm_event("hi"))

    limited, ok = http.fake.calls_of("chat.postMessage")
    assert (limited.result, ok.result) == ("ratelimited", "ok")
    assert ok.at - limited.at >= 1.0  # Slack's Retry-After was honoured
    assert http.fake.texts() == ["Worth the wait."]


async def test_push_is_retried_after_429_and_returns_a_receipt(http: Slack) -> None:
    http.fake.fail("chat.postMessage", status=429, retry_after=1, times=2)
    out = OutboundMessage(Address("slack", TEAM_ID, ANA_DM), "Good morning!", kind="briefing")

    receipt = await http.adapter.send(out)

    assert receipt.channel == "slack"
    assert receipt.chat_id == ANA_DM
    assert http.fake.posted[0]["ts"] == receipt.message_id
    times = [c.at for c in http.fake.calls_of("chat.postMessage")]
    assert times[2] - times[0] >= 2.0


async def test_revoked_token_marks_the_person_unreachable(
    http: Slack, fake_llm: FakeLLM, caplog: pytest.LogCaptureFixture
) -> None:
    answer(fake_llm, say("You will never see this."))
    http.fake.revoked = True

    with caplog.at_level(logging.ERROR, logger="bot.adapters.slack.api"):
        await http.post(dm_event("hello?"))

    async with http.app.db.session() as s:
        [ident] = (await s.exec(select(ChannelIdentity))).all()
    assert ident.unreachable_at is not None
    assert ident.unreachable_reason is not None
    assert "token_revoked" in ident.unreachable_reason
    assert "SLACK_BOT_TOKEN" in caplog.text  # the log says how to fix it


async def test_not_in_channel_is_unreachable_with_the_fix(http: Slack) -> None:
    http.fake.fail("chat.postMessage", "not_in_channel")
    out = OutboundMessage(Address("slack", TEAM_ID, "C0RANDOM"), "hello")

    with pytest.raises(Unreachable, match=r"not_in_channel.*invite"):
        await http.adapter.send(out)


async def test_personal_push_never_goes_to_a_channel(http: Slack) -> None:
    out = OutboundMessage(Address("slack", TEAM_ID, "C0GENERAL"), "Your meds", kind="reminder")

    with pytest.raises(Unreachable, match="DM"):
        await http.adapter.send(out)
    assert http.fake.posted == []


async def test_stop_lets_an_answer_under_way_finish(http: Slack, fake_llm: FakeLLM) -> None:
    answer(fake_llm, say("Finished before shutdown.", delay=0.5))
    await http.fake.post_event(http.url, dm_event("what's on my calendar?"))

    await http.adapter.stop()

    assert http.fake.texts() == ["Finished before shutdown."]


async def test_answer_cut_off_by_shutdown_is_kept(
    app_factory: AppFactory, fake_llm: FakeLLM, fake_slack: FakeSlack
) -> None:
    slack = await start_slack(app_factory, fake_llm, fake_slack, "http", slack_drain_seconds=0)
    await add_user(slack.app, ANA, channel_name="slack", account=TEAM_ID)
    answer(fake_llm, say("too late", delay=1.5))
    await fake_slack.post_event(slack.url, dm_event("note: keep this safe"))
    while not asked_of(fake_llm):  # the agent is working on it
        await slack.adapter.wait_idle(0.02)

    await slack.adapter.stop()

    [kept] = await stored_inbound(slack.app)
    assert kept.text == "note: keep this safe"  # acknowledged and stored: /retry can answer it
    assert fake_slack.posted == []


# --- Socket Mode ---------------------------------------------------------------------------


async def test_socket_mode_envelope_is_acked_and_answered(socket: Slack, fake_llm: FakeLLM) -> None:
    answer(fake_llm, say("Hi from Socket Mode."), say("SECOND REPLY"))
    body = dm_event("hello there!")

    await socket.deliver(body)
    # Slack redelivers an envelope it thinks was not acknowledged: a new envelope id, the same
    # event; it is acknowledged again and not answered again.
    await socket.deliver(body, retry_attempt=1, retry_reason="timeout")

    assert len(socket.fake.acks) == 2
    assert socket.fake.texts(ANA_DM) == ["Hi from Socket Mode."]
    assert socket.fake.calls_of("apps.connections.open")[0].token == APP_TOKEN


async def test_socket_mode_reconnects_when_slack_asks(socket: Slack, fake_llm: FakeLLM) -> None:
    answer(fake_llm, say("Still here."))

    await socket.fake.refresh()
    await socket.fake.wait_connections(2)
    await socket.deliver(dm_event("hello again"))

    assert len(socket.fake.calls_of("apps.connections.open")) == 2
    assert socket.fake.texts(ANA_DM) == ["Still here."]


async def test_button_click_is_handled(socket: Slack) -> None:
    out = OutboundMessage(
        Address("slack", TEAM_ID, ANA_DM),
        "What next?",
        buttons=[Button("Show my tasks", "/tasks"), Button("Help", "/help")],
        kind="proposal",
    )
    receipt = await socket.adapter.send(out)
    [shown] = socket.fake.posted
    labels = [e["text"]["text"] for e in shown["blocks"][-1]["elements"]]
    assert labels == ["Show my tasks", "Help"]

    click = block_actions(socket.fake.messages[(ANA_DM, receipt.message_id)], value="/tasks")
    await socket.deliver(click, kind="interactive")
    # A redelivered click is the same click.
    await socket.deliver(click, kind="interactive")

    assert socket.fake.texts(ANA_DM)[1:] == ["No open tasks."]
    clicked = socket.fake.messages[(ANA_DM, receipt.message_id)]
    assert all(b["type"] != "actions" for b in clicked["blocks"])  # no second click possible
    assert "Show my tasks" in json.dumps(clicked["blocks"][-1])


async def test_socket_mode_bad_app_token_is_a_clear_error(
    app_factory: AppFactory, fake_llm: FakeLLM, fake_slack: FakeSlack
) -> None:
    from bot.errors import ChannelError

    with pytest.raises(ChannelError, match="invalid_auth"):
        await start_slack(
            app_factory, fake_llm, fake_slack, "socket", slack_app_token="xapp-1-wrong"
        )


def test_manifest_asks_for_exactly_what_lifebot_uses() -> None:
    spec = manifest()
    assert sorted(spec["oauth_config"]["scopes"]["bot"]) == [
        "app_mentions:read",  # app_mention events
        "chat:write",  # answers, streaming updates, clicked-button notes
        "files:read",  # audio files in DMs
        "files:write",  # journal charts
        "im:history",  # message.im events
        "users:read",  # names for pairing requests
    ]
    assert sorted(spec["settings"]["event_subscriptions"]["bot_events"]) == [
        "app_mention",
        "message.im",
    ]
    assert spec["settings"]["interactivity"]["is_enabled"] is True  # buttons
    assert spec["settings"]["socket_mode_enabled"] is True  # the default mode
    assert spec["features"]["app_home"]["messages_tab_read_only_enabled"] is False  # DMs allowed


async def test_doctor_checks_both_tokens(tmp_path: Path, fake_slack: FakeSlack) -> None:
    from bot.app.doctor import check_slack
    from tests.support.app import make_settings

    good = make_settings(
        tmp_path,
        slack_bot_token=BOT_TOKEN,
        slack_app_token=APP_TOKEN,
        slack_api_url=fake_slack.api_url,
    )
    ok = await check_slack(good)
    assert ok.ok
    assert TEAM_ID in ok.detail
    assert "Socket Mode" in ok.detail

    bad = make_settings(
        tmp_path,
        slack_bot_token=BOT_TOKEN,
        slack_app_token="xapp-1-typo",
        slack_api_url=fake_slack.api_url,
    )
    problem = await check_slack(bad)
    assert not problem.ok
    assert "SLACK_APP_TOKEN" in problem.detail
    assert "invalid_auth" in problem.detail


async def test_a_dm_thread_starts_from_the_message_it_hangs_from(
    http: Slack, fake_llm: FakeLLM
) -> None:
    answer(fake_llm, say("Noted: Porto on Monday."), say("Booked."), say("Done."), say("Hi."))
    trip = dm_event("my trip to Porto starts Monday")
    await http.post(trip)
    # A thread under the person's own message: the model is told what "there" means.
    await http.post(dm_event("book me a hotel there", thread_ts=trip["event"]["ts"]))
    asked = [m["content"] for m in asked_of(fake_llm)[-1]["messages"]]
    assert asked[-2:] == ["my trip to Porto starts Monday", "book me a hotel there"]

    # A thread under lifebot's own reply starts from that reply.
    reply_ts = http.fake.posted[0]["ts"]
    await http.post(dm_event("and a taxi from the airport", thread_ts=reply_ts))
    asked = [m["content"] for m in asked_of(fake_llm)[-1]["messages"]]
    assert asked[-2:] == ["Noted: Porto on Monday.", "and a taxi from the airport"]

    # The DM itself is not a thread: nothing extra comes first.
    await http.post(dm_event("hello"))
    asked = [m["content"] for m in asked_of(fake_llm)[-1]["messages"]]
    assert "book me a hotel there" not in asked and asked[-1] == "hello"


async def test_each_dm_thread_keeps_its_own_history_and_is_answered_in_it(
    http: Slack, fake_llm: FakeLLM
) -> None:
    answer(fake_llm, say("Noted."), say("Okay."), say("Sure."), say("Booked."))
    trip, knee = dm_event("my trip to Porto starts Monday"), dm_event("my knee hurts again")
    await http.post(trip)
    await http.post(knee)
    # Replies in a thread carry the parent message's ts as thread_ts.
    await http.post(dm_event("my hotel is near the river", thread_ts=trip["event"]["ts"]))
    await http.post(dm_event("my physio is on Tuesday", thread_ts=knee["event"]["ts"]))

    posted = [p["thread_ts"] for p in http.fake.posted]
    assert posted == [None, None, trip["event"]["ts"], knee["event"]["ts"]]
    physio = json.dumps(asked_of(fake_llm)[-1]["messages"])
    assert "physio" in physio and "hotel" not in physio  # that thread's history only
    async with http.app.db.session() as s:
        titles = sorted(c.title or "" for c in (await s.exec(select(Conversation))).all())
    assert titles == [
        "my hotel is near the river",
        "my physio is on Tuesday",
        "my trip to Porto starts Monday",
    ]


async def test_addresses_slack_links_by_itself_arrive_as_typed(
    http: Slack, fake_llm: FakeLLM
) -> None:
    """Slack turns an e-mail address or a bare domain a person types into a link in the
    event's text (``<mailto:ana@example.org|ana@example.org>``, ``<http://example.com|
    example.com>``; api.slack.com/reference/surfaces/formatting). They reached commands and
    the model as "ana@example.org (mailto:ana@example.org)": a contact saved from Slack kept
    that as how to reach her."""
    said = " /contact add Ana Silva | Aninha | sister | <mailto:ana@example.org|ana@example.org>"
    assert await http.post(dm_event(said)) == 200
    [saved] = http.fake.texts(ANA_DM)
    assert "ana@example.org" in saved and "mailto" not in saved, saved

    answer(fake_llm, say("I will."))
    typed = (
        "mail <mailto:ana@example.org|ana@example.org> the plan from <http://example.com|"
        "example.com> and <https://a.io/x|the doc> <!date^1392734382^{date_short}|Feb 18, 2014>"
    )
    assert await http.post(dm_event(typed)) == 200
    seen = asked_of(fake_llm)[0]["messages"][-1]["content"]
    assert seen == (
        "mail ana@example.org the plan from example.com and the doc (https://a.io/x) Feb 18, 2014"
    ), seen


async def test_a_group_mention_reaches_the_model_as_one_at_sign(
    http: Slack, fake_llm: FakeLLM
) -> None:
    """Slack writes a user-group mention with its handle as the label, @ included
    (``<!subteam^S1|@devs>``): the model read "@@devs"."""
    answer(fake_llm, say("Sure."))
    assert await http.post(dm_event("ask <!subteam^S0DEVS|@devs> and <!here> today")) == 200
    assert asked_of(fake_llm)[0]["messages"][-1]["content"] == "ask @devs and @here today"

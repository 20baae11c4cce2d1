"""PDF documents (issue 16): kept with their message, read page by page (pypdf), found by memory
search, and cited by page; through the Telegram and Slack fakes.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from zoneinfo import ZoneInfo

import pytest

from bot.app.build import App
from bot.messages import Attachment
from storage.repos.users import UserRepo
from tests.fakes.llm import FakeLLM, call, say
from tests.fakes.slack_api import TEAM_ID, FakeSlack, dm_event
from tests.fakes.telegram_api import BOT_ID, FakeTelegram
from tests.support.app import AppFactory, add_user, channel
from tests.support.builders import make_inbound
from tests.support.documents import pdf
from tests.support.slack import ANA, ANA_DM, Slack, start_slack
from tests.support.telegram import CHAT, Starter

LEASE = pdf(
    "Flat lease between Ana Lima and Porto Homes",
    "The monthly rent is 950 EUR, paid by the 5th of each month",
)


async def hits(app: App, channel_name: str, account: str, sender: str, query: str) -> list[str]:
    async with app.db.session() as s:
        ident = await UserRepo(s).find_identity(channel_name, account, sender)
    assert ident is not None
    out = await app.memory.retriever.search(
        ident.user_id, query, now=app.clock.now(), tz=ZoneInfo("UTC"), limit=3
    )
    return [e.item.ref for e in out.evidence]


async def kept(app: App) -> list[bytes]:
    """The documents kept in the file store."""
    files = await app.files.listing("documents")
    return [await app.files.get("documents", f.key) for f in files]


async def test_a_pdf_on_telegram_is_read_and_found_by_page(
    telegram: Starter, tg: FakeTelegram
) -> None:
    app = await telegram()

    await tg.send_document(CHAT, LEASE, "lease.pdf", "application/pdf")

    [reply] = await tg.wait_texts(CHAT, 1)
    assert reply == "I read lease.pdf (2 pages). Ask me about it any time; I'll cite the page."
    assert await kept(app) == [LEASE]
    refs = await hits(app, "telegram", str(BOT_ID), str(CHAT), "how much is the monthly rent")
    assert refs[0] == "lease.pdf p. 2"


async def test_a_chat_documents_name_is_kept_without_control_characters(any_db_app: App) -> None:
    # What a chat app sends as the file name is the sender's to choose: a NUL failed the store
    # on PostgreSQL, and an escape sequence reached the operator's terminal.
    app = any_db_app
    await add_user(app, "ana")
    sent = make_inbound("", sender="ana")
    sent.attachments.append(
        Attachment("document", mime_type="application/pdf", name="le\x00ase\x1b[2J.pdf", data=LEASE)
    )

    await app.dispatcher.handle(sent)

    assert channel(app).texts("ana") == [
        "I read lease[2J.pdf (2 pages). Ask me about it any time; I'll cite the page."
    ]


async def test_an_answer_cites_the_page(app: App, fake_llm: FakeLLM) -> None:
    await add_user(app, "ana")
    sent = make_inbound("", sender="ana")
    sent.attachments.append(
        Attachment("document", mime_type="application/pdf", name="lease.pdf", data=LEASE)
    )
    await app.dispatcher.handle(sent)
    fake_llm.add(call("search_memory", {"query": "monthly rent"}), say("950 EUR a month [1]."))

    await app.dispatcher.handle(make_inbound("What's my monthly rent?", sender="ana"))

    answer = channel(app).sent[-1]
    assert answer.text == "950 EUR a month [1]."
    [cited] = answer.citations
    assert (cited.kind, cited.channel) == ("document", "lease.pdf p. 2")


async def test_a_file_that_is_not_a_pdf_is_kept_and_the_person_told(
    app: App, fake_llm: FakeLLM
) -> None:
    await add_user(app, "ana")
    sent = make_inbound("", sender="ana")
    sent.attachments.append(
        Attachment("document", mime_type="application/pdf", name="x.pdf", data=b"not a pdf")
    )

    result = await app.dispatcher.handle(sent)

    assert result.status == "answered"
    [reply] = channel(app).texts("ana")
    assert reply.startswith("I kept x.pdf, but it is not a PDF I can open")
    assert fake_llm.chat_requests == []


@pytest.fixture
async def slack(
    app_factory: AppFactory, fake_llm: FakeLLM, fake_slack: FakeSlack
) -> AsyncIterator[Slack]:
    started = await start_slack(app_factory, fake_llm, fake_slack, "http")
    await add_user(started.app, ANA, channel_name="slack", account=TEAM_ID)
    yield started
    await started.adapter.stop()


async def test_a_pdf_in_a_slack_dm_is_read(slack: Slack) -> None:
    file = slack.fake.add_file(LEASE, "lease.pdf", "application/pdf")

    await slack.post(dm_event("", subtype="file_share", files=[file]))

    assert slack.fake.texts(ANA_DM) == [
        "I read lease.pdf (2 pages). Ask me about it any time; I'll cite the page."
    ]
    refs = await hits(slack.app, "slack", TEAM_ID, ANA, "monthly rent")
    assert refs[0] == "lease.pdf p. 2"

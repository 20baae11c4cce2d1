"""Hardening (#29) item 5: a hostile PDF costs bounded time and memory, gets a plain refusal
naming the limit, and nothing of it is stored. The PDFs are built here (tests/support)."""

from __future__ import annotations

import resource
import time

from sqlmodel import select

from bot.agent.documents import Documents
from bot.app.build import App
from bot.isolated import Bounds
from bot.messages import Attachment
from storage.models import DocumentChunk, Message
from tests.fakes.llm import FakeLLM
from tests.support.app import add_user, channel
from tests.support.builders import make_inbound
from tests.support.documents import many_pages_pdf, pdf, unpacking_pdf


def _rss_mb() -> float:
    """This process's peak resident memory so far."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


async def _send(app: App, name: str, data: bytes) -> tuple[str, float]:
    """Send ``data`` as a PDF from ana; her one reply and how long the turn took."""
    sent = make_inbound("", sender="ana")
    sent.attachments.append(
        Attachment("document", mime_type="application/pdf", name=name, data=data)
    )
    start = time.monotonic()
    result = await app.dispatcher.handle(sent)
    seconds = time.monotonic() - start
    assert result.status == "answered"
    [reply] = channel(app).texts("ana")
    return reply, seconds


async def _nothing_stored(app: App) -> None:
    assert await app.files.listing("documents") == []
    async with app.db.session() as s:
        assert (await s.exec(select(DocumentChunk))).all() == []
        for msg in (await s.exec(select(Message))).all():
            assert not (msg.meta or {}).get("documents")


async def test_a_pdf_that_unpacks_to_a_gigabyte_is_refused_in_plain_words(
    app: App, fake_llm: FakeLLM
) -> None:
    await add_user(app, "ana")
    bomb = unpacking_pdf()  # 1 MB on the wire, 1 GiB unpacked
    assert len(bomb) < 1_200_000
    before = _rss_mb()

    reply, seconds = await _send(app, "bomb.pdf", bomb)

    grown = _rss_mb() - before
    print(f"1 GiB bomb: {seconds:.2f} s, this process grew {grown:.0f} MB")
    assert reply == (
        "I did not keep bomb.pdf: a part of it unpacks to more than 32 MB, my limit. "
        "Nothing of it was stored."
    )
    assert seconds < 10 and grown < 100
    await _nothing_stored(app)
    assert fake_llm.chat_requests == []


async def test_a_pdf_with_85000_pages_is_refused_before_they_are_read(app: App) -> None:
    await add_user(app, "ana")
    huge = many_pages_pdf(85_000)  # 13.6 MB
    before = _rss_mb()

    reply, seconds = await _send(app, "huge.pdf", huge)

    grown = _rss_mb() - before
    print(f"85,000 pages: {seconds:.2f} s, this process grew {grown:.0f} MB")
    assert reply == (
        "I did not keep huge.pdf: it has 85000 pages and I read at most 500. "
        "Nothing of it was stored."
    )
    assert seconds < 10 and grown < 100
    await _nothing_stored(app)


async def test_a_page_tree_that_lies_about_its_count_is_refused_too(app: App) -> None:
    await add_user(app, "ana")

    reply, seconds = await _send(app, "liar.pdf", many_pages_pdf(85_000, declared=1))

    assert reply == (
        "I did not keep liar.pdf: it has more than 500 pages, my limit. Nothing of it was stored."
    )
    assert seconds < 10
    await _nothing_stored(app)


async def test_reading_past_its_time_or_memory_is_stopped_and_nothing_is_kept(app: App) -> None:
    user = await add_user(app, "ana")
    assert user.id is not None
    lease = Attachment("document", name="lease.pdf", data=pdf("The rent is 950 EUR"))

    slow = Documents(
        db=app.db,
        files=app.files,
        index=None,
        bounds=Bounds(seconds=0.01, memory_bytes=512_000_000, output_bytes=1_000_000),
    )
    read = await slow.keep(user.id, 1, lease, 0)
    assert read.reply() == (
        "I did not keep lease.pdf: it took longer than 0.01 seconds, my limit. "
        "Nothing of it was stored."
    )

    small = Documents(
        db=app.db,
        files=app.files,
        index=None,
        bounds=Bounds(seconds=30, memory_bytes=100_000_000, output_bytes=1_000_000),
    )
    bomb = Attachment("document", name="bomb.pdf", data=unpacking_pdf(8))
    read = await small.keep(user.id, 1, bomb, 1)
    assert read.reply() == (
        "I did not keep bomb.pdf: it needed more than 100 MB of memory, my limit. "
        "Nothing of it was stored."
    )
    await _nothing_stored(app)

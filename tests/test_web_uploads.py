"""Uploads from the web page and the API (issue 16/19): a PDF or a photo goes through dispatch
as a message on the ``web`` channel, is read or kept by the same Documents and Photos services
as a chat's, and is refused (nothing stored) when too big or of another kind.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
from sqlmodel import select

from bot.app.build import App
from storage.models import DocumentChunk, User
from tests.fakes.llm import FakeLLM, Step, call, say
from tests.support.app import AppFactory, add_user
from tests.support.documents import pdf
from tests.support.web import client_for, sign_in

LEASE = pdf(
    "Flat lease between Ana Lima and Porto Homes",
    "The monthly rent is 950 EUR, paid by the 5th of each month",
    "Signed in Porto on 2 May",
)
PNG = b"\x89PNG\r\n\x1a\n a picture of a whiteboard " + bytes(range(256)) * 4
SEEN = {"description": "A whiteboard with the sprint plan.", "text": "ship uploads friday"}


async def kept(app: App) -> list[bytes]:
    """Every document and picture kept in the file store."""
    out = []
    for kind in ("documents", "photos"):
        out += [await app.files.get(kind, f.key) for f in await app.files.listing(kind)]
    return out


async def chunks_of(app: App, user: User) -> int:
    """Searchable document pieces stored for ``user``."""
    assert user.id is not None
    async with app.db.session() as s:
        rows = await s.exec(select(DocumentChunk).where(DocumentChunk.user_id == user.id))
        return len(rows.all())


async def token_for(app: App, user: User) -> dict[str, str]:
    """An Authorization header with a fresh personal API token of ``user``."""
    assert user.id is not None
    _, token = await app.web.auth.new_api_token(user.id, "script", "write")
    return {"Authorization": f"Bearer {token}"}


def hit_texts(found: httpx.Response) -> list[str]:
    """The texts of an API memory search's hits."""
    assert found.status_code == 200, found.text
    return [h["text"] for h in found.json()["items"]]


async def test_a_pdf_uploaded_on_the_page_is_read_said_and_found_by_memory_search(
    app: App, fake_llm: FakeLLM
) -> None:
    ann = await add_user(app, "ann")
    async with client_for(app) as client:
        csrf = await sign_in(app, client, ann)
        form = await client.get("/upload")
        assert 'enctype="multipart/form-data"' in form.text

        sent = await client.post(
            "/upload",
            data={"csrf": csrf, "note": ""},
            files={"file": ("lease.pdf", LEASE, "application/pdf")},
        )
        assert sent.status_code == 303, sent.text
        page = await client.get(sent.headers["location"])

        assert "I read lease.pdf (3 pages). Ask me about it any time" in page.text
        assert "lease.pdf: 3 pages, now searchable" in page.text
        found = await client.get("/memory", params={"q": "monthly rent"})
        assert "950 EUR" in found.text
    # The same Documents service as a chat: the file is kept and read by page, no model call.
    assert await kept(app) == [LEASE]
    assert await chunks_of(app, ann) == 3
    assert fake_llm.chat_requests == []


async def test_a_pdf_with_a_question_is_read_then_the_question_answered(
    app: App, fake_llm: FakeLLM
) -> None:
    answers = [call("search_memory", {"query": "monthly rent"}), say("950 EUR a month [1].")]

    def respond(body: dict[str, Any]) -> Step:
        if body.get("model") != "fake-smart":
            return say('{"route": "agent"}')  # the router; after-turn work finds nothing
        return answers.pop(0)

    fake_llm.default = respond
    ann = await add_user(app, "ann")
    async with client_for(app) as client:
        answer = await client.post(
            "/api/v1/uploads",
            data={"note": "What's the monthly rent in this lease?"},
            files={"file": ("lease.pdf", LEASE, "application/pdf")},
            headers=await token_for(app, ann),
        )
    assert answer.status_code == 201, answer.text
    out = answer.json()
    assert out["said"] == [
        "I read lease.pdf (3 pages). Ask me about it any time; I'll cite the page.",
        "950 EUR a month [1].\n[1] lease.pdf p. 2: The monthly rent is 950 EUR, paid by the 5th "
        "of each month",
    ]
    assert out["status"] == "answered"
    assert out["documents"] == [{"name": "lease.pdf", "pages": 3, "chunks": 3, "searchable": True}]


async def test_the_api_stores_a_pdf_and_another_users_token_cannot_see_it(
    any_db_app: App,
) -> None:
    app = any_db_app  # SQLite, and PostgreSQL when LIFEBOT_TEST_POSTGRES_URL is set
    ann = await add_user(app, "ann")
    bob = await add_user(app, "bob")
    anns, bobs = await token_for(app, ann), await token_for(app, bob)
    async with client_for(app) as client:
        sent = await client.post(
            "/api/v1/uploads",
            files={"file": ("lease.pdf", LEASE, "application/pdf")},
            headers=anns,
        )
        assert sent.status_code == 201, sent.text
        stored = sent.json()
        assert stored["documents"][0]["searchable"] is True
        message_id = stored["message_id"]

        rent = {"q": "monthly rent"}
        assert any(
            "950 EUR" in t
            for t in hit_texts(await client.get("/api/v1/memory/search", params=rent, headers=anns))
        )
        bobs_hits = await client.get("/api/v1/memory/search", params=rent, headers=bobs)
        assert not any("950 EUR" in t for t in hit_texts(bobs_hits))
        assert (await client.get(f"/api/v1/uploads/{message_id}", headers=anns)).status_code == 200
        assert (await client.get(f"/api/v1/uploads/{message_id}", headers=bobs)).status_code == 404
        assert (
            await client.post("/api/v1/uploads", files={"file": ("x.pdf", LEASE)})
        ).status_code == 401
    async with client_for(app) as bobs_browser:
        await sign_in(app, bobs_browser, bob)
        assert (await bobs_browser.get(f"/memory/message/{message_id}")).status_code == 404
        page = await bobs_browser.get("/upload", params={"message": message_id})
        assert page.status_code == 200
        assert "lease.pdf" not in page.text
    assert await chunks_of(app, bob) == 0


async def test_a_file_over_the_limit_is_refused_and_nothing_is_stored(
    app_factory: AppFactory, fake_llm: FakeLLM
) -> None:
    app = await app_factory(fake_llm, image_max_bytes=2000)
    ann = await add_user(app, "ann")
    big = pdf("x" * 40, *(["a page of words"] * 40))
    assert len(big) > 2000
    async with client_for(app) as client:
        api = await client.post(
            "/api/v1/uploads",
            files={"file": ("big.pdf", big, "application/pdf")},
            headers=await token_for(app, ann),
        )
        assert api.status_code == 413
        assert "too big for me" in api.json()["detail"]
        assert "I keep files up to 0.0 MB" in api.json()["detail"]
        # A body whose declared length is already far over the limit is refused unread.
        huge = b"%PDF-1.4\n" + b"0" * 200_000
        early = await client.post(
            "/api/v1/uploads",
            files={"file": ("huge.pdf", huge, "application/pdf")},
            headers=await token_for(app, ann),
        )
        assert early.status_code == 413
        assert "That file is too big for me (0.2 MB" in early.json()["detail"]

        csrf = await sign_in(app, client, ann)
        sent = await client.post(
            "/upload", data={"csrf": csrf}, files={"file": ("big.pdf", big, "application/pdf")}
        )
        page = await client.get(sent.headers["location"])
        assert "That document is too big for me" in page.text
        assert "I kept nothing." in page.text
        # Declared over the limit: refused by the request layer before any of it is read.
        sent = await client.post(
            "/upload", data={"csrf": csrf}, files={"file": ("huge.pdf", huge, "application/pdf")}
        )
        assert sent.status_code == 413
        assert "That file is too big for me (0.2 MB" in sent.text
        assert "I kept nothing." in sent.text
    assert await kept(app) == []
    assert await chunks_of(app, ann) == 0
    assert await app.web.service.memory.recent_days(ann) == []  # no message was stored either


async def test_a_file_name_keeps_no_control_characters_or_folders(any_db_app: App) -> None:
    # A terminal escape in a name reached the CLI and the log as it was sent ("\x1b[31m" turned
    # an operator's terminal red), and a right-to-left override showed "fdp.pdf" backwards.
    app = any_db_app
    ann = await add_user(app, "ann")
    async with client_for(app) as client:
        sent = await client.post(
            "/api/v1/uploads",
            files={"file": ("../\x1b[31mlease\u202e fdp.pdf", LEASE, "application/pdf")},
            headers=await token_for(app, ann),
        )
    assert sent.status_code == 201, sent.text
    [document] = sent.json()["documents"]
    assert document["name"] == ".. [31mlease fdp.pdf"
    assert document["searchable"] is True
    assert sent.json()["said"] == [
        "I read .. [31mlease fdp.pdf (3 pages). Ask me about it any time; I'll cite the page."
    ]


async def test_a_wrong_kind_of_file_is_refused_whatever_its_name_says(app: App) -> None:
    ann = await add_user(app, "ann")
    headers = await token_for(app, ann)
    async with client_for(app) as client:
        for name, data, mime in (
            ("notes.txt", b"just some text", "text/plain"),
            ("fake.pdf", b"PK\x03\x04 a zip file", "application/pdf"),
            ("photo.png", b"<svg xmlns='http://www.w3.org/2000/svg'/>", "image/png"),
        ):
            answer = await client.post(
                "/api/v1/uploads", files={"file": (name, data, mime)}, headers=headers
            )
            assert answer.status_code == 415, name
            assert f"{name} is none of those" in answer.json()["detail"]
        empty = await client.post("/api/v1/uploads", data={"note": "hi"}, headers=headers)
        assert empty.status_code == 422
    assert await kept(app) == []
    assert await app.web.service.memory.recent_days(ann) == []


async def test_the_form_without_its_csrf_token_is_refused_and_stores_nothing(app: App) -> None:
    ann = await add_user(app, "ann")
    async with client_for(app) as client:
        await sign_in(app, client, ann)
        sent = await client.post(
            "/upload", data={"csrf": "forged"}, files={"file": ("lease.pdf", LEASE)}
        )
        assert sent.status_code == 403
    assert await kept(app) == []


async def test_a_photo_is_kept_and_described_like_one_sent_in_chat(
    app_factory: AppFactory, fake_llm: FakeLLM
) -> None:
    def respond(body: dict[str, Any]) -> Step:
        content = body["messages"][0]["content"]
        if isinstance(content, list) and "memory index" in content[0]["text"]:
            return say(json.dumps(SEEN))
        return say("{}")

    fake_llm.default = respond
    app = await app_factory(fake_llm, vision=True)
    ann = await add_user(app, "ann")
    headers = await token_for(app, ann)
    async with client_for(app) as client:
        sent = await client.post(
            "/api/v1/uploads", files={"file": ("board.png", PNG, "image/png")}, headers=headers
        )
        assert sent.status_code == 201, sent.text
        out = sent.json()
        assert out["said"] == [
            "Got it, I'll remember this picture.\n"
            "I see: A whiteboard with the sprint plan.\n"
            "Text in it: ship uploads friday"
        ]
        assert out["photos"] == [
            {
                "mime_type": "image/png",
                "size": len(PNG),
                "described": True,
                "description": "A whiteboard with the sprint plan.",
            }
        ]
        found = await client.get(
            "/api/v1/memory/search", params={"q": "sprint plan whiteboard"}, headers=headers
        )
        assert any("ship uploads friday" in t for t in hit_texts(found))
    assert await kept(app) == [PNG]


async def test_without_a_vision_model_a_photo_is_kept_and_the_page_says_so(app: App) -> None:
    ann = await add_user(app, "ann")
    async with client_for(app) as client:
        csrf = await sign_in(app, client, ann)
        sent = await client.post(
            "/upload", data={"csrf": csrf}, files={"file": ("board.png", PNG, "image/png")}
        )
        page = await client.get(sent.headers["location"])
    assert "I saved your photo, but I can&#39;t see pictures" in page.text
    assert "not described yet" in page.text
    assert await kept(app) == [PNG]

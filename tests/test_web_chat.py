"""Chat on the web page (issue 31) and the web page's hardening (issue 29), over HTTP.

The Chat page is a channel like the others: a message goes through the same dispatcher (the
router, the agent, commands, documents), the answer streams back on the same request with
its sources as links to the cited turn, ``/new`` starts afresh, and a message a crash left
unanswered is announced on the page with a Retry button. The browser side is in
tests/test_web_browser.py.
"""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import httpx

from bot.app.build import App
from storage.models import Message
from storage.repos.messages import MessageRepo
from tests.fakes.llm import FakeLLM, Step, call, fail, say
from tests.support.app import add_user, channel
from tests.support.builders import make_inbound
from tests.support.documents import pdf
from tests.support.web import client_for, login_form, said, seed, sign_in

STREAM = {"Accept": "application/x-ndjson"}


def agent(fake_llm: FakeLLM, *answers: Step) -> list[dict[str, Any]]:
    """Script the smart model with ``answers``; the fast model routes to the agent and its
    after-turn work finds nothing. Returns the smart model's requests as they come."""
    steps = list(answers)
    seen: list[dict[str, Any]] = []

    def respond(body: dict[str, Any]) -> Step | None:
        if body.get("model") != "fake-smart":
            return say('{"route": "agent"}')
        seen.append(body)
        return steps.pop(0) if steps else None

    fake_llm.default = respond
    return seen


def events(resp: httpx.Response) -> list[dict[str, Any]]:
    """The streamed answer's lines."""
    assert resp.status_code == 200, resp.text
    assert resp.headers["content-type"].startswith("application/x-ndjson")
    return [json.loads(line) for line in resp.text.splitlines() if line.strip()]


async def web_rows(app: App, user_id: int) -> list[Message]:
    """Every message of the user's web conversation, in order."""
    async with app.db.session() as s:
        found = await MessageRepo(s).history(user_id, await web_conversation(app, user_id), 100)
    return [m for m in found if m.direction in ("in", "out")]


async def web_conversation(app: App, user_id: int) -> int:
    user = await app.web.service.accounts.user(user_id)
    assert user is not None
    conv = await app.web.chat.conversation(user)
    assert conv is not None
    return conv


async def test_a_question_streams_its_answer_with_a_link_to_the_cited_turn(
    app: App, fake_llm: FakeLLM
) -> None:
    ann = await add_user(app, "ann")
    assert ann.id is not None
    cello = await seed(app, ann, "I play the cello on Tuesdays")
    answer = "You play the cello on Tuesdays [1]."
    asked = agent(
        fake_llm,
        call("search_memory", {"query": "cello"}),
        Step(text=answer, chunk_size=6, chunk_delay=0.01),
    )
    async with client_for(app) as web:
        csrf = await sign_in(app, web, ann)
        page = await web.get("/chat")
        assert page.status_code == 200
        # The page's script is lifebot's own file: no inline script, no other host.
        policy = page.headers["content-security-policy"]
        assert "script-src 'self'" in policy and "require-trusted-types-for 'script'" in policy
        assert '<script src="/static/chat.js" defer></script>' in page.text
        assert "<script>" not in page.text
        # Other pages still run no script at all.
        assert "script-src 'none'" in (await web.get("/facts")).headers["content-security-policy"]

        sent = await web.post(
            "/chat", data={"csrf": csrf, "text": "when do I play the cello?"}, headers=STREAM
        )
    said_ = events(sent)
    kinds = [e["type"] for e in said_]
    assert kinds[0] == "accepted" and kinds[-1] == "done"
    assert "progress" in kinds  # "Searching your notes…" while the tool runs
    deltas = [e["text"] for e in said_ if e["type"] == "delta"]
    assert len(deltas) > 2 and "".join(deltas) == answer  # written piece by piece
    [final] = [e for e in said_ if e["type"] == "message"]
    assert final["text"] == answer and final["kind"] == "reply"
    [source] = final["sources"]
    assert source["href"] == f"/memory/message/{cello.message_id}#m{cello.message_id}"
    assert "I play the cello on Tuesdays" in source["label"]
    assert said_[-1]["status"] == "answered"
    # The question went through dispatch like any chat message: the agent saw it.
    assert asked[0]["messages"][-1]["content"] == "when do I play the cello?"

    # Reloaded (or without a script), the page shows the turn from the conversation.
    async with client_for(app) as web:
        await sign_in(app, web, ann)
        shown = (await web.get("/chat")).text
    assert "when do I play the cello?" in shown
    assert f'<a class="cite" href="/memory/message/{cello.message_id}#m{cello.message_id}">[1]' in (
        shown
    )


async def test_without_a_script_a_message_is_a_form_post_and_new_starts_afresh(
    app: App, fake_llm: FakeLLM
) -> None:
    ann = await add_user(app, "ann")
    assert ann.id is not None
    asked = agent(fake_llm, say("Good to know."), say("I don't know yet."))
    async with client_for(app) as web:
        csrf = await sign_in(app, web, ann)
        sent = await web.post("/chat", data={"csrf": csrf, "text": "I like green tea"})
        assert sent.status_code == 303 and sent.headers["location"] == "/chat#end"
        page = (await web.get("/chat")).text
        assert "I like green tea" in page and "Good to know." in page

        fresh = await web.post("/chat", data={"csrf": csrf, "data": "/new", "text": "/new"})
        assert fresh.status_code == 303
        assert "Fresh start" in (await web.get("/chat")).text
        await web.post("/chat", data={"csrf": csrf, "text": "what do I like to drink?"})
    # After /new the model no longer gets the earlier turn along.
    carried = json.dumps(asked[1]["messages"])
    assert "what do I like to drink?" in carried and "I like green tea" not in carried
    rows = await web_rows(app, ann.id)
    assert [r.text for r in rows if r.direction == "in"] == [
        "I like green tea",
        "/new",
        "what do I like to drink?",
    ]


async def test_a_pdf_attached_in_the_chat_is_read_and_asked_about(
    app: App, fake_llm: FakeLLM
) -> None:
    ann = await add_user(app, "ann")
    lease = pdf("Flat lease of Ann", "The monthly rent is 950 EUR")
    agent(fake_llm, call("search_memory", {"query": "monthly rent"}), say("950 EUR [1]."))
    async with client_for(app) as web:
        csrf = await sign_in(app, web, ann)
        sent = await web.post(
            "/chat",
            data={"csrf": csrf, "text": "what is the rent?"},
            files={"file": ("lease.pdf", lease, "application/pdf")},
            headers=STREAM,
        )
        lines = events(sent)
        messages = [e for e in lines if e["type"] == "message"]
        assert messages[0]["text"].startswith("I read lease.pdf (2 pages)")
        assert messages[-1]["text"] == "950 EUR [1]."
        [source] = messages[-1]["sources"]
        # A document is opened at the message it came with (the chat turn with the PDF).
        stored = lines[-1]["message_id"]
        assert source["href"] == f"/memory/message/{stored}#m{stored}"
        assert "lease.pdf p. 2" in source["label"]
        page = (await web.get("/chat")).text
        assert "PDF: lease.pdf (2 pages)" in page

        # Not a PDF or a picture: refused in words, nothing stored, nothing asked.
        before = len(fake_llm.chat_requests)
        bad = await web.post(
            "/chat",
            data={"csrf": csrf, "text": "and this?"},
            files={"file": ("notes.txt", b"just text", "application/pdf")},
            headers=STREAM,
        )
        assert bad.status_code == 415 and "I can take a PDF document" in bad.json()["error"]
        assert len(fake_llm.chat_requests) == before
        # A post without the session's CSRF token (another site's form) is refused.
        forged = await web.post("/chat", data={"text": "hi"}, headers=STREAM)
        assert forged.status_code == 403
    assert ann.id is not None
    assert [r.text for r in await web_rows(app, ann.id) if r.direction == "in"] == [
        "what is the rent?"
    ]


async def test_a_message_left_by_a_crash_is_announced_on_the_page_and_retried(
    any_db_app: App, fake_llm: FakeLLM
) -> None:
    app = any_db_app
    ann = await add_user(app, "ann")
    assert ann.id is not None
    # A turn killed mid-way: the message is stored in the web conversation, never answered.
    msg = app.web.uploads.message(ann, "what's on my calendar today?", prefix="chat")
    # Older than a turn can take (on PostgreSQL a newer one may be another process's turn).
    msg.received_at -= timedelta(minutes=10)
    async with app.db.session() as s:
        conv = await web_conversation(app, ann.id)
        row_id = await MessageRepo(s).record_inbound(msg, user_id=ann.id, conversation_id=conv)
    assert row_id is not None
    # The next start offers it once; nobody has the page open, so the notice waits there.
    assert await app.dispatcher.recover_unanswered(await app.dispatcher.left_unanswered()) == 1
    assert await app.dispatcher.recover_unanswered(await app.dispatcher.left_unanswered()) == 0
    agent(fake_llm, say("Nothing is on your calendar today."))
    async with client_for(app) as web:
        csrf = await sign_in(app, web, ann)
        page = (await web.get("/chat")).text
        assert "lifebot restarted while answering your message" in page
        assert page.count("restarted while answering") == 1
        assert f'value="/retry {row_id}"' in page  # the waiting message's Retry button
        today = (await web.get("/")).text
        assert "Messages not answered yet" in today and f"/chat#m{row_id}" in today

        retried = await web.post(
            "/chat",
            data={"csrf": csrf, "data": f"/retry {row_id}", "text": "/retry"},
            headers=STREAM,
        )
        [answer] = [e for e in events(retried) if e["type"] == "message"]
        assert answer["text"] == "Nothing is on your calendar today."
        page = (await web.get("/chat")).text
        assert "/retry " + str(row_id) not in page  # no longer waits
    async with app.db.session() as s:
        row = await MessageRepo(s).get(ann.id, row_id)
    assert row is not None and row.status == "answered"
    # The notice is lifebot's own words: never sent to the model as if the person said them.
    assert "restarted" not in json.dumps(fake_llm.chat_requests[-1]["messages"])


async def test_a_sign_in_post_from_another_site_is_refused_and_spends_nothing(
    app: App,
) -> None:
    ann = await add_user(app, "ann")
    assert ann.id is not None
    secret = (await app.web.auth.issue_link(ann.id)).rsplit("/", 1)[1]
    async with client_for(app) as victim:
        # Another site's page posts the attacker's link: the browser names that site.
        form = await login_form(victim, secret)
        evil = await victim.post("/login", data=form, headers={"Origin": "https://evil.example"})
        assert evil.status_code == 403 and "did not come from lifebot" in evil.text
        assert "lifebot_session" not in victim.cookies
        # A page that hides its origin (no-referrer, a sandboxed frame) is still cross-site.
        hidden = await victim.post(
            "/login", data=form, headers={"Origin": "null", "Sec-Fetch-Site": "cross-site"}
        )
        assert hidden.status_code == 403
        # Without the page's token (a form made elsewhere, whatever the headers say): refused.
        bare = await victim.post(
            "/login", data={"secret": secret}, headers={"Sec-Fetch-Site": "same-origin"}
        )
        assert bare.status_code == 403
        # A token made for another browser's nonce does not work in this one.
        async with client_for(app) as attacker:
            theirs = await login_form(attacker, secret)
        victim.cookies.delete("lifebot_login", path="/login")
        assert (await victim.post("/login", data=theirs)).status_code == 403
        # The link was never spent: pressing Sign in on its own page still works.
        mine = await login_form(victim, secret)
        done = await victim.post(
            "/login",
            data=mine,
            headers={"Origin": "http://lifebot.test", "Sec-Fetch-Site": "same-origin"},
        )
        assert done.status_code == 303 and "lifebot_session" in victim.cookies


async def test_form_results_wait_in_the_session_never_in_the_url(any_db_app: App) -> None:
    app = any_db_app  # the session's JSON column on SQLite and PostgreSQL
    ann = await add_user(app, "ann")
    seeded = await seed(app, ann, "I am allergic to peanuts")
    async with client_for(app) as web:
        csrf = await sign_in(app, web, ann)
        gone = await web.post(f"/facts/{seeded.fact_id}/forget", data={"csrf": csrf})
        assert gone.headers["location"] == "/facts"  # nothing personal in the URL
        page = (await web.get("/facts")).text
        assert "Forgotten: I am allergic to peanuts" in page
        assert f'action="/facts/{seeded.fact_id}/restore"' in page  # Undo
        # Said once: the next page does not repeat it.
        assert "Forgotten:" not in (await web.get("/facts")).text
        assert await app.web.service.facts.facts(ann) == []

        undone = await web.post(f"/facts/{seeded.fact_id}/restore", data={"csrf": csrf})
        assert "note=Kept: I am allergic to peanuts" in await said(web, undone)
        assert [f.text for f in await app.web.service.facts.facts(ann)] == [
            "I am allergic to peanuts"
        ]
        found = await web.get("/memory", params={"q": "peanuts"})
        assert "allergic to peanuts" in found.text  # searchable again

        # An error in the URL is a code of ours, never words: a crafted link says nothing.
        crafted = await web.get("/", params={"error": "Your account is locked: call 555-0100"})
        assert "555-0100" not in crafted.text and 'role="alert"' not in crafted.text
        known = await web.get("/", params={"error": "expired"})
        assert "That page had expired" in known.text


async def test_an_empty_search_says_so_in_plain_words_not_the_models_instructions(
    app: App,
) -> None:
    ann = await add_user(app, "ann")
    async with client_for(app) as web:
        await sign_in(app, web, ann)
        page = (await web.get("/memory", params={"q": "zanzibar ferry"})).text
        api = await web.get("/memory")  # signed-in page; the API answers the same below
        assert api.status_code == 200
    assert "Nothing in your memory matches that." in page
    for model_words in ("do not guess", "Say you don't know", "Say so"):
        assert model_words not in page


async def test_the_upload_page_keeps_its_answer_out_of_the_url(app: App) -> None:
    ann = await add_user(app, "ann")
    async with client_for(app) as web:
        csrf = await sign_in(app, web, ann)
        sent = await web.post(
            "/upload",
            data={"csrf": csrf, "note": ""},
            files={"file": ("lease.pdf", pdf("Lease", "Rent 950 EUR"), "application/pdf")},
        )
        assert "note=" not in sent.headers["location"]
        assert "I read lease.pdf (2 pages)" in await said(web, sent)


async def test_a_chat_message_waiting_for_retry_is_answered_from_the_today_page(
    app: App, fake_llm: FakeLLM
) -> None:
    ann = await add_user(app, "ann")  # on the "fake" chat channel
    assert ann.id is not None
    fake_llm.add(fail(503), fail(503), fail(503))  # the model is down: the message waits
    down = await app.dispatcher.handle(make_inbound("what is on today?", sender="ann"))
    assert down.status == "llm_down"
    [waiting] = await app.web.service.pending.waiting(ann)
    agent(fake_llm, say("Nothing is on today."))
    async with client_for(app) as web:
        csrf = await sign_in(app, web, ann)
        today = (await web.get("/")).text
        assert "Messages not answered yet" in today and "what is on today?" in today
        done = await web.post(f"/waiting/{waiting.id}/retry", data={"csrf": csrf})
        assert "note=Answered" in await said(web, done)
        # Another person's waiting message is not theirs to retry.
        other = await web.post("/waiting/999999/retry", data={"csrf": csrf})
        assert "error=That message no longer waits" in await said(web, other)
    # The answer went to the chat where the question was asked.
    assert channel(app).texts("ann")[-1] == "Nothing is on today."
    assert await app.web.service.pending.waiting(ann) == []


async def test_a_question_asked_in_the_web_chat_is_answered_from_the_today_page(
    app: App, fake_llm: FakeLLM
) -> None:
    # The Today page lists every waiting question with its buttons; pressing one for a
    # question asked on the Chat page said "Answered" while dispatch took the press for a
    # stranger on the web channel: a pairing code went nowhere, the owner got a pairing
    # request from "web user:1" and the question went on waiting.
    ann = await add_user(app, "ann")
    assert ann.id is not None
    agent(
        fake_llm,
        call("ask_user", {"question": "Which Ana?", "options": ["Ana Silva", "Ana from work"]}),
        say("Ana Silva said nothing about the trip."),
    )
    async with client_for(app) as web:
        csrf = await sign_in(app, web, ann)
        sent = await web.post(
            "/chat", data={"csrf": csrf, "text": "what did Ana say about the trip?"}, headers=STREAM
        )
        assert [e["text"] for e in events(sent) if e["type"] == "message"] == ["Which Ana?"]
        [asked] = await app.web.service.pending.questions(ann)
        assert f'id="question-{asked.message.id}"' in (await web.get("/")).text

        done = await web.post(f"/questions/{asked.message.id}/0", data={"csrf": csrf})
        assert "note=Answered" in await said(web, done)
        assert await app.web.service.pending.questions(ann) == []
        assert "Ana Silva said nothing about the trip." in (await web.get("/chat")).text
    said_in_chat = [m.text for m in await web_rows(app, ann.id) if m.direction == "out"]
    assert said_in_chat[-1] == "Ana Silva said nothing about the trip."
    assert await app.web.service.owner.pairings() == []

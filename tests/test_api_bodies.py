"""Bodies the API refuses in words (QA of the README's REST API): a misspelt field, a body
that is not JSON, a blank contact name. Each is a 422 that names what to change and changes
nothing, never a 200 that silently did nothing or a contact without a name.
"""

from __future__ import annotations

from typing import Any

import httpx

from bot.app.build import App
from tests.support.app import add_user
from tests.support.web import client_for, said, seed, sign_in

PROBLEM = "application/problem+json"


def _refused(answer: httpx.Response) -> dict[str, Any]:
    assert answer.status_code == 422, answer.text
    assert answer.headers["content-type"] == PROBLEM
    body: dict[str, Any] = answer.json()
    return body


async def _writer(app: App) -> dict[str, str]:
    user = await add_user(app, "ann")
    assert user.id is not None
    _, token = await app.web.auth.new_api_token(user.id, "test", "write")
    return {"Authorization": f"Bearer {token}"}


async def test_a_misspelt_settings_field_is_refused_by_name_and_changes_nothing(app: App) -> None:
    ann = await _writer(app)
    async with client_for(app) as web:
        before = (await web.get("/api/v1/me", headers=ann)).json()
        answer = await web.patch(
            "/api/v1/settings", json={"tz": "Europe/Berlin", "quiet_hours": "off"}, headers=ann
        )
        body = _refused(answer)
        assert {e["name"] for e in body["errors"]} == {"tz", "quiet_hours"}
        assert "tz" in body["detail"] and "not a field" in body["detail"]
        assert (await web.get("/api/v1/me", headers=ann)).json() == before
        # the right name still works
        ok = await web.patch("/api/v1/settings", json={"timezone": "Europe/Berlin"}, headers=ann)
        assert ok.status_code == 200 and ok.json()["timezone"] == "Europe/Berlin"


async def test_unknown_fields_are_refused_wherever_the_api_takes_a_body(app: App) -> None:
    ann = await _writer(app)
    async with client_for(app) as web:
        for path, body in [
            ("/api/v1/facts", {"text": "I play the cello", "category": "music"}),
            ("/api/v1/tokens", {"name": "phone", "scopes": ["write"]}),
            ("/api/v1/contacts", {"name": "Rui", "phone": "123"}),
        ]:
            problem = _refused(await web.post(path, json=body, headers=ann))
            assert problem["errors"][0]["in"] == "body", path
        assert (await web.get("/api/v1/facts", headers=ann)).json()["items"] == []
        assert (await web.get("/api/v1/contacts", headers=ann)).json()["items"] == []
        assert len((await web.get("/api/v1/tokens", headers=ann)).json()["items"]) == 1


async def test_a_body_that_is_not_json_is_told_so_in_words(app: App) -> None:
    ann = await _writer(app)
    headers = {**ann, "Content-Type": "application/json"}
    async with client_for(app) as web:
        body = _refused(await web.post("/api/v1/facts", content=b'{"text": "a",', headers=headers))
    assert body["errors"] == [{"in": "body", "name": "body", "problem": "not valid JSON"}]
    assert body["detail"] == "Not accepted: body: not valid JSON."


async def test_a_contact_named_only_with_spaces_is_refused(app: App) -> None:
    ann = await _writer(app)
    async with client_for(app) as web:
        body = _refused(await web.post("/api/v1/contacts", json={"name": "   "}, headers=ann))
        assert body["detail"] == "A contact needs a name."
        assert (await web.get("/api/v1/contacts", headers=ann)).json()["items"] == []
        rui = await web.post("/api/v1/contacts", json={"name": "Rui"}, headers=ann)
        assert rui.status_code == 201
        path = f"/api/v1/contacts/{rui.json()['id']}"
        body = _refused(await web.patch(path, json={"name": " \t "}, headers=ann))
        assert body["detail"] == "A contact needs a name."
        listed = (await web.get("/api/v1/contacts", headers=ann)).json()["items"]
        assert [c["name"] for c in listed] == ["Rui"]


async def test_an_edited_fact_answers_with_the_id_it_is_known_by_now(app: App) -> None:
    ann = await _writer(app)
    async with client_for(app) as web:
        made = await web.post("/api/v1/facts", json={"text": "I play the cello"}, headers=ann)
        assert made.status_code == 201
        edited = await web.put(
            f"/api/v1/facts/{made.json()['id']}", json={"text": "My bike is green"}, headers=ann
        )
        assert edited.status_code == 200
        assert edited.json()["message"] == "Saved: My bike is green"
        facts = (await web.get("/api/v1/facts", headers=ann)).json()["items"]
        assert [(f["id"], f["text"]) for f in facts] == [(edited.json()["id"], "My bike is green")]
        gone = await web.delete(f"/api/v1/facts/{edited.json()['id']}", headers=ann)
        assert gone.status_code == 204


async def test_a_search_for_nothing_is_refused_not_answered_with_anything(app: App) -> None:
    ann = await _writer(app)
    async with client_for(app) as web:
        await web.post("/api/v1/facts", json={"text": "I play the cello"}, headers=ann)
        for q in ["", "   "]:
            answer = await web.get("/api/v1/memory/search", params={"q": q}, headers=ann)
            body = _refused(answer)
            assert [e["name"] for e in body["errors"]] == ["q"], q
        found = await web.get("/api/v1/memory/search", params={"q": "cello"}, headers=ann)
        assert found.status_code == 200 and found.json()["items"]


async def test_refused_settings_change_nothing_and_do_not_echo_what_was_sent(app: App) -> None:
    ann = await _writer(app)
    async with client_for(app) as web:
        before = (await web.get("/api/v1/me", headers=ann)).json()
        for body, words in [
            ({"timezone": "Europe/Berlin", "briefing_time": "zq99"}, "Briefing time"),
            ({"quiet": "off", "timezone": "Zqland/Nowhere"}, "time zone"),
            ({"briefing_enabled": False, "preferred_channel": "zqchat"}, "channel"),
            ({"timezone": "Europe/Berlin", "quiet": "22:00-zq"}, "Quiet hours"),
        ]:
            problem = _refused(await web.patch("/api/v1/settings", json=body, headers=ann))
            assert words in problem["detail"], problem
            assert "zq" not in problem["detail"].lower(), problem  # README: never echoed
            assert (await web.get("/api/v1/me", headers=ann)).json() == before, body


async def test_new_words_no_fact_can_have_are_refused_not_answered_200(app: App) -> None:
    # PUT /facts/{id} answered 200 with the fact's old id for words it could not keep (blank,
    # two letters, 60 words): a script read it as saved. On the page, "ok" was "too long".
    ann = await _writer(app)
    async with client_for(app) as web:
        made = await web.post("/api/v1/facts", json={"text": "I play the cello"}, headers=ann)
        path = f"/api/v1/facts/{made.json()['id']}"
        for text in ["   ", "ok", " ".join(["word"] * 60), "x" * 600]:
            body = _refused(await web.put(path, json={"text": text}, headers=ann))
            assert body["detail"] == (
                "A fact is one sentence of 3 characters to 40 words (at most 500 characters); "
                "nothing was changed."
            ), text
        facts = (await web.get("/api/v1/facts", headers=ann)).json()["items"]
        assert [f["text"] for f in facts] == ["I play the cello"]
        same = await web.put(path, json={"text": "I play the cello"}, headers=ann)
        assert same.status_code == 200 and same.json()["message"] == "Nothing changed."


async def test_the_facts_page_refuses_new_words_no_fact_can_have(app: App) -> None:
    ann = await add_user(app, "ann")
    assert ann.id is not None
    mine = await seed(app, ann, "I play the cello")
    async with client_for(app) as web:
        csrf = await sign_in(app, web, ann)
        posted = await web.post(f"/facts/{mine.fact_id}/edit", data={"csrf": csrf, "text": "ok"})
        assert await said(web, posted) == (
            "error=A fact is one sentence of 3 characters to 40 words (at most 500 characters); "
            "nothing was changed."
        )
    assert [f.text for f in await app.web.service.facts.facts(ann)] == ["I play the cello"]


async def test_a_proposal_renamed_with_only_spaces_is_refused(app: App) -> None:
    # It answered 200 {"message": "A title needs at least one word."}: a script saw success.
    ann = await add_user(app, "ann")
    assert ann.id is not None
    mine = await seed(app, ann, "dinner with Rui on Friday")
    _, token = await app.web.auth.new_api_token(ann.id, "test", "write")
    headers = {"Authorization": f"Bearer {token}"}
    path = f"/api/v1/proposals/{mine.proposal_id}/rename"
    async with client_for(app) as web:
        body = _refused(await web.post(path, json={"title": " \t "}, headers=headers))
        assert body["detail"] == "A title needs at least one word."
        listed = (await web.get("/api/v1/proposals", headers=headers)).json()["items"]
        assert [p["title"] for p in listed] == ["Dinner of ann"]
        ok = await web.post(path, json={"title": "Dinner with Rui"}, headers=headers)
        assert ok.status_code == 200
        listed = (await web.get("/api/v1/proposals", headers=headers)).json()["items"]
        assert [p["title"] for p in listed] == ["Dinner with Rui"]

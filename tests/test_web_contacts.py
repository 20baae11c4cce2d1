"""Contacts on the web page and through /api/v1/contacts: editable by their owner only."""

from __future__ import annotations

from bot.app.build import App
from tests.fakes.llm import FakeLLM, say
from tests.support.app import add_user, channel
from tests.support.builders import make_inbound
from tests.support.web import client_for, said, sign_in


async def test_contacts_page_edits_and_deletes_for_their_owner_only(app: App) -> None:
    ann = await add_user(app, "ann")
    bob = await add_user(app, "bob")
    await app.dispatcher.handle(make_inbound("/contact add Ana Silva | Ana | sister", sender="ann"))
    async with client_for(app) as web:
        csrf = await sign_in(app, web, ann)
        page = await web.get("/contacts")
        assert page.status_code == 200 and 'value="Ana Silva"' in page.text
        [ana_id] = [int(x.split('"')[0]) for x in page.text.split('id="contact-')[1:]]
        done = await web.post(
            f"/contacts/{ana_id}/edit",
            data={
                "csrf": csrf,
                "name": "Ana Silva",
                "aliases": "Ana, Aninha",
                "relationship": "sister",
                "reach": "+351 912 345 678",
            },
        )
        assert "note=Saved" in await said(web, done)
        added = await web.post(
            "/contacts/add", data={"csrf": csrf, "name": "Jordan Lee", "relationship": "friend"}
        )
        assert "note=Saved: Jordan Lee" in await said(web, added)
        clash = await web.post(
            f"/contacts/{ana_id}/edit", data={"csrf": csrf, "name": "jordan lee"}
        )
        assert "already have" in await said(web, clash)
        forged = await web.post(f"/contacts/{ana_id}/delete", data={"csrf": "x"})
        assert forged.status_code == 403

    # The chat sees the edit: the new alias and the number.
    listed = (await app.dispatcher.handle(make_inbound("/contacts", sender="ann"))).reply or ""
    assert "Ana Silva · sister · also called Ana, Aninha · reach: +351 912 345 678" in listed

    async with client_for(app) as web:
        csrf_bob = await sign_in(app, web, bob)
        assert "no contacts yet" in (await web.get("/contacts")).text
        stolen = await web.post(f"/contacts/{ana_id}/delete", data={"csrf": csrf_bob})
        assert stolen.status_code == 404

    assert ann.id is not None and bob.id is not None
    _, ann_token = await app.web.auth.new_api_token(ann.id, "script", "write")
    _, bob_token = await app.web.auth.new_api_token(bob.id, "script", "write")
    api = {"Authorization": f"Bearer {ann_token}"}
    other = {"Authorization": f"Bearer {bob_token}"}
    async with client_for(app) as web:
        names = [
            c["name"] for c in (await web.get("/api/v1/contacts", headers=api)).json()["items"]
        ]
        assert names == ["Ana Silva", "Jordan Lee"]
        assert (await web.get("/api/v1/contacts", headers=other)).json()["items"] == []
        assert (await web.get("/api/v1/contacts")).status_code == 401
        made = await web.post(
            "/api/v1/contacts", headers=api, json={"name": "Rui", "aliases": ["Ruizinho"]}
        )
        assert made.status_code == 201 and made.json()["aliases"] == ["Ruizinho"]
        rui = made.json()["id"]
        changed = await web.patch(
            f"/api/v1/contacts/{rui}", headers=api, json={"reach": "rui@x.pt"}
        )
        assert changed.json()["reach"] == "rui@x.pt" and changed.json()["aliases"] == ["Ruizinho"]
        hidden = await web.patch(f"/api/v1/contacts/{rui}", headers=other, json={"name": "x"})
        assert hidden.status_code == 404
        assert (await web.delete(f"/api/v1/contacts/{rui}", headers=other)).status_code == 404
        assert (await web.delete(f"/api/v1/contacts/{rui}", headers=api)).status_code == 204
        clash = await web.patch(
            f"/api/v1/contacts/{ana_id}", headers=api, json={"name": "Jordan Lee"}
        )
        assert clash.status_code == 409


async def test_a_contact_saved_from_chat_shows_on_the_page(app: App, fake_llm: FakeLLM) -> None:
    ann = await add_user(app, "ann")
    fake_llm.add(say("Noted."))
    await app.dispatcher.handle(make_inbound("Jordan is my colleague", sender="ann"))
    sent = channel(app).sent[-1]
    await app.dispatcher.handle(
        make_inbound("Yes", sender="ann", callback_data=sent.buttons[0].data)
    )
    async with client_for(app) as web:
        await sign_in(app, web, ann)
        page = await web.get("/contacts")
        assert 'value="Jordan"' in page.text and 'value="colleague"' in page.text


async def test_adding_a_contact_again_updates_only_the_fields_given(any_db_app: App) -> None:
    """The page's add form, the API and /contact add each once re-saved the whole contact, so
    adding Ana again with just her email wiped her other names and her relationship."""
    app = any_db_app
    ann = await add_user(app, "ann")
    assert ann.id is not None

    async def ana() -> dict[str, object]:
        async with client_for(app) as web:
            items = (await web.get("/api/v1/contacts", headers=api)).json()["items"]
        [found] = [c for c in items if str(c["name"]).lower() == "ana silva"]
        return dict(found)

    _, token = await app.web.auth.new_api_token(ann.id, "script", "write")
    api = {"Authorization": f"Bearer {token}"}
    await app.dispatcher.handle(
        make_inbound("/contact add Ana Silva | Ana, Aninha | sister | +351 912", sender="ann")
    )
    # Chat: a new way to reach her; the blank fields are "not given".
    again = await app.dispatcher.handle(
        make_inbound("/contact add Ana Silva | | | ana@example.org", sender="ann")
    )
    assert "sister" in (again.reply or "")
    assert await ana() == {
        "id": (await ana())["id"],
        "name": "Ana Silva",
        "aliases": ["Ana", "Aninha"],
        "relationship": "sister",
        "reach": "ana@example.org",
    }
    # The page's add form with only the name and a relationship.
    async with client_for(app) as web:
        csrf = await sign_in(app, web, ann)
        done = await web.post(
            "/contacts/add", data={"csrf": csrf, "name": "Ana Silva", "relationship": "twin"}
        )
        assert "note=Saved: Ana Silva" in await said(web, done)
    got = await ana()
    assert (got["aliases"], got["relationship"], got["reach"]) == (
        ["Ana", "Aninha"],
        "twin",
        "ana@example.org",
    )
    # The API: omitted fields stay (its schema says so), 200 for an update.
    async with client_for(app) as web:
        r = await web.post("/api/v1/contacts", headers=api, json={"name": "ana silva"})
        assert r.status_code == 200, r.text
        r = await web.post(
            "/api/v1/contacts", headers=api, json={"name": "Ana Silva", "reach": "x"}
        )
        assert r.status_code == 200 and r.json()["aliases"] == ["Ana", "Aninha"]
    got = await ana()
    assert (got["name"], got["relationship"], got["reach"]) == ("Ana Silva", "twin", "x")
    listed = (await app.dispatcher.handle(make_inbound("/contacts", sender="ann"))).reply or ""
    assert listed.count("Ana Silva") == 1  # re-added in another case: still one contact


async def test_contact_fields_are_capped_on_every_path(any_db_app: App) -> None:
    """The page's forms stored a 60 KB name, other names or address as sent (only the add
    form's name was checked); now every path refuses an over-long field in plain words and
    stores nothing."""
    app = any_db_app
    ann = await add_user(app, "ann")
    assert ann.id is not None
    _, token = await app.web.auth.new_api_token(ann.id, "script", "write")
    api = {"Authorization": f"Bearer {token}"}
    big = "x" * 60_000  # under the request layer's 64 KB body cap: the route must check
    async with client_for(app) as web:
        csrf = await sign_in(app, web, ann)
        huge = await web.post("/contacts/add", data={"csrf": csrf, "name": "y" * 1_000_000})
        assert huge.status_code == 413  # a megabyte never reaches the route
        for field, limit in (("aliases", 200), ("relationship", 60), ("reach", 200)):
            r = await web.post("/contacts/add", data={"csrf": csrf, "name": "Rui", field: big})
            assert f"at most {limit} characters" in await said(web, r), field
        r = await web.post("/contacts/add", data={"csrf": csrf, "name": "Ana", "reach": "a@b.pt"})
        assert "note=Saved: Ana" in await said(web, r)
        page = (await web.get("/contacts")).text
        [ana_id] = [int(x.split('"')[0]) for x in page.split('id="contact-')[1:]]
        for field, limit in (("name", 80), ("aliases", 200), ("relationship", 60), ("reach", 200)):
            r = await web.post(f"/contacts/{ana_id}/edit", data={"csrf": csrf, field: big})
            assert f"at most {limit} characters" in await said(web, r), field
        r = await web.post(
            "/api/v1/contacts", headers=api, json={"name": "Rui", "aliases": ["z" * 300]}
        )
        assert r.status_code == 422 and "200" in r.text, r.text
        r = await web.patch(f"/api/v1/contacts/{ana_id}", headers=api, json={"aliases": [big]})
        assert r.status_code == 422, r.text
    line = f"/contact add Rui | {big[:5000]}"
    reply = await app.dispatcher.handle(make_inbound(line, sender="ann"))
    assert "at most 200 characters" in (reply.reply or "")
    async with client_for(app) as web:
        stored = (await web.get("/api/v1/contacts", headers=api)).json()["items"]
    assert [(c["name"], c["aliases"], c["relationship"], c["reach"]) for c in stored] == [
        ("Ana", [], "", "a@b.pt")
    ]


async def test_a_nul_typed_into_a_page_form_is_dropped_not_a_500(any_db_app: App) -> None:
    """Forms reach storage as typed; PostgreSQL's text columns refuse a NUL (a 500)."""
    app = any_db_app
    ann = await add_user(app, "ann")
    async with client_for(app) as web:
        csrf = await sign_in(app, web, ann)
        for path, fields in (
            ("/contacts/add", {"name": "Ri\x00ta", "relationship": "sis\x00ter"}),
            ("/settings/tokens", {"name": "lap\x00top"}),
            ("/devices", {"name": "kit\x00chen"}),
        ):
            r = await web.post(path, data={"csrf": csrf, **fields})
            assert r.status_code < 500, (path, r.status_code)
        contacts = (await web.get("/contacts")).text
        settings = (await web.get("/settings")).text
        devices = (await web.get("/devices")).text
    assert "Rita" in contacts and "sister" in contacts
    assert "laptop" in settings
    assert "kitchen" in devices

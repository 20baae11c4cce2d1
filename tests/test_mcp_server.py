"""lifebot as an MCP server (issue 32), driven by the SDK's own client.

Over streamable HTTP against a real served web page (a personal API token as bearer), and over
stdio against a real ``lifebot mcp serve`` process: an imported conversation is searched and
the hits cite their turns; the time window of the question is a hard filter; another user's
token gets none of it and cannot open its sources; a read-only token cannot change anything;
no token or a bad one is a 401 and nothing else.
"""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from mcp.shared.exceptions import MCPError

from bot.app.build import App, start_channels
from storage.repos.facts import FactRepo
from tests.fakes.llm import FakeLLM
from tests.support.app import AppFactory, add_user
from tests.support.mcp import KAYAK, http_client, import_chat, stdio_lifebot, structured, text_of

TOOLS = {
    "search_memory",
    "day_timeline",
    "list_facts",
    "upcoming",
    "remember",
    "forget",
    "set_reminder",
}


def _mcp_started(app: App) -> bool:
    """Whether the app's /mcp endpoint has started the SDK's session manager."""
    return app.mcp.http is not None and app.mcp.http.started


async def served(app_factory: AppFactory, fake_llm: FakeLLM) -> tuple[App, str]:
    """A started app serving its web page on a free port; (app, the /mcp URL)."""
    app = await app_factory(fake_llm, web_enabled=True, web_port=0, jobs_enabled=False)
    await start_channels(app)
    return app, f"http://127.0.0.1:{app.web.server.bound_port}/mcp"


async def test_http_search_cites_the_imported_turns_and_only_the_tokens_user_sees_them(
    app_factory: AppFactory, fake_llm: FakeLLM, tmp_path: Path
) -> None:
    app, url = await served(app_factory, fake_llm)
    ann = await add_user(app, "ann")
    bob = await add_user(app, "bob")
    assert ann.id is not None and bob.id is not None
    await import_chat(app, ann.id, tmp_path, KAYAK)
    await import_chat(
        app, bob.id, tmp_path, [("b1", "2024-03-02T11:00:00+00:00", "me", "kayaking club dues")]
    )
    _, ann_token = await app.web.auth.new_api_token(ann.id, "claude")
    _, bob_token = await app.web.auth.new_api_token(bob.id, "claude")
    # Serving the page does not start MCP (its SDK costs a second); the first request does.
    assert not _mcp_started(app)

    async with http_client(url, ann_token) as client:
        assert {t.name for t in (await client.list_tools()).tools} >= TOOLS
        assert _mcp_started(app)
        found = structured(await client.call_tool("search_memory", {"query": "kayaking"}))
        hits = found["hits"]
        assert hits, found
        said = [h for h in hits if h["kind"] == "message"]
        assert {h["original_id"] for h in said} == {"k1", "k2"}  # the ids of the export file
        assert {h["kind"] for h in hits} <= {"message", "episode"}  # and the talk's summary
        assert "kayaking club dues" not in str(hits)  # bob's words are not ann's memory
        first = said[0]
        assert first["channel"] == "import" and first["speaker"] in ("Rui", "me")
        assert first["timestamp"].startswith("2024-03-02")
        cited = await client.read_resource(first["source_uri"])
        turn = cited.contents[0].text  # type: ignore[union-attr]
        assert f"→ Sat 02 Mar 2024 {first['timestamp'][11:16]}" in turn
        assert first["text"] in turn
        # The time in the question is a hard window: the bakery (5 March) is outside it.
        window = structured(
            await client.call_tool("search_memory", {"query": "what did Rui say on 2 March 2024"})
        )
        assert window["searched_window"]
        assert window["hits"] and all("2024-03-02" in h["timestamp"] for h in window["hits"])
        nothing = structured(
            await client.call_tool("search_memory", {"query": "kayaking in July 1999"})
        )
        assert nothing["hits"] == [] and nothing["note"]
        day = structured(await client.call_tool("day_timeline", {"day": "2024-03-02"}))
        assert [t["text"] for t in day["turns"]] == [text for _, _, _, text in KAYAK[:3]]
        ann_source = first["source_uri"]
        # A token revoked while a client is connected stops working at the next request.
        [row] = await app.web.auth.api_tokens(ann.id)
        assert row.id is not None
        await app.web.auth.revoke_api_token(ann.id, row.id)
        with pytest.raises(MCPError, match="error response"):
            await client.call_tool("search_memory", {"query": "kayaking"})

    async with http_client(url, bob_token) as client:
        theirs = structured(await client.call_tool("search_memory", {"query": "kayaking"}))
        assert theirs["hits"] and all("Arrabida" not in h["text"] for h in theirs["hits"])
        assert {h["original_id"] for h in theirs["hits"] if h["kind"] == "message"} == {"b1"}
        day = structured(await client.call_tool("day_timeline", {"day": "2024-03-02"}))
        assert [t["text"] for t in day["turns"]] == ["kayaking club dues"]
        # Ann's source id is no source for bob: the same answer as an id that never existed.
        with pytest.raises(MCPError) as hers:
            await client.read_resource(ann_source)
        with pytest.raises(MCPError) as missing:
            await client.read_resource("lifebot://source/message/999999")
        assert str(hers.value).replace(ann_source.rsplit("/", 1)[1], "N") == str(
            missing.value
        ).replace("999999", "N")


async def test_http_refuses_requests_without_a_valid_token(
    app_factory: AppFactory, fake_llm: FakeLLM
) -> None:
    app, url = await served(app_factory, fake_llm)
    ann = await add_user(app, "ann")
    assert ann.id is not None
    row, revoked = await app.web.auth.new_api_token(ann.id, "old")
    assert row.id is not None
    await app.web.auth.revoke_api_token(ann.id, row.id)
    hello = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "curl", "version": "1"},
        },
    }
    accept = {"Accept": "application/json, text/event-stream"}
    async with httpx.AsyncClient() as raw:
        for auth in (None, "Bearer lbk_not-a-token", f"Bearer {revoked}", "Basic YW5uOmFubg=="):
            headers = {**accept, **({"Authorization": auth} if auth else {})}
            answer = await raw.post(url, json=hello, headers=headers)
            assert answer.status_code == 401, auth
            assert answer.json()["error"] == "invalid_token"
            assert "mcp-session-id" not in answer.headers
            assert "lifebot" not in answer.text.replace("lifebot's Settings", "")  # no server info
        # The SDK's client gets no further either.
        with pytest.raises(Exception):  # noqa: B017, PT011  (the SDK raises its HTTP error)
            async with http_client(url, None):
                pass


async def test_a_read_only_token_cannot_change_anything_and_a_write_token_can(
    app_factory: AppFactory, fake_llm: FakeLLM
) -> None:
    app, url = await served(app_factory, fake_llm)
    ann = await add_user(app, "ann")
    assert ann.id is not None
    await app.memory.remember(ann.id, "My sister is called Rita")
    async with app.db.session() as s:
        [rita] = await FactRepo(s).active(ann.id)
    _, reader = await app.web.auth.new_api_token(ann.id, "agent")
    _, writer = await app.web.auth.new_api_token(ann.id, "agent", "write")

    async with http_client(url, reader) as client:
        for name, args in (
            ("remember", {"text": "I am allergic to peanuts"}),
            ("forget", {"fact_id": rita.id}),
            ("set_reminder", {"request": "tomorrow at 9 to call mum"}),
        ):
            refused = await client.call_tool(name, args)
            assert refused.is_error, name
            assert "read-only" in text_of(refused) and "nothing was changed" in text_of(refused)
        facts = structured(await client.call_tool("list_facts", {}))
        assert [f["text"] for f in facts["facts"]] == ["My sister is called Rita"]
    async with app.db.session() as s:
        assert [f.id for f in await FactRepo(s).active(ann.id)] == [rita.id]
    assert await app.web.service.reminders.reminders(ann) == []

    async with http_client(url, writer, mode="legacy") as client:  # a pre-2026 client too
        made = structured(await client.call_tool("remember", {"text": "I am allergic to peanuts"}))
        assert "remembered as fact" in made["message"]
        gone = structured(await client.call_tool("forget", {"fact_id": rita.id}))
        assert "forgot fact" in gone["message"]
        set_ = structured(
            await client.call_tool("set_reminder", {"request": "tomorrow at 9 to call mum"})
        )
        assert "reminder #" in set_["message"]
        soon = structured(await client.call_tool("upcoming", {"days": 3}))
        assert [r["text"] for r in soon["reminders"]] == ["call mum"]
        memory_file = await client.read_resource("lifebot://memory.md")
        text = memory_file.contents[0].text  # type: ignore[union-attr]
        assert "allergic to peanuts" in text and "Rita" not in text
    async with app.db.session() as s:
        assert [f.text for f in await FactRepo(s).active(ann.id)] == ["I am allergic to peanuts"]


async def test_stdio_serves_one_users_memory_read_only_unless_asked(
    app_factory: AppFactory, fake_llm: FakeLLM, tmp_path: Path
) -> None:
    app = await app_factory(fake_llm, jobs_enabled=False)
    ann = await add_user(app, "ann")
    bob = await add_user(app, "bob")
    assert ann.id is not None and bob.id is not None
    await import_chat(app, ann.id, tmp_path, KAYAK)
    env = {"LIFEBOT_DATA_DIR": str(tmp_path / "data")}

    async with stdio_lifebot(tmp_path, env, "--user", "ann") as client:
        found = structured(await client.call_tool("search_memory", {"query": "kayaking"}))
        assert {h["original_id"] for h in found["hits"]} & {"k1", "k2"}
        cited = await client.read_resource(found["hits"][0]["source_uri"])
        assert "Arrabida" in cited.contents[0].text  # type: ignore[union-attr]
        refused = await client.call_tool("remember", {"text": "I like figs"})
        assert refused.is_error and "read-only" in text_of(refused)

    async with stdio_lifebot(tmp_path, env, "--user", str(bob.id), "--write") as client:
        found = structured(await client.call_tool("search_memory", {"query": "kayaking"}))
        assert found["hits"] == []
        made = structured(await client.call_tool("remember", {"text": "I like figs"}))
        assert "remembered" in made["message"]
    async with app.db.session() as s:
        assert [f.text for f in await FactRepo(s).active(bob.id)] == ["I like figs"]
        assert await FactRepo(s).active(ann.id) == []


async def test_stdio_with_a_token_stops_answering_once_the_token_is_revoked(
    app_factory: AppFactory, fake_llm: FakeLLM, tmp_path: Path
) -> None:
    """A token revoked on the Settings page while ``mcp serve --token`` runs stops at once."""
    app = await app_factory(fake_llm, jobs_enabled=False)
    ann = await add_user(app, "ann")
    assert ann.id is not None
    await import_chat(app, ann.id, tmp_path, KAYAK)
    row, secret = await app.web.auth.new_api_token(ann.id, "desktop")
    assert row.id is not None
    env = {"LIFEBOT_DATA_DIR": str(tmp_path / "data")}

    async with stdio_lifebot(tmp_path, env, "--token", secret) as client:
        found = structured(await client.call_tool("search_memory", {"query": "kayaking"}))
        assert {h["original_id"] for h in found["hits"]} & {"k1", "k2"}
        await app.web.auth.revoke_api_token(ann.id, row.id)
        with pytest.raises(MCPError, match="revoked") as refused:
            await client.call_tool("search_memory", {"query": "kayaking"})
        assert "Arrabida" not in str(refused.value)
        with pytest.raises(MCPError, match="revoked"):
            await client.read_resource(found["hits"][0]["source_uri"])


async def test_ids_and_days_no_row_can_have_are_answered_in_words_and_only_post_is_served(
    app_factory: AppFactory, fake_llm: FakeLLM, app_database_url: str
) -> None:
    # Each of these was an "Error executing tool" or "Error creating resource" with a
    # traceback in the log (an overflow deep in a query or in date arithmetic), and a GET held
    # an empty event stream open for as long as the client liked.
    app = await app_factory(
        fake_llm,
        web_enabled=True,
        web_port=0,
        jobs_enabled=False,
        database_url_setting=app_database_url,
    )
    await start_channels(app)
    url = f"http://127.0.0.1:{app.web.server.bound_port}/mcp"
    ann = await add_user(app, "ann", timezone="Asia/Tokyo")  # the day starts before UTC's
    assert ann.id is not None
    _, writer = await app.web.auth.new_api_token(ann.id, "agent", "write")

    async with http_client(url, writer) as client:
        for fact_id in (2**31, 2**40):
            refused = await client.call_tool("forget", {"fact_id": fact_id})
            assert refused.is_error and "less than or equal to 2147483647" in text_of(refused)
        for day in ("0001-01-01", "9999-12-31"):
            refused = await client.call_tool("day_timeline", {"day": day})
            assert refused.is_error and "Input should be" in text_of(refused), day
        ok = structured(await client.call_tool("day_timeline", {"day": "2024-03-02"}))
        assert ok["turns"] == []
        for source_id in ("2147483648", "99999999999999999999", "²", "0"):
            with pytest.raises(MCPError) as missing:
                await client.read_resource(f"lifebot://source/message/{source_id}")
            assert f"there is no message {source_id}" in str(missing.value)

    headers = {"Authorization": f"Bearer {writer}", "Accept": "application/json, text/event-stream"}
    async with httpx.AsyncClient(timeout=5) as raw:
        for method in ("GET", "DELETE", "PUT"):
            answer = await raw.request(method, url, headers=headers)
            assert answer.status_code == 405, method
            assert answer.headers["allow"] == "POST"
            assert "POST" in answer.json()["error"]["message"]
        # Without a token, the method changes nothing: still a 401.
        assert (await raw.get(url)).status_code == 401

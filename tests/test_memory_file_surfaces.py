"""MEMORY.md where people meet it: `lifebot memory file`, the web page and /memoryfile."""

from __future__ import annotations

from pathlib import Path

from bot.app.build import App
from storage.repos.facts import FactRepo
from tests.fakes.llm import FakeLLM
from tests.support.app import add_user, channel
from tests.support.builders import make_inbound
from tests.support.cli import run_cli
from tests.support.web import client_for, said, sign_in


async def _facts(app: App, user_id: int) -> list[str]:
    async with app.db.session() as s:
        return [f.text for f in await FactRepo(s).active(user_id)]


async def _ana(app: App) -> int:
    user = await add_user(app, "ana", name="Ana")
    assert user.id is not None
    for text in ("My sister is Rita", "I prefer window seats on trains"):
        await app.memory.remember(user.id, text)
    await app.memory.remember(user.id, "Never book meetings before 10", category="rule")
    return user.id


async def test_the_cli_writes_the_file_and_reads_an_edited_copy_back(
    app: App, tmp_path: Path
) -> None:
    user_id = await _ana(app)
    env = {"LIFEBOT_DATA_DIR": str(tmp_path / "data")}
    out = tmp_path / "MEMORY.md"
    code, said, err = await run_cli(
        "memory", "file", "--user", "ana", "-o", str(out), cwd=tmp_path, env=env
    )
    assert code == 0, err
    assert "Wrote" in said and out.stat().st_mode & 0o777 == 0o600
    text = out.read_text(encoding="utf-8")
    assert "## Rules\n- Never book meetings before 10 <!--" in text

    edited = text.replace("- My sister is Rita <!--", "- My sister is Rita Lima <!--")
    edited = edited.replace("## Notes\n", "## Notes\n- The spare key is under the blue pot\n")
    out.write_text(edited, encoding="utf-8")
    code, said, err = await run_cli(
        "memory", "file", "--user", "ana", "--apply", str(out), cwd=tmp_path, env=env
    )
    assert code == 0, err
    assert 'Changed: "My sister is Rita" is now "My sister is Rita Lima"' in said
    assert "Added: The spare key is under the blue pot" in said
    assert set(await _facts(app, user_id)) == {
        "My sister is Rita Lima", "I prefer window seats on trains",
        "Never book meetings before 10", "The spare key is under the blue pot",
    }  # fmt: skip

    # The same stale copy, edited again: the line chat (here: the last apply) changed since
    # is a conflict; the command says so and exits 3, having applied nothing else wrongly.
    out.write_text(text.replace("- My sister is Rita <!--", "- My sister is Rita Costa <!--"))
    code, said, _ = await run_cli(
        "memory", "file", "--user", "ana", "--apply", str(out), cwd=tmp_path, env=env
    )
    assert code == 3
    assert 'in chat it became "My sister is Rita Lima"' in said
    assert "My sister is Rita Lima" in await _facts(app, user_id)

    code, _, err = await run_cli(
        "memory",
        "file",
        "--user",
        "ana",
        "--apply",
        str(tmp_path / "nope.md"),
        cwd=tmp_path,
        env=env,
    )
    assert code == 1 and "cannot read" in err


async def test_the_web_page_shows_the_file_and_takes_an_edited_copy(app: App) -> None:
    user_id = await _ana(app)
    ana = await app.web.service.accounts.user(user_id)
    assert ana is not None
    async with client_for(app) as client:
        csrf = await sign_in(app, client, ana)
        page = await client.get("/memory/file")
        assert page.status_code == 200
        assert "My sister is Rita &lt;!-- #" in page.text  # the file, escaped, in the box
        download = await client.get("/memory/file.md")
        assert download.headers["content-disposition"] == 'attachment; filename="MEMORY.md"'
        text = download.text

        edited = text.replace(
            "- I prefer window seats on trains <!--", "- I prefer aisle seats <!--"
        )
        refused = await client.post("/memory/file", data={"text": edited, "csrf": "wrong"})
        assert refused.status_code == 403
        assert "I prefer window seats on trains" in await _facts(app, user_id)

        done = await client.post("/memory/file", data={"text": edited, "csrf": csrf})
        assert "Changed" in await said(client, done)
        assert "I prefer aisle seats" in await _facts(app, user_id)

        # a stale copy meeting a newer change: shown with both versions, the copy kept
        stale = text.replace(
            "- I prefer window seats on trains <!--", "- I prefer the quiet coach <!--"
        )
        clash = await client.post("/memory/file", data={"text": stale, "csrf": csrf})
        assert clash.status_code == 409
        assert "the file says &#34;I prefer the quiet coach&#34;" in clash.text
        assert "in chat it became &#34;I prefer aisle seats&#34;" in clash.text
        assert "I prefer the quiet coach &lt;!--" in clash.text  # the person's copy, not lost
        assert "I prefer aisle seats" in await _facts(app, user_id)

        bad = await client.post(
            "/memory/file",
            data={
                "text": "<!-- lifebot memory file; written 2026-99-99T00:00:00Z -->",
                "csrf": csrf,
            },
        )
        assert (await said(client, bad)).startswith("error=")


async def test_in_chat_the_file_comes_as_text_and_goes_back_edited(
    app: App, fake_llm: FakeLLM
) -> None:
    user_id = await _ana(app)
    await app.dispatcher.handle(make_inbound("/memoryfile", sender="ana"))
    reply = channel(app).texts("ana")[-1]
    assert reply.startswith("# What lifebot remembers about Ana")
    text = reply.split("\n\nEdit it and send it back")[0]
    edited = text.replace("- My sister is Rita <!--", "- My sister is Rita Lima <!--")
    await app.dispatcher.handle(make_inbound(f"/memoryfile\n{edited}", sender="ana"))
    assert channel(app).texts("ana")[-1].startswith('Changed: "My sister is Rita"')
    assert "My sister is Rita Lima" in await _facts(app, user_id)
    assert fake_llm.chat_requests == []  # commands, not the model

"""Files across hosts (issue 28): three real ``lifebot serve`` processes, each with a data
folder of its own (as on three hosts), on one PostgreSQL database.

A photo and a PDF are sent through the first. The question asked with the photo fails there
(the model is down) and is retried through the second, which must load the picture the first
one stored; the PDF is asked about through the third. The second's web API exports both files,
and ``lifebot backup`` run with the third's data folder copies both. Before the file store the
second process logged "a stored picture is missing" and answered without it.
"""

from __future__ import annotations

import base64
import io
import itertools
import secrets
import zipfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from storage.db import Database
from storage.repos.users import UserRepo
from storage.repos.web import WebAuthRepo
from tests.fakes.llm import FakeLLM, Step, call, fail, say
from tests.fakes.telegram_api import BOT_ID, FakeTelegram
from tests.support.cli import run_cli
from tests.support.documents import pdf
from tests.support.serve import Cluster, free_port, serve_env

pytestmark = pytest.mark.postgres

CHAT = 9101
PHOTO = b"\xff\xd8\xff\xe0 a sticky note with the wifi password " + bytes(range(256)) * 4
LEASE = pdf("Tenancy agreement between Ana and the landlord", "The rent is 950 EUR a month")
PHOTO_URL = "data:image/jpeg;base64," + base64.b64encode(PHOTO).decode()


class Model:
    """The model: describes pictures, is down while ``broken``, answers from what it is shown."""

    def __init__(self) -> None:
        self.broken = False
        self.saw_photo: list[str] = []
        """The model of each answer that was shown the photo."""

    def __call__(self, body: dict[str, Any]) -> Step:
        messages = body["messages"]
        system = str(messages[0].get("content", ""))
        parts = [p for m in messages if isinstance(m.get("content"), list) for p in m["content"]]
        texts = " ".join(str(p.get("text", "")) for p in parts)
        if "Describe this picture" in texts:
            return say('{"description": "A sticky note on a router.", "text": "sunflower42"}')
        if "Classify the user's message" in system:
            return say('{"route": "chat"}')
        if body.get("model") != "fake-smart":
            return say("{}")  # memory's extraction and the like
        if any(p.get("type") == "image_url" for p in parts):
            if self.broken:
                return fail(503)
            self.saw_photo += [p["image_url"]["url"] for p in parts if p.get("type") == "image_url"]
            return say("The password on the note is sunflower42.")
        if messages[-1].get("role") == "tool":
            return say("Your rent is 950 EUR a month [1].")
        last = next(str(m["content"]) for m in reversed(messages) if m["role"] == "user")
        if "rent" in last:
            return call("search_memory", {"query": "monthly rent"})
        return say("Noted.")


@pytest.mark.slow
async def test_a_photo_and_a_pdf_sent_through_one_process_are_used_by_the_others(
    tmp_path: Path, migrated_postgres_url: str, fake_llm: FakeLLM, tg: FakeTelegram
) -> None:
    postgres_url = migrated_postgres_url  # at the newest schema: no migration race to wait out
    model = Model()
    fake_llm.default = model
    web_port = free_port()
    env = serve_env(postgres_url, fake_llm, tg, LIFEBOT_VISION="true")
    cluster = Cluster(tmp_path, env)

    def each(i: int) -> dict[str, str]:
        # The second process also serves the web page and API (on a port of its own).
        if i != 1:
            return {}
        return {
            "LIFEBOT_WEB_ENABLED": "true",
            "LIFEBOT_WEB_HOST": "127.0.0.1",
            "LIFEBOT_WEB_PORT": str(web_port),
        }

    db = Database(postgres_url)
    try:
        await cluster.start(3, each)
        await cluster.wait_listening()
        await tg.wait_for(lambda: len(tg.calls_to("setWebhook")) >= 3, within=30)
        async with db.session() as s:
            ana, _ = await UserRepo(s).create_with_identity(
                "Ana", "telegram", str(BOT_ID), str(CHAT), chat_id=str(CHAT)
            )
            token = "lbk_" + secrets.token_urlsafe(32)
            await WebAuthRepo(s).add_api_token(ana.id or 0, "export", token, datetime.now(UTC))
        update_ids = itertools.count(1)
        secret = tg.webhook_secret
        assert secret

        async def post(process: int, message: dict[str, Any]) -> None:
            update = {"update_id": next(update_ids), "message": message}
            url = f"http://127.0.0.1:{cluster.ports[process]}/telegram"
            async with (
                aiohttp.ClientSession() as http,
                http.post(
                    url, json=update, headers={"X-Telegram-Bot-Api-Secret-Token": secret}
                ) as resp,
            ):
                assert resp.status == 200, await resp.text()

        # --- through the first process: the photo (its question fails) and the PDF --------
        model.broken = True
        big, unique = tg.add_file(PHOTO, "photos/note.jpg")
        thumb, thumb_unique = tg.add_file(PHOTO[:100], "photos/thumb.jpg")
        photo = [
            {"file_id": thumb, "file_unique_id": thumb_unique, "width": 90, "height": 60},
            {"file_id": big, "file_unique_id": unique, "width": 1280, "height": 960},
        ]
        await post(0, tg.message(CHAT, caption="What's the wifi password?", photo=photo))
        await tg.wait_for(lambda: any("/retry" in t for t in tg.texts(CHAT)), within=60)
        doc, doc_unique = tg.add_file(LEASE, "documents/lease.pdf")
        lease = {
            "file_id": doc,
            "file_unique_id": doc_unique,
            "file_name": "lease.pdf",
            "mime_type": "application/pdf",
            "file_size": len(LEASE),
        }
        await post(0, tg.message(CHAT, document=lease))
        await tg.wait_for(lambda: any("I read lease.pdf" in t for t in tg.texts(CHAT)), within=60)

        # --- the second process answers the photo's question with the picture -------------
        model.broken = False
        await post(1, tg.message(CHAT, "/retry"))
        await tg.wait_for(
            lambda: "The password on the note is sunflower42." in tg.texts(CHAT), within=60
        )
        assert model.saw_photo == [PHOTO_URL]

        # --- the third process answers about the PDF ----------------------------------------
        await post(2, tg.message(CHAT, "How much is my monthly rent?"))
        try:
            await tg.wait_for(lambda: any("950 EUR" in t for t in tg.texts(CHAT)), within=60)
        except TimeoutError:
            raise AssertionError(f"{tg.texts(CHAT)}\n{cluster.tails()}") from None

        # --- the second process's API exports both files --------------------------------------
        async with (
            aiohttp.ClientSession() as http,
            http.get(
                f"http://127.0.0.1:{web_port}/api/v1/export",
                headers={"Authorization": f"Bearer {token}"},
            ) as resp,
        ):
            assert resp.status == 200, await resp.text()
            exported = await resp.read()
        with zipfile.ZipFile(io.BytesIO(exported)) as zf:
            files = {n: zf.read(n) for n in zf.namelist() if n.startswith("files/")}
        assert sorted(files.values()) == sorted([PHOTO, LEASE])

        # --- a backup made with the third process's data folder holds both ----------------------
        third = {"LIFEBOT_DATA_DIR": str(tmp_path / "data-2"), "LIFEBOT_DATABASE_URL": postgres_url}
        code, out, err = await run_cli(
            "backup", "--to", str(tmp_path / "bk"), cwd=tmp_path, env=third
        )
        assert code == 0, out + err
        (folder,) = (tmp_path / "bk").iterdir()
        backed = sorted(p.read_bytes() for p in (folder / "files").rglob("*") if p.is_file())
        assert backed == sorted([PHOTO, LEASE])

        # The files live in the database: no process's own folder holds them.
        for i in range(3):
            kept = tmp_path / f"data-{i}" / "files"
            assert not [p for p in kept.rglob("*") if p.is_file() and "cache" not in str(p)]
        assert "a stored picture is missing" not in cluster.tails()
    finally:
        await cluster.close()
        await db.dispose()

"""The file store (issue 28): one place for every file a feature keeps, on a folder or in
PostgreSQL, and the files older lifebots kept in their own folders moved into it."""

from __future__ import annotations

import asyncio
import os
import stat
from pathlib import Path

import pytest

from bot.app.build import App
from storage.files import MissingFile
from storage.models.files import CHUNK_BYTES
from tests.support.app import AppFactory, add_user


@pytest.fixture
async def db_app(app_factory: AppFactory, app_database_url: str) -> App:
    """A started app on SQLite (the folder backend) or PostgreSQL (the database backend)."""
    return await app_factory(database_url_setting=app_database_url)


async def test_a_large_file_is_written_and_read_whole_and_renamed_at_once(
    db_app: App, tmp_path: Path
) -> None:
    app = db_app
    big = os.urandom(CHUNK_BYTES * 2 + 12345)  # three chunks on PostgreSQL
    source = tmp_path / "big.pdf"
    source.write_bytes(big)
    info = await app.files.put_file("documents", "3/9-0-big.pdf", source)
    assert info.size == len(big)
    assert await app.files.get("documents", "3/9-0-big.pdf") == big
    out = tmp_path / "copy" / "big.pdf"
    assert await app.files.copy_to("documents", "3/9-0-big.pdf", out) == len(big)
    assert out.read_bytes() == big and stat.S_IMODE(out.stat().st_mode) == 0o600

    # Replacing keeps one file; renaming moves it whole; a missing key says so.
    await app.files.put("documents", "3/9-0-big.pdf", b"small")
    await app.files.rename("documents", "3/9-0-big.pdf", "3/9-1-small.pdf")
    assert [f.key for f in await app.files.listing("documents")] == ["3/9-1-small.pdf"]
    assert await app.files.get("documents", "3/9-1-small.pdf") == b"small"
    with pytest.raises(MissingFile):
        await app.files.get("documents", "3/9-0-big.pdf")
    with pytest.raises(MissingFile):
        await app.files.rename("documents", "3/9-0-big.pdf", "3/x.pdf")
    # Two processes storing the same key at once: one file, one of the two contents.
    await asyncio.gather(
        *(app.files.put("photos", "3/1-0.jpg", bytes([n]) * 100) for n in range(8))
    )
    assert len(await app.files.listing("photos", "3/")) == 1
    assert len(set(await app.files.get("photos", "3/1-0.jpg"))) == 1


async def test_files_of_the_old_folders_move_into_the_store_once(
    app_factory: AppFactory, postgres_or_sqlite_url: str, tmp_path: Path
) -> None:
    data = tmp_path / "data"
    old = {
        data / "images" / "1" / "5-0.jpg": b"jpeg of a receipt",
        data / "documents" / "1" / "6-0-lease.pdf": b"%PDF lease",
        data / "spool" / "omi" / "4" / f"{'1' * 20}-{'a' * 32}-16000.chunk": b"\x00\x01" * 50,
    }
    for path, body in old.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(body)
        path.chmod(0o644)
    torn = data / "spool" / "omi" / "4" / f"{'2' * 20}-{'b' * 32}-16000.part"
    torn.write_bytes(b"half")
    (data / "search-cache").mkdir()
    (data / "search-cache" / "old-user-1.npz").write_bytes(b"cache")
    (data / "spool" / "s-live.pcm").write_bytes(b"\x00\x00")  # live audio stays in the spool

    app = await app_factory(database_url_setting=postgres_or_sqlite_url)
    await add_user(app, "ana")

    assert await app.files.get("photos", "1/5-0.jpg") == b"jpeg of a receipt"
    assert await app.files.get("documents", "1/6-0-lease.pdf") == b"%PDF lease"
    [chunk] = await app.omi.pending()
    assert (chunk.device_id, await app.omi.read(chunk)) == (4, b"\x00\x01" * 50)
    assert not (data / "images").exists() and not (data / "documents").exists()
    assert not (data / "spool" / "omi").exists() and not (data / "search-cache").exists()
    assert (data / "spool" / "s-live.pcm").exists()
    # A picture listed by an old message is found where it always was, by the same path.
    urls = await app.photos.stored_urls({"images": [{"path": "1/5-0.jpg"}]})
    assert len(urls) == 1 and urls[0].startswith("data:image/jpeg;base64,")

    # Twice is the same as once; a different file under a stored name is never overwritten.
    clash = data / "images" / "1" / "5-0.jpg"
    clash.parent.mkdir(parents=True)
    clash.write_bytes(b"another picture, same name")
    again = await app_factory(database_url_setting=postgres_or_sqlite_url)
    assert await again.files.get("photos", "1/5-0.jpg") == b"jpeg of a receipt"
    assert clash.read_bytes() == b"another picture, same name"
    assert len(await again.files.listing("photos")) == 1

"""Audio files shared in a Slack DM: download them (bot token, Slack hosts only) and transcribe.

The transcript becomes the message text, so the agent answers a voice note like typed words.
A file that cannot be fetched or transcribed is not dropped silently: the message says so in
plain words, and the agent tells the person.
"""

from __future__ import annotations

import asyncio
import logging
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import aiohttp

from bot.messages import Attachment
from bot.speech.fair import FairTranscriber
from storage.files.private import write_private

log = logging.getLogger(__name__)

_SLACK_DOMAINS = ("slack.com", "slack-gov.com")
_SAFE_NAME = re.compile(r"[^A-Za-z0-9._-]+")


@dataclass(slots=True)
class Transcribed:
    """What the audio files of one message became."""

    texts: list[str] = field(default_factory=list)
    attachments: list[Attachment] = field(default_factory=list)
    paths: list[Path] = field(default_factory=list)
    """Downloaded files, removed by the caller once the message is handled."""


def token_may_go_to(url: str, api_url: str) -> bool:
    """Send the bot token only to Slack's own hosts (or the configured API host)."""
    target, api = urlparse(url), urlparse(api_url)
    host = (target.hostname or "").lower()
    if host and host == (api.hostname or "").lower() and target.scheme == api.scheme:
        return True
    return target.scheme == "https" and any(
        host == d or host.endswith("." + d) for d in _SLACK_DOMAINS
    )


@dataclass(slots=True)
class Pictures:
    """What the pictures of one message became."""

    attachments: list[Attachment] = field(default_factory=list)
    """Fetched pictures, bytes included."""
    notes: list[str] = field(default_factory=list)
    """A plain-words note for each picture that could not be fetched."""


class AudioFetcher:
    """Downloads and transcribes audio files for the Slack adapter."""

    def __init__(
        self,
        *,
        session: aiohttp.ClientSession,
        token: str,
        api_url: str,
        transcriber: FairTranscriber | None,
        spool_dir: Path,
        max_bytes: int,
    ) -> None:
        self.session = session
        self.token = token
        self.api_url = api_url
        self.transcriber = transcriber
        self.spool_dir = spool_dir
        self.max_bytes = max_bytes

    async def transcribe(self, files: list[dict[str, Any]], *, key: str) -> Transcribed:
        """Transcribe every file; failures become a plain-words note in ``texts``.

        ``key`` names the sender, whose files queue fairly beside everyone else's.
        """
        out = Transcribed()
        for file in files:
            name = str(file.get("name") or file.get("title") or "audio")
            try:
                path = await self._download(file, name)
            except _AudioProblem as exc:
                log.warning("slack audio file %s not fetched: %s", file.get("id"), exc)
                out.texts.append(f"(I sent an audio file, {name}, but {exc}.)")
                continue
            out.paths.append(path)
            out.attachments.append(
                Attachment("audio", str(path), file.get("mimetype"), file.get("size"), name)
            )
            out.texts.append(await self._transcribe(path, name, key))
        return out

    async def _transcribe(self, path: Path, name: str, key: str) -> str:
        if self.transcriber is None:
            return f"(I sent an audio file, {name}, but speech recognition is not set up here.)"
        try:
            transcript = await self.transcriber.for_user(key).transcribe_file(path)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            log.exception("transcribing a slack audio file failed")
            return f"(I sent an audio file, {name}, but it could not be transcribed: {exc}.)"
        text = transcript.text.strip()
        return text or f"(I sent an audio file, {name}, but no speech was heard in it.)"

    async def pictures(self, files: list[dict[str, Any]], *, max_bytes: int) -> Pictures:
        """Fetch pictures and PDFs into memory; each one that cannot be fetched becomes a note."""
        out = Pictures()
        for file in files:
            name = str(file.get("name") or file.get("title") or "picture")
            try:
                data = await self._fetch(file, max_bytes)
            except _AudioProblem as exc:
                log.warning("slack picture %s not fetched: %s", file.get("id"), exc)
                out.notes.append(f"(I sent a picture, {name}, but {exc}.)")
                continue
            mime = str(file.get("mimetype") or "image/jpeg")
            kind = "document" if mime == "application/pdf" else "image"
            out.attachments.append(
                Attachment(kind, mime_type=mime, size=len(data), name=name, data=data)
            )
        return out

    async def _download(self, file: dict[str, Any], name: str) -> Path:
        data = await self._fetch(file, self.max_bytes)
        file_id = _SAFE_NAME.sub("_", str(file.get("id") or "file"))
        path = self.spool_dir / f"{file_id}-{_SAFE_NAME.sub('_', name)[-60:]}"
        await asyncio.to_thread(_write, path, data)
        return path

    async def _fetch(self, file: dict[str, Any], max_bytes: int) -> bytes:
        """A Slack-hosted file's bytes (bot token, Slack hosts only, at most ``max_bytes``)."""
        url = str(file.get("url_private_download") or file.get("url_private") or "")
        if not url:
            raise _AudioProblem("Slack gave no link to download it")
        if not token_may_go_to(url, self.api_url):
            raise _AudioProblem("its link does not point at Slack, so it was not fetched")
        size = file.get("size")
        limit = f"{max_bytes / 1_000_000:g} MB limit"
        if isinstance(size, int) and size > max_bytes:
            raise _AudioProblem(f"it is larger than the {limit}")
        headers = {"Authorization": f"Bearer {self.token}"}
        try:
            async with self.session.get(url, headers=headers) as resp:
                if resp.status != 200 or resp.content_type.startswith("text/html"):
                    # Slack answers a sign-in page when the token may not read the file.
                    raise _AudioProblem(
                        f"Slack refused the download ({resp.status}); the app needs files:read"
                    )
                data = bytearray()
                async for chunk in resp.content.iter_chunked(64 * 1024):
                    data += chunk
                    if len(data) > max_bytes:
                        raise _AudioProblem(f"it is larger than the {limit}")
        except aiohttp.ClientError as exc:
            raise _AudioProblem(f"downloading it failed ({exc})") from exc
        return bytes(data)


def _write(path: Path, data: bytes) -> None:
    write_private(path, data, sync=False)  # 0600 in a 0700 folder; read once, then deleted


def remove_files(paths: list[Path]) -> None:
    """Delete downloaded audio (blocking: run it in a thread)."""
    for p in paths:
        p.unlink(missing_ok=True)


class _AudioProblem(Exception):
    """Why an audio file could not be used, in words that finish "... but <reason>"."""

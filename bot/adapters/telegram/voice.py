"""Voice notes and audio files: size check, download, transcription through the Transcriber port.

The transcript becomes the message text. Problems (too big, no speech model, unreadable audio,
silence) become one clear sentence for the user instead of a failure.
"""

from __future__ import annotations

import asyncio
import logging
import tempfile
from dataclasses import dataclass
from pathlib import Path

from telegram import Audio, Bot, Voice

from bot.adapters.telegram.send import TelegramSender
from bot.errors import BotError, ChannelError
from bot.speech.fair import FairTranscriber
from storage.files.private import private_dir

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class VoiceResult:
    """Either a transcript or the sentence to tell the user instead."""

    text: str | None
    problem: str | None = None


NO_STT = "I can't listen to voice notes here: speech recognition is not set up."
UNREADABLE = "I couldn't understand the audio in that recording, sorry."
SILENT = "I couldn't make out any words in that recording. Could you try again?"


def _size(size: int) -> str:
    return f"{size / 1_000_000:.1f} MB" if size >= 1_000_000 else f"{max(1, size // 1000)} KB"


class VoiceNotes:
    """Turns a Telegram voice note or audio file into text."""

    def __init__(
        self,
        bot: Bot,
        sender: TelegramSender,
        transcriber: FairTranscriber | None,
        *,
        max_bytes: int,
        workdir: Path | None = None,
    ) -> None:
        self.bot = bot
        self.sender = sender
        self.transcriber = transcriber
        self.max_bytes = max_bytes
        self.workdir = workdir

    def too_big(self, size: int | None) -> str | None:
        """The message for an oversized file, or None."""
        if size is not None and size > self.max_bytes:
            return (
                f"That recording is too big for me ({_size(size)}; I can take up to "
                f"{_size(self.max_bytes)}). Please send a shorter one, or type your message."
            )
        return None

    async def transcribe(self, media: Voice | Audio, *, key: str) -> VoiceResult:
        """Download and transcribe; never raises except on cancellation.

        ``key`` names the sender: the fair transcriber serves each sender's pieces in turn
        (one at a time, since the model already uses every core it is given).
        """
        if self.transcriber is None:
            return VoiceResult(None, NO_STT)
        if (problem := self.too_big(media.file_size)) is not None:
            return VoiceResult(None, problem)
        if self.workdir is not None:
            await asyncio.to_thread(private_dir, self.workdir)  # 0700: voices are personal
        with tempfile.TemporaryDirectory(dir=self.workdir, prefix="tg-voice-") as tmp:
            path = Path(tmp) / f"{media.file_unique_id}{_suffix(media)}"
            problem = await self._download(media, path)
            if problem is not None:
                return VoiceResult(None, problem)
            try:
                transcript = await self.transcriber.for_user(key).transcribe_file(path)
            except BotError as exc:
                log.warning("could not transcribe a voice note: %s", exc)
                return VoiceResult(None, UNREADABLE)
        text = transcript.text.strip()
        return VoiceResult(text) if text else VoiceResult(None, SILENT)

    async def _download(self, media: Voice | Audio, path: Path) -> str | None:
        """Fetch the file to ``path``; the problem to tell the user, or None."""
        try:
            tg_file = await self.sender.call("getFile", lambda: self.bot.get_file(media.file_id))
            if (problem := self.too_big(tg_file.file_size)) is not None:
                return problem
            await self.sender.call("download", lambda: tg_file.download_to_drive(path))
        except ChannelError as exc:
            log.warning("could not download a voice note: %s", exc)
            if "too big" in str(exc).lower():
                return self.too_big(self.max_bytes + 1)
            return "I couldn't download that recording from Telegram. Please send it again."
        return self.too_big((await asyncio.to_thread(path.stat)).st_size)


def _suffix(media: Voice | Audio) -> str:
    if isinstance(media, Audio) and media.file_name and "." in media.file_name:
        return "." + media.file_name.rsplit(".", 1)[1][:8]
    mime = media.mime_type or ""
    return {"audio/mpeg": ".mp3", "audio/mp4": ".m4a", "audio/x-wav": ".wav"}.get(mime, ".ogg")

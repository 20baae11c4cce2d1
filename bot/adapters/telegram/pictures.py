"""Photos and image files: size check, then download into memory (the bytes go with the message).

Problems (too big, a failed download) become one clear sentence for the user, never a failure.
"""

from __future__ import annotations

import logging

from telegram import Bot

from bot.adapters.limits import too_big
from bot.adapters.telegram.events import Picture
from bot.adapters.telegram.send import TelegramSender
from bot.errors import ChannelError
from bot.messages import Attachment

log = logging.getLogger(__name__)


async def fetch(bot: Bot, sender: TelegramSender, pic: Picture, *, limit: int) -> Attachment | str:
    """The file as an attachment with its bytes, or the sentence to tell instead."""
    what = "picture" if pic.kind == "image" else "document"
    if (problem := too_big(pic.size, limit, what)) is not None:
        return problem
    try:
        tg_file = await sender.call("getFile", lambda: bot.get_file(pic.file_id))
        if (problem := too_big(tg_file.file_size, limit, what)) is not None:
            return problem
        data = bytes(await sender.call("download", tg_file.download_as_bytearray))
    except ChannelError as exc:
        log.warning("could not download a picture: %s", exc)
        if "too big" in str(exc).lower():
            return too_big(limit + 1, limit, what) or ""
        return f"I couldn't download that {what} from Telegram. Please send it again."
    if (problem := too_big(len(data), limit, what)) is not None:
        return problem
    return Attachment(pic.kind, mime_type=pic.mime_type, size=len(data), name=pic.name, data=data)

"""The one "send, then record the receipt" path, shared by replies (dispatch) and pushes (outbox).

Both store the outgoing message first, then hand it to the channel, then store the channel's
message id as proof it arrived. The stored-first row is what makes pushes exactly-once: a
crash between the send and the receipt leaves evidence (see ``bot/jobs/outbox/delivery.py``).
What happens after a send, in one place:

* delivered: the stored message gets the channel's id (``sent``) and the caller's own record
  (a reply's delivery row, a push's outbox row) is written in the same transaction;
* ``Unreachable`` (blocked bot, revoked token): that identity is marked unreachable, so no
  push goes there again until the person writes from it;
* any other ``ChannelError``: returned to the caller, which decides (a reply is logged, a push
  is retried or failed).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from datetime import datetime

from sqlmodel.ext.asyncio.session import AsyncSession

from bot.errors import ChannelError, Unreachable
from bot.messages import Address, Receipt
from storage.repos.messages import MessageRepo
from storage.repos.users import UserRepo

Transaction = Callable[[], AbstractAsyncContextManager[AsyncSession]]
"""Opens one committed unit of work (``Database.session`` or a queued writer)."""
Record = Callable[[AsyncSession, Receipt], Awaitable[object]]
"""The caller's own bookkeeping for a delivered message, in the receipt's transaction."""


async def send_and_record(
    send: Callable[[], Awaitable[Receipt]],
    *,
    tx: Transaction,
    user_id: int,
    message_id: int,
    address: Address,
    record: Record,
    now: datetime,
) -> Receipt | ChannelError:
    """Send a stored message (row ``message_id``); its receipt, or the channel's error."""
    try:
        receipt = await send()
    except Unreachable as exc:
        async with tx() as s:
            await UserRepo(s).mark_unreachable(
                user_id, address.channel, address.chat_id, str(exc), now
            )
        return exc
    except ChannelError as exc:
        return exc
    async with tx() as s:
        await MessageRepo(s).set_receipt(user_id, message_id, receipt.message_id)
        await record(s, receipt)
    return receipt

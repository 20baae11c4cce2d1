"""What waits on the user in the chat: questions lifebot asked, messages waiting for /retry.

Both are answered from the page as their buttons in the chat would be: through dispatch, to
the chat they came from.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import timedelta

from bot.agent.ask import OTHER, Waiting, waiting_questions
from bot.agent.conversations import Conversations
from bot.clock import Clock
from bot.messages import Address, InboundMessage
from storage.db import Database
from storage.models import Message, User


class WebPending:
    """Waiting questions and messages of one user at a time (another user's are not found)."""

    def __init__(
        self,
        db: Database,
        clock: Clock,
        conversations: Conversations,
        *,
        press: Callable[[InboundMessage], Awaitable[object]],
        ask_wait: timedelta,
    ) -> None:
        self.db = db
        self.clock = clock
        self.conversations = conversations
        self.press = press
        """Hands a button press to dispatch."""
        self.ask_wait = ask_wait
        """How long a question lifebot asked waits for its answer."""

    async def questions(self, user: User) -> list[Waiting]:
        """Questions lifebot asked the user that still wait for an answer."""
        assert user.id is not None
        return await waiting_questions(self.db, user.id, self.clock.now(), self.ask_wait)

    async def answer_question(self, user: User, message_id: int, choice: str) -> bool:
        """Answer a waiting question as if its button was pressed in the chat it was asked in.

        The answer (and the resumed turn's reply) goes to that chat. False when the question
        is not the user's or no longer waits.
        """
        waiting = {w.message.id: w for w in await self.questions(user)}
        found = waiting.get(message_id)
        if found is None:
            return False
        if choice != OTHER and not (choice.isdecimal() and int(choice) < len(found.options)):
            return False  # not one of its buttons
        row = found.message
        label = "Other" if choice == OTHER else found.options[int(choice)]
        conv_thread = await self.conversations.thread_of(user.id or 0, row.conversation_id or 0)
        await self.press(
            InboundMessage(
                address=Address(row.channel, row.account, row.chat_id, conv_thread),
                sender_id=row.sender_id or "",
                message_id=f"web:{message_id}:{choice}",
                text=label,
                received_at=self.clock.now(),
                callback_data=f"/answer {message_id} {choice}",
                # The web chat has no channel identity: its messages name their user.
                user_id=user.id if row.channel == "web" else None,
            )
        )
        return True

    async def waiting(self, user: User) -> list[Message]:
        """The user's messages that wait for /retry, newest first."""
        assert user.id is not None
        return await self.conversations.waiting(user.id, 20)

    async def retry(self, user: User, message_id: int) -> bool:
        """Answer a waiting message now, as its Retry button in the chat would.

        The answer goes to the chat the message came from. False when it is not the user's
        or no longer waits.
        """
        row = next((m for m in await self.waiting(user) if m.id == message_id), None)
        if row is None:
            return False
        thread = await self.conversations.thread_of(user.id or 0, row.conversation_id or 0)
        await self.press(
            InboundMessage(
                address=Address(row.channel, row.account, row.chat_id, thread),
                sender_id=row.sender_id or "",
                message_id=f"web-retry:{message_id}:{self.clock.now().timestamp():.0f}",
                text="Retry",
                received_at=self.clock.now(),
                callback_data=f"/retry {message_id}",
                # The web chat has no channel identity: its messages name their user.
                user_id=user.id if row.channel == "web" else None,
            )
        )
        return True

"""How a feature joins the chat: its commands and the inputs it takes (issue 28).

The vocabulary a feature's package uses to take part in a conversation without importing
the dispatcher: a command's context and reply, the command table's port, and the port of a
handler for an input kind (``bot.feature.Input``) the feature declared. The dispatcher
(``bot/dispatch``) implements the table and routes to the handlers; features at any layer
from ``bot.agent`` up register through these ports.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from bot.feature import Input
from bot.messages import Button, Image, InboundMessage, OutboundMessage
from storage.models import MAX_ROW_ID, User


@dataclass(slots=True)
class CommandContext:
    """Everything a command may use: one user's data only."""

    user: User
    msg: InboundMessage
    conversation_id: int
    args: str

    @property
    def user_id(self) -> int:
        """The caller's user id."""
        assert self.user.id is not None
        return self.user.id


@dataclass(slots=True)
class CommandReply:
    """A command's answer, plus anything dispatch must do next."""

    text: str
    buttons: list[Button] = field(default_factory=list)
    retry_message_id: int | None = None
    """Set by /retry: dispatch re-runs the agent on this stored message."""
    resume_text: str | None = None
    """Set by /answer: dispatch runs the agent on this text (a request plus its answer)."""
    notify: list[OutboundMessage] = field(default_factory=list)
    """Messages to send to other people (the welcome after /approve)."""
    image: Image | None = None
    """A picture to send with the reply (a journal chart)."""
    expect: str | None = None
    """The reply asks a question: the user's next plain message completes this command line
    (``/place name 12`` + "climbing hall")."""


def row_id(text: str) -> int | None:
    """The row id a person typed in a command ("12" or "#12"); None when no row can have it.

    The one parser for every command that takes an id. ``str.isdigit`` alone lets through
    what ``int()`` refuses ("²") and numbers no id column holds (an overflow deep in the
    query); here anything but 1 to ``MAX_ROW_ID`` in ASCII digits is None, never an error, and
    the command answers with its usage line.
    """
    digits = text.strip().removeprefix("#")
    if not (digits.isascii() and digits.isdigit()) or len(digits) > len(str(MAX_ROW_ID)):
        return None
    number = int(digits)
    return number if 1 <= number <= MAX_ROW_ID else None


CommandFn = Callable[[CommandContext], Awaitable[CommandReply]]
Trigger = Callable[[InboundMessage], str | None]
"""Turns a plain message into a command line ("journal: ..." -> "/journal ..."), or None."""


class CommandTable(Protocol):
    """Where a feature registers its chat commands (``bot.dispatch.commands.Commands``)."""

    def register(self, name: str, fn: CommandFn, help_text: str) -> None:
        """Add a command (declare its name in the feature's ``commands``); a name is taken once."""

    def add_trigger(self, trigger: Trigger) -> None:
        """Let the feature claim some plain messages as commands (deterministic, no LLM)."""


@dataclass(slots=True)
class InputContext:
    """One message carrying a feature's input, with who sent it and where it is stored."""

    user: User | None
    """None: a stranger (only for an input taken before storing)."""
    msg: InboundMessage
    conversation_id: int | None
    """None for an input taken before storing (a shared location)."""
    message_id: int | None
    """The stored inbound row; None for an input taken before storing."""

    @property
    def user_id(self) -> int:
        """The sender's user id."""
        assert self.user is not None
        assert self.user.id is not None
        return self.user.id


@dataclass(slots=True)
class InputOutcome:
    """What a feature made of its input; the dispatcher finishes the message with it."""

    reply: str | None = None
    """Fixed words answering the message (no model turn); None: the words go on."""
    assistant: bool = True
    """The reply is lifebot's answer (False: a notice, such as a problem with the input)."""
    notice: str | None = None
    """Sent at once while the message goes on (to the agent with its words)."""
    images: Sequence[str] = ()
    """Pictures the agent's turn looks at with the words."""
    go_on: bool = False
    """For an input taken before storing: the message takes the normal path after all (a
    stranger's first shared location starts pairing like any first message)."""


class InputHandler(Protocol):
    """A feature's handler of one input kind it declared (``Feature.inputs``)."""

    @property
    def kind(self) -> Input:
        """The input kind it takes."""

    @property
    def before_storing(self) -> bool:
        """Taken instead of a message (never stored, never the agent's): a shared location."""

    def takes(self, msg: InboundMessage) -> bool:
        """Whether ``msg`` carries this input."""

    async def take(self, ctx: InputContext) -> InputOutcome:
        """Keep or act on the input; what to tell the person and what the turn sees."""

    async def again(self, meta: dict[str, Any] | None) -> Sequence[str]:
        """Pictures a stored message is asked with again on /retry (usually none)."""

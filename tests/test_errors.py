"""The error tree: what dispatch reports as "I can't reach my language model" is only that."""

from __future__ import annotations

import pytest

from bot import errors
from bot.errors import AgentError, BotError


@pytest.mark.parametrize(
    "cls", [errors.ToolError, errors.EmbeddingError, errors.TranscriptionError]
)
def test_model_fixable_and_embedding_errors_are_not_llm_outages(cls: type[BotError]) -> None:
    """Dispatch turns every AgentError into "I can't reach my language model"; these are not."""
    assert issubclass(cls, BotError)
    assert not issubclass(cls, AgentError)


def test_every_bot_error_is_drawn_in_the_module_docstring() -> None:
    """The tree in errors.py's docstring names every error class the module defines."""
    doc = errors.__doc__ or ""
    names = [
        name
        for name, value in vars(errors).items()
        if isinstance(value, type) and issubclass(value, BotError)
    ]
    assert len(names) >= 10
    assert [n for n in names if n not in doc] == []

"""Tools: remember, list and forget facts about the user."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from bot.agent.tools.base import Tool, ToolContext
from bot.errors import ToolError
from storage.repos.facts import FactRepo

Category = Literal["people", "preferences", "events", "work", "health", "notes"]


class RememberArgs(BaseModel):
    """Arguments of remember_fact."""

    text: str = Field(min_length=2, max_length=300, description="The fact, short, about the user")
    category: Category = "notes"


class ListFactsArgs(BaseModel):
    """Arguments of list_facts."""

    category: Category | None = None


class ForgetArgs(BaseModel):
    """Arguments of forget_fact."""

    fact_id: int = Field(description="The id shown by list_facts")


async def remember_fact(ctx: ToolContext, args: RememberArgs) -> str:
    """Store a fact about the user."""
    async with ctx.db.session() as s:
        fact, created = await FactRepo(s).add(ctx.user_id, args.text, args.category)
    return f"{'remembered' if created else 'already known'} as fact #{fact.id}: {fact.text}"


async def list_facts(ctx: ToolContext, args: ListFactsArgs) -> str:
    """The user's facts."""
    async with ctx.db.session() as s:
        facts = await FactRepo(s).active(ctx.user_id, args.category)
    if not facts:
        return "no facts stored"
    return "\n".join(f"#{f.id} [{f.category}] {f.text}" for f in facts)


async def forget_fact(ctx: ToolContext, args: ForgetArgs) -> str:
    """Forget one of the user's facts."""
    async with ctx.db.session() as s:
        fact = await FactRepo(s).forget(ctx.user_id, args.fact_id, ctx.now)
    if fact is None:
        raise ToolError(f"there is no fact #{args.fact_id}; call list_facts to see the ids")
    return f"forgot fact #{fact.id}: {fact.text}"


TOOLS = [
    Tool(
        "remember_fact",
        "Remember a short fact about the user (15 words at most) when they ask you to.",
        RememberArgs,
        remember_fact,
        "Saving that…",
        read_only=False,
    ),
    Tool(
        "list_facts",
        "List what you know about the user.",
        ListFactsArgs,
        list_facts,
        "Looking at what I know…",
    ),
    Tool(
        "forget_fact",
        "Forget a fact about the user by its id.",
        ForgetArgs,
        forget_fact,
        "Forgetting that…",
        read_only=False,
    ),
]

"""Tools: create, list and complete tasks."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, Field

from bot.agent.tools.base import Tool, ToolContext
from bot.errors import ToolError
from storage.repos.tasks import TaskRepo


class CreateTaskArgs(BaseModel):
    """Arguments of create_task."""

    title: str = Field(min_length=1, max_length=200)
    due: datetime | None = Field(
        None, description="Due date-time, ISO 8601; local time in the user's zone if no offset"
    )


class ListTasksArgs(BaseModel):
    """Arguments of list_tasks."""

    include_done: bool = False


class CompleteTaskArgs(BaseModel):
    """Arguments of complete_task."""

    task_id: int


async def create_task(ctx: ToolContext, args: CreateTaskArgs) -> str:
    """Create a task."""
    due = args.due
    if due is not None and due.tzinfo is None:
        due = due.replace(tzinfo=ctx.tz)
    async with ctx.db.session() as s:
        task = await TaskRepo(s).add(ctx.user_id, args.title, due)
    when = f", due {task.due_at.astimezone(ctx.tz):%a %Y-%m-%d %H:%M}" if task.due_at else ""
    return f"created task #{task.id}: {task.title}{when}"


async def list_tasks(ctx: ToolContext, args: ListTasksArgs) -> str:
    """The user's tasks."""
    async with ctx.db.session() as s:
        tasks = await TaskRepo(s).list(ctx.user_id, include_done=args.include_done)
    if not tasks:
        return "no tasks"
    lines = []
    for t in tasks:
        due = f" (due {t.due_at.astimezone(ctx.tz):%a %d %b %H:%M})" if t.due_at else ""
        done = " [done]" if t.done_at else ""
        lines.append(f"#{t.id} {t.title}{due}{done}")
    return "\n".join(lines)


async def complete_task(ctx: ToolContext, args: CompleteTaskArgs) -> str:
    """Mark a task done."""
    async with ctx.db.session() as s:
        task = await TaskRepo(s).complete(ctx.user_id, args.task_id, ctx.now)
    if task is None:
        raise ToolError(f"there is no task #{args.task_id}; call list_tasks to see the ids")
    return f"completed task #{task.id}: {task.title}"


TOOLS = [
    Tool(
        "create_task",
        "Create a task (to-do) for the user.",
        CreateTaskArgs,
        create_task,
        "Adding the task…",
        read_only=False,
        group="tasks",
    ),
    Tool(
        "list_tasks",
        "List the user's tasks.",
        ListTasksArgs,
        list_tasks,
        "Checking your tasks…",
        group="tasks",
    ),
    Tool(
        "complete_task",
        "Mark a task done by id.",
        CompleteTaskArgs,
        complete_task,
        "Ticking it off…",
        read_only=False,
        group="tasks",
    ),
]

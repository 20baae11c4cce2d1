"""One user's tasks."""

from __future__ import annotations

from datetime import datetime

from sqlmodel import col, select
from sqlmodel.ext.asyncio.session import AsyncSession

from storage.models import Task


class TaskRepo:
    """Creates, lists and completes tasks, always for one user."""

    def __init__(self, session: AsyncSession) -> None:
        self.s = session

    async def add(self, user_id: int, title: str, due_at: datetime | None = None) -> Task:
        """Create a task."""
        task = Task(user_id=user_id, title=title.strip(), due_at=due_at)
        self.s.add(task)
        await self.s.flush()
        return task

    async def list(self, user_id: int, *, include_done: bool = False) -> list[Task]:
        """The user's tasks, open first by due date."""
        q = select(Task).where(Task.user_id == user_id)
        if not include_done:
            q = q.where(col(Task.done_at).is_(None))
        q = q.order_by(col(Task.done_at).is_not(None), col(Task.due_at), col(Task.id))
        return list((await self.s.exec(q)).all())

    async def complete(self, user_id: int, task_id: int, now: datetime) -> Task | None:
        """Mark one of this user's tasks done; None when it is not theirs."""
        res = await self.s.exec(select(Task).where(Task.id == task_id, Task.user_id == user_id))
        task = res.first()
        if task is None:
            return None
        if task.done_at is None:
            task.done_at = now
            self.s.add(task)
        return task

"""Agent tools: one module per family, each exporting a list of Tool definitions."""

from __future__ import annotations

from bot.agent.tools import tasks, timekeeping
from bot.agent.tools.base import Tool, ToolContext, ToolRegistry


def default_registry() -> ToolRegistry:
    """The spine's tools (time, tasks); features add theirs (memory adds the fact tools)."""
    return ToolRegistry([*timekeeping.TOOLS, *tasks.TOOLS])


__all__ = ["Tool", "ToolContext", "ToolRegistry", "default_registry"]

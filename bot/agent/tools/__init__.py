"""Agent tools: one module per family, each exporting a list of Tool definitions."""

from __future__ import annotations

from bot.agent.tools import facts, tasks, timekeeping
from bot.agent.tools.base import Tool, ToolContext, ToolRegistry


def default_registry() -> ToolRegistry:
    """Every tool the agent may use, in one registry."""
    return ToolRegistry([*timekeeping.TOOLS, *facts.TOOLS, *tasks.TOOLS])


__all__ = ["Tool", "ToolContext", "ToolRegistry", "default_registry"]

"""Pushes composed for a user: the morning briefing and the opt-in weekly journal review."""

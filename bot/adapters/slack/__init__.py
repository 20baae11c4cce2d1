"""bot/adapters/slack."""

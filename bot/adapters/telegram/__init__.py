"""bot/adapters/telegram."""

"""bot/app."""

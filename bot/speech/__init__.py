"""bot/speech."""

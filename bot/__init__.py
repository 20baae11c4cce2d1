"""lifebot: a personal AI assistant reached through Telegram, Slack and a voice pendant."""

__version__ = "0.1.0"

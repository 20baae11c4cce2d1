"""Loopback fakes of network peers (LLM, Telegram, Slack) and in-memory fakes of our ports."""

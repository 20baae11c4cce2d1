"""``python -m bot`` runs the lifebot CLI."""

from bot.app.cli import main

main()

"""``python -m bot`` runs the lifebot CLI."""

from bot.cli import main

main()

"""bot/jobs/tools."""

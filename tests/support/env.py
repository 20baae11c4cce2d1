"""The environment of a lifebot process a test starts (``serve``, a CLI command, a probe).

This process's environment without any setting lifebot reads: a developer's own bot token,
model endpoint or search key in their shell must never reach a test's process (it would
start a real Telegram or Slack channel, or search the web). ``SETTING_PREFIXES`` covers every
variable ``Settings`` reads; ``tests/test_test_env.py`` fails when a new one is not covered.
"""

from __future__ import annotations

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
"""This checkout: first on a started process's path, whichever checkout is installed."""

SETTING_PREFIXES = ("LIFEBOT_", "OPENAI_", "TELEGRAM_", "SLACK_", "BRAVE_")
"""The beginnings of every environment variable lifebot reads."""


def process_env(tmp_path: Path | None = None, /, **settings: str) -> dict[str, str]:
    """A clean environment with ``settings``: this checkout's code, the data folder under
    ``tmp_path`` (when given) and the web page on a port the OS picks unless a setting says
    otherwise (``serve`` opens it on 8700 by default, which another lifebot may hold)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(SETTING_PREFIXES)}
    env["PYTHONPATH"] = str(ROOT)
    if tmp_path is not None:
        env["LIFEBOT_DATA_DIR"] = str(tmp_path / "data")
    env.update(settings)
    env.setdefault("LIFEBOT_WEB_PORT", "0")
    return env

"""A test's lifebot process never sees the developer's own settings."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.config import Settings
from tests.support.env import SETTING_PREFIXES, process_env


def _variables() -> list[str]:
    names: list[str] = []
    for field in Settings.model_fields.values():
        alias = field.validation_alias
        choices = getattr(alias, "choices", [alias]) if alias is not None else []
        names.extend(str(c) for c in choices if isinstance(c, str))
    return names


def test_every_variable_lifebot_reads_is_cleaned_from_a_test_process() -> None:
    variables = _variables()
    assert "TELEGRAM_BOT_TOKEN" in variables and "LIFEBOT_DATABASE_URL" in variables
    assert [v for v in variables if not v.startswith(SETTING_PREFIXES)] == []


def test_a_developers_tokens_do_not_reach_a_test_process(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    for name in ("TELEGRAM_BOT_TOKEN", "SLACK_BOT_TOKEN", "BRAVE_API_KEY", "OPENAI_API_KEY"):
        monkeypatch.setenv(name, "a-real-secret")
    monkeypatch.setenv("LIFEBOT_WEB_PORT", "8700")
    env = process_env(tmp_path, LIFEBOT_JOBS_ENABLED="false")
    assert "a-real-secret" not in env.values()
    assert env["LIFEBOT_WEB_PORT"] == "0"  # never the fixed default another lifebot may hold
    assert env["LIFEBOT_DATA_DIR"] == str(tmp_path / "data")
    assert env["LIFEBOT_JOBS_ENABLED"] == "false"

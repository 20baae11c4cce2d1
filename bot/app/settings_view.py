"""The effective configuration as the owner's page shows it, secrets masked (issue 31).

Every field of ``Settings`` with the variable that sets it and its value now. A setting a
feature declares as a secret (``Feature.secrets``) only says whether it is set; every other
value is cleaned of the declared secret values and shapes too (a password in an address).
"""

from __future__ import annotations

from pathlib import Path

from pydantic import AliasChoices

from bot.app.features import REGISTRY
from bot.app.logsafe import redactor_for
from bot.config import Settings
from bot.feature import Registry
from bot.jobs.engine.control import SettingRow


def secret_settings(registry: Registry = REGISTRY) -> frozenset[str]:
    """The ``Settings`` fields the features declare as secrets."""
    return frozenset(s.setting for s in registry.secrets() if s.setting)


def _variable(name: str, alias: object) -> str:
    if isinstance(alias, AliasChoices) and alias.choices:
        return str(alias.choices[0])
    if isinstance(alias, str):
        return alias
    return name.upper()


def _shown(value: object) -> str:
    if value is None:
        return "(not set)"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, Path):
        return str(value)
    return str(value) if value != "" else "(empty)"


def effective_settings(settings: Settings, registry: Registry = REGISTRY) -> list[SettingRow]:
    """Every setting, in the order ``Settings`` declares them, secrets masked."""
    secrets = secret_settings(registry)
    redactor = redactor_for(settings, registry)
    rows = []
    for name, info in type(settings).model_fields.items():
        value = getattr(settings, name)
        secret = name in secrets
        if secret:
            shown = "set (hidden)" if value else "(not set)"
        else:
            shown = redactor.clean(_shown(value))
        rows.append(
            SettingRow(
                name=name,
                env=_variable(name, info.validation_alias),
                value=shown,
                secret=secret,
                changed=name in settings.model_fields_set,
            )
        )
    return rows

"""Write ``.env.example`` from ``Settings``: every variable, its default and what it does.

``python -m bot.app.envfile`` regenerates it; tests/test_cli_operator.py fails when the file
and ``Settings`` disagree, so a new setting cannot be forgotten there.
"""

from __future__ import annotations

import ast
import inspect
import sys
from pathlib import Path

from bot.config import Settings

HEADER = """\
# lifebot settings. Copy this file to .env and uncomment what you need: every line is
# optional and shows the default. Generated from bot/config.py by `python -m bot.app.envfile`
# (a test keeps the two in sync); the README explains each group.
"""

_SECTION = "# --- "


def _env_name(call: ast.expr) -> str | None:
    if not isinstance(call, ast.Call):
        return None
    for kw in call.keywords:
        value = kw.value
        if (
            kw.arg == "validation_alias"
            and isinstance(value, ast.Call)
            and value.args
            and isinstance(value.args[0], ast.Constant)
        ):
            return str(value.args[0].value)
    return None


def _default(field: str) -> str:
    info = Settings.model_fields[field]
    value = info.default
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, Path):
        return str(value)
    return str(value)


def render() -> str:
    """The text of ``.env.example``."""
    source = inspect.getsource(Settings)
    lines = source.splitlines()
    cls = ast.parse(source).body[0]
    assert isinstance(cls, ast.ClassDef)
    out = [HEADER.rstrip()]
    body = cls.body
    last_line = 0
    for i, node in enumerate(body):
        if not (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)):
            continue
        env = _env_name(node.value) if node.value is not None else None
        if env is None:
            continue
        for text in lines[last_line : node.lineno - 1]:  # section headings above the field
            stripped = text.strip()
            if stripped.startswith(_SECTION):
                title = stripped.removeprefix(_SECTION).strip(" -")
                out.append(f"\n# {title[:1].upper()}{title[1:]}")
        last_line = node.end_lineno or node.lineno
        doc = ""
        nxt = body[i + 1] if i + 1 < len(body) else None
        if (
            isinstance(nxt, ast.Expr)
            and isinstance(nxt.value, ast.Constant)
            and isinstance(nxt.value.value, str)
        ):
            doc = " ".join(nxt.value.value.split())
            last_line = nxt.end_lineno or last_line
        if doc:
            out.append(f"# {doc}")
        out.append(f"# {env}={_default(node.target.id)}")
    return "\n".join(out) + "\n"


def main() -> None:
    """Write ``.env.example`` in the current folder (or the path given)."""
    target = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(".env.example")
    target.write_text(render(), encoding="utf-8")
    print(f"wrote {target}")  # noqa: T201  # a developer tool


if __name__ == "__main__":
    main()

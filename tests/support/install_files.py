"""Find local paths and URLs in install files (pyproject.toml, constraints, requirements)."""

from __future__ import annotations

import re

# Each names something only one machine (or one server) has; a pin is `name==version`.
_PATTERNS = [
    re.compile(r"file:"),
    re.compile(r"@\s*(/|\.|~|[a-z][a-z0-9+.-]*://)", re.IGNORECASE),  # PEP 508 direct reference
    re.compile(r"(^|[\s\"'])(/tmp/|/root/|/home/|/srv/|/work/|/var/)"),
    re.compile(r"^\s*(--find-links|-f\s|--index-url|-i\s|--extra-index-url|-e\s|--editable)"),
]


def local_path_problems(text: str) -> list[str]:
    """Return the lines of ``text`` that name a local path or a URL to install from."""
    problems = []
    for n, line in enumerate(text.splitlines(), 1):
        code = line.split("#", 1)[0]
        if any(p.search(code) for p in _PATTERNS):
            problems.append(f"line {n}: {line.strip()}")
    return problems

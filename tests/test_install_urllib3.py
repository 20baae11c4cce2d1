"""caldav 3 brings niquests and with it urllib3-future, whose wheel copies itself over urllib3
at every interpreter start. Every install lifebot documents builds it so the two live side by
side: requests (Radicale, tiktoken, the sentiment lexicon) keeps the real urllib3."""

from __future__ import annotations

import re
from pathlib import Path

import urllib3
from urllib3._version import __version__ as imported_version

ROOT = Path(__file__).resolve().parents[1]


def _pin(name: str) -> str:
    text = (ROOT / "constraints.txt").read_text()
    found = re.search(rf"^{re.escape(name)}==(\S+)$", text, re.MULTILINE)
    assert found, f"{name} is not pinned in constraints.txt"
    return found.group(1)


def test_the_installed_urllib3_is_the_pinned_one_not_the_fork() -> None:
    assert imported_version == _pin("urllib3")  # the fork would say 2.2x.9xx
    assert not list(Path(urllib3.__file__).parents[1].glob("urllib3_future*.pth"))


def test_every_documented_install_keeps_urllib3_future_beside_urllib3() -> None:
    for recipe in ("Makefile", "deploy/Dockerfile"):
        text = (ROOT / recipe).read_text()
        assert "URLLIB3_NO_OVERRIDE=1" in text, recipe
        assert "--no-binary urllib3-future" in text, recipe

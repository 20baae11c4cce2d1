"""Install files name packages by name and version only, so a clean machine can install them."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

from tests.support.install_files import local_path_problems

ROOT = Path(__file__).resolve().parent.parent


def _install_files() -> list[Path]:
    files = [ROOT / "pyproject.toml"]
    files += sorted(ROOT.glob("constraints*.txt"))
    files += sorted(ROOT.glob("requirements*.txt"))
    return [f for f in files if f.exists()]


@pytest.mark.parametrize("path", _install_files(), ids=lambda p: p.name)
def test_install_file_names_no_path_of_this_machine(path: Path) -> None:
    problems = local_path_problems(path.read_text(encoding="utf-8"))
    assert not problems, f"{path.name} names local paths or URLs: {problems}"


PIN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*(\[[A-Za-z0-9,._-]+\])?==[A-Za-z0-9.+!_-]+$")


def test_every_constraint_is_a_name_and_a_version() -> None:
    for path in sorted(ROOT.glob("constraints*.txt")):
        for n, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            line = raw.split("#", 1)[0].strip()
            if not line or line.startswith("--hash"):
                continue
            line = line.removesuffix("\\").strip()
            assert PIN.match(line), f"{path.name}:{n}: {raw!r} is not name==version"


def test_every_dependency_has_a_pin() -> None:
    """A new dependency without a pin would install whatever is newest on a new machine."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    deps = list(project["dependencies"])
    for extra in project.get("optional-dependencies", {}).values():
        deps += extra
    pinned = {
        re.split(r"[=\[]", line, maxsplit=1)[0].strip().lower().replace("_", "-")
        for line in (ROOT / "constraints.txt").read_text(encoding="utf-8").splitlines()
        if "==" in line
    }
    for dep in deps:
        name = re.split(r"[\s<>=!~\[;]", dep, maxsplit=1)[0].lower().replace("_", "-")
        assert name in pinned, f"{name} is a dependency but constraints.txt does not pin it"


@pytest.mark.parametrize(
    "text",
    [
        "foo @ file:///tmp/x/foo-1.0-py3-none-any.whl",
        "foo @ /root/wheels/foo.whl",
        "--find-links /srv/wheels\nfoo==1.0",
        "-f https://example.org/wheels\nfoo==1.0",
        "foo==1.0\n/home/me/bar",
        "foo @ https://example.org/foo-1.0.tar.gz",
        "-e ./vendor/foo",
    ],
)
def test_the_check_catches_local_paths_and_urls(text: str) -> None:
    assert local_path_problems(text)


def test_the_check_accepts_plain_pins_and_ranges() -> None:
    text = 'foo==1.0\nbar[extra]==2.0  # why\n"baz>=1,<2",\nrequires = ["setuptools>=69"]\n'
    assert local_path_problems(text) == []

"""`python -m bench --help` lists the benchmarks; a wrong name is a usage error, not a traceback."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _bench(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "bench", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
        check=False,
    )


def test_help_lists_every_benchmark_with_its_purpose() -> None:
    done = _bench("--help")
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    modules = sorted(p.stem for p in (ROOT / "bench").glob("*.py") if not p.stem.startswith("_"))
    for name in modules:
        assert f"\n  {name} " in done.stdout, name
    assert "Dispatch overhead per message" in done.stdout


def test_an_unknown_benchmark_is_named_with_the_choices() -> None:
    done = _bench("dispatchh")
    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    assert "no benchmark called dispatchh; choose from" in done.stderr
    assert "dispatch" in done.stderr.rsplit("choose from", 1)[1]


def test_the_research_benchmarks_run_only_when_named() -> None:
    # `make bench` runs every benchmark but those that retrain for many minutes.
    from bench.__main__ import ON_REQUEST, parse

    assert "embedders" in ON_REQUEST
    assert "embedders" not in parse([]) and "recall" in parse([])
    assert parse(["embedders"]) == ["embedders"]
    assert "(only when named)" in _bench("--help").stdout

"""Run benchmarks: ``python -m bench`` (all) or ``python -m bench dispatch telegram ...``."""

from __future__ import annotations

import argparse
import ast
import importlib
import pkgutil
import sys
from pathlib import Path

HERE = Path(__file__).parent
ON_REQUEST = frozenset({"embedders"})
"""Benchmarks left out of a plain ``python -m bench`` (``make bench``): each retrains or
re-embeds for many minutes and answers a research question, not a regression; run by name."""


def available() -> dict[str, str]:
    """Every benchmark module and the first line of its docstring (read, not imported)."""
    found: dict[str, str] = {}
    for module in sorted(pkgutil.iter_modules([str(HERE)]), key=lambda m: m.name):
        if module.name.startswith("_"):
            continue
        tree = ast.parse((HERE / f"{module.name}.py").read_text())
        doc = ast.get_docstring(tree) or ""
        found[module.name] = doc.strip().splitlines()[0] if doc.strip() else ""
    return found


def parse(argv: list[str]) -> list[str]:
    """The benchmark names to run (all when none are given); exits with usage on a bad name."""
    benches = available()
    listing = "\n".join(
        f"  {name:<10} {line}" + (" (only when named)" if name in ON_REQUEST else "")
        for name, line in benches.items()
    )
    parser = argparse.ArgumentParser(
        prog="python -m bench",
        description="Run lifebot's benchmarks; each prints ratios against a baseline measured "
        "in the same run.",
        epilog=f"benchmarks:\n{listing}",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "names",
        nargs="*",
        metavar="NAME",
        help="benchmarks to run (default: all but those run only when named)",
    )
    names: list[str] = parser.parse_args(argv).names
    unknown = [n for n in names if n not in benches]
    if unknown:
        parser.error(f"no benchmark called {', '.join(unknown)}; choose from {', '.join(benches)}")
    return names or [n for n in benches if n not in ON_REQUEST]


def main() -> None:
    """Run the named benchmark modules (all of them when none is named)."""
    for name in parse(sys.argv[1:]):
        print(f"\n=== bench.{name} ===", flush=True)
        module = importlib.import_module(f"bench.{name}")
        module.main()


if __name__ == "__main__":
    main()

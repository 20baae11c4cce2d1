"""A learned second stage: boosted trees reorder the best candidates of the first ranking.

The trees were trained offline with LightGBM's LambdaRank on LoCoMo's five development
conversations (``python -m bench._train_ranker``, which also checks them leave one
conversation out) and exported to ``ranker.json``: plain arrays evaluated here with NumPy, so
nothing beyond NumPy is needed at run time and nothing is downloaded.

The features are general signals of one candidate for one question (word and meaning scores,
its neighbours' and its session's scores, whether it is spoken by someone the question names,
whether it talks about a time when the question asks "when", whether it asks or answers, how
much it speaks in the first person, and the shape of the question: "what", "where", "would
... likely"); none names a conversation, a person or a word of the data it was trained on.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import numpy as np
import numpy.typing as npt

from storage.search.analysis import stem as stem_of
from storage.search.corpus import Arrays, Corpus

Floats = npt.NDArray[np.float64]
MODEL_PATH = Path(__file__).with_name("ranker.json")

FEATURES = (
    "final",
    "final_share",
    "lexical_share",
    "cosine",
    "cosine_gap",
    "own_bm25",
    "coverage_share",
    "coverage",
    "neighbours",
    "neighbour_cosine",
    "session_best",
    "session_share",
    "session_rank",
    "speaker",
    "length",
    "says_time",
    "asks_when",
    "pool_rank",
    "topic_terms",
    "session_size",
    "session_place",
    "pool_in_session",
    "window_coverage",
    "lexical_rank",
    "cosine_rank",
    "blend",
    "asks",
    "self_words",
    "before_asks",
    "after_asks",
    "before_cosine",
    "after_cosine",
    "rank_in_session",
    "names_in_text",
    *(f"question_{w}" for w in ("what", "where", "when", "who", "how", "would", "which", "did")),
    "question_is",
    "question_likely",
    "question_words",
)
"""The order of the feature columns the trees were trained on."""

_LIKELY = re.compile(r"\b(likely|would|might|could)\b", re.IGNORECASE)


def question_shape(text: str) -> list[float]:
    """The question's first word as one-hot columns, a "would ... likely" flag, its length.

    Where evidence sits depends on the kind of question: "when" wants a turn that says a
    time, "what ... has she done" several turns in several sessions, "would she likely ..."
    turns that only hint at the answer.
    """
    words = text.lower().split()
    first = words[0] if words else ""
    heads = ("what", "where", "when", "who", "how", "would", "which", "did", "is")
    return [
        *(float(first == h) for h in heads),
        float(bool(_LIKELY.search(text))),
        float(len(words)),
    ]


@dataclass(frozen=True, slots=True)
class Stage1:
    """What the first ranking computed, which the features are made of."""

    final: Floats
    """The first stage's scores (``-inf`` outside the mask)."""
    lexical: Floats
    """Windowed BM25 of every item."""
    blend: Floats
    """Word and meaning blended, before smoothing (0 outside the mask)."""
    cosine: Floats | None
    coverage: npt.NDArray[np.int64]
    session_best: Floats
    """Indexed by session id: the best blended score in that session."""


@dataclass(frozen=True, slots=True)
class Forest:
    """Boosted regression trees as padded arrays, shape (trees, nodes)."""

    feature: npt.NDArray[np.int64]
    """Split feature of each node (0 at leaves: leaves point to themselves)."""
    threshold: Floats
    left: npt.NDArray[np.int64]
    right: npt.NDArray[np.int64]
    value: Floats
    """Leaf values (0 at split nodes)."""
    depth: int
    pool: int
    """How many first-stage candidates are reordered."""

    def predict(self, x: Floats) -> Floats:
        """Sum of the trees' leaves for each row of ``x`` (shape (rows, features))."""
        trees = np.arange(self.feature.shape[0])[:, None]
        rows = np.arange(x.shape[0])[None, :]
        node = np.zeros((self.feature.shape[0], x.shape[0]), dtype=np.int64)
        for _ in range(self.depth):
            go_left = x[rows, self.feature[trees, node]] <= self.threshold[trees, node]
            node = np.where(go_left, self.left[trees, node], self.right[trees, node])
        out: Floats = self.value[trees, node].sum(axis=0)
        return out


def load_forest(data: dict[str, object]) -> Forest:
    """Build a forest from the exported JSON (see ``bench._train_ranker.export``)."""
    trees = data["trees"]
    assert isinstance(trees, list)
    width = max(len(t["feature"]) for t in trees)

    def pad(key: str, dtype: type) -> npt.NDArray[np.generic]:
        out: npt.NDArray[np.generic] = np.zeros((len(trees), width), dtype=dtype)
        for i, t in enumerate(trees):
            out[i, : len(t[key])] = t[key]
        return out

    depth = data["depth"]
    pool = data["pool"]
    assert isinstance(depth, int)
    assert isinstance(pool, int)
    return Forest(
        feature=pad("feature", np.int64).astype(np.int64),
        threshold=pad("threshold", np.float64).astype(np.float64),
        left=pad("left", np.int64).astype(np.int64),
        right=pad("right", np.int64).astype(np.int64),
        value=pad("value", np.float64).astype(np.float64),
        depth=depth,
        pool=pool,
    )


@cache
def shipped_forest() -> Forest | None:
    """The trees shipped beside this module (None when the file is absent)."""
    if not MODEL_PATH.exists():
        return None
    data = json.loads(MODEL_PATH.read_text(encoding="utf-8"))
    if list(data.get("features", [])) != list(FEATURES):
        raise ValueError(f"{MODEL_PATH.name} was trained on other features; retrain it")
    return load_forest(data)


def candidates(final: Floats, mask: npt.NDArray[np.bool_], pool: int) -> npt.NDArray[np.int64]:
    """Positions of the first stage's best ``pool`` items, best first."""
    pool = min(int(mask.sum()), pool)
    if pool <= 0:
        return np.zeros(0, dtype=np.int64)
    top = np.argpartition(-final, pool - 1)[:pool]
    out: npt.NDArray[np.int64] = top[np.argsort(-final[top], kind="stable")]
    return out


def _own_bm25(
    corpus: Corpus, terms: Sequence[tuple[str, float]], pos: npt.NDArray[np.int64]
) -> Floats:
    """Plain BM25 of the candidates' own text (no neighbours), k1 1.2, b 0.75."""
    arr = corpus.arrays()
    n = len(arr.ids)
    lens = arr.lengths[pos]
    avg = float(arr.lengths.mean()) if n else 1.0
    out = np.zeros(len(pos), dtype=np.float64)
    for stem, weight in terms:
        docs, counts = corpus.term(stem)
        if not len(docs):
            continue
        at = np.searchsorted(docs, pos)
        hit = (at < len(docs)) & (docs[np.minimum(at, len(docs) - 1)] == pos)
        tf = np.where(hit, counts[np.minimum(at, len(docs) - 1)], 0.0)
        idf = math.log(1.0 + (n - len(docs) + 0.5) / (len(docs) + 0.5))
        out += weight * idf * tf * 2.2 / (tf + 1.2 * (0.25 + 0.75 * lens / (avg or 1.0)))
    return out


def _ranks(values: Floats) -> Floats:
    """0 for the largest value, 1 for the next, and so on."""
    out = np.empty(len(values), dtype=np.float64)
    out[np.argsort(-values, kind="stable")] = np.arange(len(values))
    return out


def _place_in_session(arr: Arrays, pos: npt.NDArray[np.int64], size: Floats) -> Floats:
    """Where each candidate sits in its session, 0 (first turn) to 1 (last)."""
    first = arr.session[pos]
    # Sessions start at their first turn's position and hold consecutive messages mostly.
    return np.clip((pos - first) / np.maximum(size - 1, 1), 0.0, 1.0).astype(np.float64)


def _window_coverage(
    corpus: Corpus, terms: Sequence[tuple[str, float]], pos: npt.NDArray[np.int64]
) -> Floats:
    """How many topic words each candidate's turn or the turns beside it hold."""
    arr = corpus.arrays()
    look = np.stack([pos, arr.near[1, pos], arr.near[2, pos]])
    out = np.zeros(len(pos), dtype=np.float64)
    for stem, weight in terms:
        if weight < 1.0:
            continue
        docs, _ = corpus.term(stem)
        if len(docs):
            out += np.isin(look, docs).any(axis=0)
    return out


def _rank_in_session(sessions: npt.NDArray[np.int64]) -> Floats:
    """For each candidate, how many better candidates share its session (0: the best)."""
    out = np.zeros(len(sessions), dtype=np.float64)
    seen: dict[int, int] = {}
    for j, s in enumerate(sessions.tolist()):
        out[j] = seen.get(s, 0)
        seen[s] = seen.get(s, 0) + 1
    return out


def _names_in_text(corpus: Corpus, names: Sequence[str], pos: npt.NDArray[np.int64]) -> Floats:
    """How many of the names the question asks about each candidate says (or is said by)."""
    out = np.zeros(len(pos), dtype=np.float64)
    for name in {stem_of(n.lower()) for n in names}:
        docs, _ = corpus.term(name)
        if len(docs):
            out += np.isin(pos, docs)
    return out


def features(
    corpus: Corpus,
    terms: Sequence[tuple[str, float]],
    mask: npt.NDArray[np.bool_],
    speakers: Sequence[int],
    stage: Stage1,
    pos: npt.NDArray[np.int64],
    question: str = "",
    names: Sequence[str] = (),
) -> Floats:
    """The feature matrix of the candidates at ``pos`` (columns in ``FEATURES`` order).

    ``question`` is the question as asked and ``names`` the people it names.
    """
    arr = corpus.arrays()
    n = len(arr.ids)
    c = len(pos)
    final = stage.final[pos]
    best = float(final[0]) if c else 1.0
    lex_max = float(stage.lexical[mask].max()) if mask.any() else 0.0
    cos = stage.cosine
    cos_all = cos if cos is not None else np.zeros(n)
    cos_max = float(cos_all[mask].max()) if mask.any() else 0.0
    padded_blend = np.append(stage.blend, 0.0)
    padded_cos = np.append(np.where(mask, cos_all, 0.0), 0.0)
    before, after = arr.near[1, pos], arr.near[2, pos]
    sessions = arr.session[pos]
    s_best = stage.session_best[sessions]
    # Rank of each candidate's session among the candidates' sessions (0 = the best one).
    uniq = np.unique(s_best)[::-1]
    s_rank = np.searchsorted(-uniq, -s_best).astype(np.float64)
    topic = sum(1 for _, w in terms if w >= 1.0)
    asks_when = any(w < 1.0 for _, w in terms)
    _, inverse, counts = np.unique(sessions, return_inverse=True, return_counts=True)
    size: Floats = np.bincount(arr.session, minlength=n)[sessions].astype(np.float64)
    padded_asks = np.append(arr.asks, False).astype(np.float64)
    padded_all_cos = np.append(cos_all, 0.0)
    shape = np.tile(np.asarray(question_shape(question), dtype=np.float64), (c, 1))
    cols = [
        final,
        final / best if best > 0 else np.zeros(c),
        stage.lexical[pos] / lex_max if lex_max > 0 else np.zeros(c),
        cos_all[pos],
        cos_all[pos] - cos_max,
        _own_bm25(corpus, terms, pos),
        stage.coverage[pos] / topic if topic else np.zeros(c),
        stage.coverage[pos].astype(np.float64),
        (padded_blend[before] + padded_blend[after]) / 2.0,
        np.maximum(padded_cos[before], padded_cos[after]),
        s_best,
        s_best / float(stage.session_best.max() or 1.0),
        s_rank,
        np.isin(arr.speaker[pos], np.asarray(speakers, dtype=np.int64)).astype(np.float64),
        arr.lengths[pos],
        (~np.isnan(arr.mentioned[0, pos])).astype(np.float64),
        np.full(c, float(asks_when)),
        np.arange(c, dtype=np.float64),
        np.full(c, float(topic)),
        size.astype(np.float64),
        _place_in_session(arr, pos, size),
        counts[inverse].astype(np.float64),
        _window_coverage(corpus, terms, pos),
        _ranks(stage.lexical[pos]),
        _ranks(cos_all[pos]),
        stage.blend[pos],
        arr.asks[pos].astype(np.float64),
        arr.self_words[pos].astype(np.float64),
        padded_asks[before],
        padded_asks[after],
        padded_all_cos[before],
        padded_all_cos[after],
        _rank_in_session(sessions),
        _names_in_text(corpus, names, pos),
    ]
    x = np.column_stack([np.stack(cols, axis=1), shape])
    return np.nan_to_num(x.astype(np.float64), neginf=0.0, posinf=0.0)


def rerank(final: Floats, pos: npt.NDArray[np.int64], learned: Floats) -> Floats:
    """Reorder the candidates by the trees; they take the first stage's scores in turn.

    The best candidate by the trees gets the first stage's best score, the second the second
    best, and so on: the order is the model's, while the scale (which the floors, recency and
    abstention read) stays the first stage's.
    """
    out = final.copy()
    order = np.argsort(-learned, kind="stable")
    out[pos[order]] = final[pos]
    return out

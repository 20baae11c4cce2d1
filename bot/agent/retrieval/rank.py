"""Scoring every item of one user's corpus for a question (pure NumPy, no I/O).

1. BM25 over windows: each message counts with the two turns before and after it in its
   session (a detail is often split over turns: "What did you adopt?" / "A puppy!").
2. Cosine similarity to the question's vector, when there is one.
3. Both scaled to [0, 1] over the searchable items and blended with weights.
4. Smoothing along the conversation: a turn gains from its neighbours' scores and from its
   session's best score, because evidence sits in conversations, not in lone lines.
5. A bonus for turns spoken by a person the question names.
6. Optionally, learned trees reorder the best candidates (``learned``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from bot.agent.retrieval.learned import Forest, Stage1, candidates, features, rerank
from storage.search.corpus import Arrays, Corpus

Scores = npt.NDArray[np.float64]


@dataclass(frozen=True, slots=True)
class RankTuning:
    """Weights, tuned on LoCoMo's five development conversations (``python -m bench recall``).

    Chosen by coordinate descent (``python -m bench._tune_recall``). Tuned on four
    conversations and scored on the fifth, in turn, the ranking reaches R@5/R@10 .725/.796;
    these weights score .728/.804 on all five, so they are not fitted to any one of them.
    """

    k1: float = 0.2
    b: float = 0.3
    window: tuple[float, float] = (1.0, 0.5)
    """Weight of the turns one and two away when a message's window is counted for BM25."""
    dense: float = 0.6
    """Share of the cosine in the blend (the rest is BM25)."""
    near: tuple[float, float] = (0.1, 0.0)
    """Share of the neighbours' (one and two turns away) blended scores a turn gains."""
    session: float = 0.2
    """Share of its session's best score a turn gains."""
    speaker: float = 0.2
    """Bonus for a turn spoken by someone the question names."""


@dataclass(frozen=True, slots=True)
class Ranking:
    """Scores of every item, and the signals the caller uses to decide there is evidence."""

    scores: Scores
    cosine: Scores | None
    coverage: npt.NDArray[np.int64]
    """How many distinct topic words of the question (full weight) each item itself holds."""
    stage: Stage1 | None = None
    """The first stage's parts (the learned stage's inputs)."""


def _window_lengths(arr: Arrays, window: tuple[float, float]) -> Scores:
    lens = np.append(arr.lengths, 0.0)
    w1, w2 = window
    near = arr.near
    out: Scores = (
        arr.lengths
        + w1 * (lens[near[1, :-1]] + lens[near[2, :-1]])
        + w2 * (lens[near[0, :-1]] + lens[near[3, :-1]])
    )
    return out


def bm25(
    corpus: Corpus, terms: Sequence[tuple[str, float]], tuning: RankTuning
) -> tuple[Scores, npt.NDArray[np.int64]]:
    """Windowed BM25 of every item, and how many terms each item holds itself."""
    arr = corpus.arrays()
    n = len(arr.ids)
    score = np.zeros(n, dtype=np.float64)
    coverage = np.zeros(n, dtype=np.int64)
    if not n or not terms:
        return score, coverage
    lenw = _window_lengths(arr, tuning.window)
    avg = float(lenw.mean()) or 1.0
    w1, w2 = tuning.window
    weights = np.array([w2, w1, w1, w2])
    tf = np.zeros(n + 1, dtype=np.float64)
    for stem, qweight in terms:
        docs, counts = corpus.term(stem)
        if not len(docs):
            continue
        if qweight >= 1.0:
            coverage[docs] += 1
        tf[docs] = counts
        # The items whose window holds the term: the holders and their neighbours.
        support = np.unique(np.concatenate([docs, arr.near[:, docs].ravel()]))
        support = support[support < n]
        tfw = tf[support] + weights @ tf[arr.near[:, support]]
        tf[docs] = 0.0
        df = len(support)
        idf = math.log(1.0 + (n - df + 0.5) / (df + 0.5))
        norm = tuning.k1 * (1.0 - tuning.b + tuning.b * lenw[support] / avg)
        score[support] += qweight * idf * tfw * (tuning.k1 + 1.0) / (tfw + norm)
    return score, coverage


def _unit(values: Scores, mask: npt.NDArray[np.bool_]) -> Scores:
    """Scale to [0, 1] over the masked items (0 where the mask is off)."""
    if not mask.any():
        return np.zeros_like(values)
    lo = float(values[mask].min())
    hi = float(values[mask].max())
    if hi <= lo:
        return np.where(mask, 1.0 if hi > 0 else 0.0, 0.0)
    return np.where(mask, (values - lo) / (hi - lo), 0.0)


def rank(
    corpus: Corpus,
    terms: Sequence[tuple[str, float]],
    qvec: npt.NDArray[np.float32] | None,
    mask: npt.NDArray[np.bool_],
    speakers: Sequence[int],
    tuning: RankTuning,
    forest: Forest | None = None,
    *,
    question: str = "",
    names: Sequence[str] = (),
) -> Ranking:
    """Score every item; items outside ``mask`` score ``-inf``.

    With ``forest``, its trees reorder the first stage's best candidates; they read the
    ``question`` as asked and the ``names`` of the people it asks about.
    """
    arr = corpus.arrays()
    lexical, coverage = bm25(corpus, terms, tuning)
    blend = (1.0 - tuning.dense) * _unit(lexical, mask) if terms else np.zeros(len(arr.ids))
    cosine = corpus.cosine(qvec) if qvec is not None else None
    if cosine is not None:
        blend = blend + (tuning.dense if terms else 1.0) * _unit(cosine, mask)
    blend = np.where(mask, blend, 0.0)
    padded = np.append(blend, 0.0)
    near = arr.near[:, :-1]
    a1, a2 = tuning.near
    best = np.zeros(len(blend) + 1, dtype=np.float64)
    np.maximum.at(best, arr.session, blend)
    final = (
        blend
        + a1 * (padded[near[1]] + padded[near[2]])
        + a2 * (padded[near[0]] + padded[near[3]])
        + tuning.session * best[arr.session]
    )
    if speakers:
        final = final + tuning.speaker * np.isin(arr.speaker, np.asarray(speakers))
    final = np.where(mask, final, -np.inf)
    stage = Stage1(final, lexical, blend, cosine, coverage, best[:-1])
    if forest is not None and len(arr.ids):
        pos = candidates(final, mask, forest.pool)
        if len(pos) > 1:
            x = features(corpus, terms, mask, speakers, stage, pos, question, names)
            final = rerank(final, pos, forest.predict(x))
    return Ranking(final, cosine, coverage, stage)

"""Retrieval: query understanding (dates in the user's zone, names, recency) and hybrid search."""

from __future__ import annotations

from bot.agent.retrieval.query import QueryPlan, understand
from bot.agent.retrieval.search import Evidence, RetrievalTuning, Retriever, SearchOutcome
from bot.agent.retrieval.timeparse import TimeWindow, parse_time

__all__ = [
    "Evidence",
    "QueryPlan",
    "RetrievalTuning",
    "Retriever",
    "SearchOutcome",
    "TimeWindow",
    "parse_time",
    "understand",
]

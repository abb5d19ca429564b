"""Ranking: keyword candidates from FTS5, vector candidates from the matrix, fused, filtered.

``fts_query`` and ``fuse`` are pure so their behaviour is testable without I/O; ``HybridSearch``
does the two look-ups and assembles hits.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ollama_mcp.domain import SearchFilters, SearchHit
from ollama_mcp.store import KIND_CODES, Store
from ollama_mcp.vectors import Scope, VectorIndex

_WORD = re.compile(r"\w+", re.UNICODE)
MAX_QUERY_TERMS = 64


@dataclass(frozen=True)
class SearchTuning:
    """The ranking's knobs; the defaults are what bench/locomo.py measured best (bench/README.md).

    Four ranked lists are fused: keywords in the memory's content, keywords in its context (the
    content with the memories before it), and meaning of each. A weight of 0 leaves a list out.
    """

    rrf_k: int = 10  # reciprocal rank fusion: score = sum over lists of weight / (rrf_k + rank)
    keyword_weight: float = 1.0
    keyword_context_weight: float = 1.0
    vector_weight: float = 1.0
    vector_context_weight: float = 1.0
    min_depth: int = 50  # candidates each list contributes before fusion, at least


# English function words carry no topic: left out of keyword queries (unless a query has
# nothing else) they stop matching every memory, which keeps BM25 fast and, on LoCoMo, ranks
# slightly better (bench/README.md). Other languages' words pass through untouched.
STOP_WORDS = frozenset(
    "a an the and or but if of at by for with about against between into through during before after "
    "above below to from up down in out on off over under again further then once here there when where "
    "why how all any both each few more most other some such no nor not only own same so than too very "
    "s t can will just don should now i me my myself we our ours ourselves you your yours yourself "
    "yourselves he him his himself she her hers herself it its itself they them their theirs themselves "
    "what which who whom this that these those am is are was were be been being have has had having do "
    "does did doing would could".split()
)


def fts_query(text: str) -> str | None:
    """An FTS5 expression matching any word of ``text``; user syntax is never passed through.

    Every word becomes a quoted string ("a" OR "b"), so quotes, *, NEAR, OR, -, : and
    parentheses in the query are just characters, and cannot raise or change the query.
    """
    words = list(dict.fromkeys(word.lower() for word in _WORD.findall(text)))
    terms = [w for w in words if w not in STOP_WORDS] or words
    terms = terms[:MAX_QUERY_TERMS]
    if not terms:
        return None
    return " OR ".join('"' + term.replace('"', '""') + '"' for term in terms)


def fts_phrase(text: str) -> str | None:
    """An FTS5 phrase matching the words of ``text`` in order (two words at least), else None."""
    words = [word.lower() for word in _WORD.findall(text)][:MAX_QUERY_TERMS]
    if len(words) < 2:
        return None
    return '"' + " ".join(words) + '"'


def fuse(ranked_lists: Sequence[tuple[float, Sequence[int]]], *, k: int) -> list[tuple[int, float]]:
    """Weighted reciprocal rank fusion of ranked id lists, best first (ties: earlier lists first)."""
    scores: dict[int, float] = {}
    for weight, ranked in ranked_lists:
        if weight:
            for rank, item in enumerate(ranked, start=1):
                scores[item] = scores.get(item, 0.0) + weight / (k + rank)
    return sorted(scores.items(), key=lambda pair: -pair[1])


@dataclass(frozen=True)
class Ranked:
    seq: int
    score: float
    similarity: float | None


class HybridSearch:
    """Finds memories by keywords and, when a query vector is given, by meaning."""

    def __init__(self, store: Store, index: VectorIndex, tuning: SearchTuning | None = None) -> None:
        self._store = store
        self._index = index
        self.tuning = tuning or SearchTuning()

    async def search(
        self,
        query: str,
        query_vector: np.ndarray | None,
        filters: SearchFilters,
        conversation_key: int | None,
        top_k: int,
        threshold: float | None,
    ) -> list[SearchHit]:
        tuning = self.tuning
        depth = max(tuning.min_depth, top_k * 4)
        match = fts_query(query)
        phrase = fts_phrase(query)
        # Memories that contain the query word for word come first, whatever the fusion says.
        exact = [seq for seq, _ in await self._store.keyword_search(phrase, filters, top_k)] if phrase else []
        keyword: list[int] = []
        keyword_context: list[int] = []
        if match:
            keyword = [seq for seq, _ in await self._store.keyword_search(match, filters, depth, "content")]
            if tuning.keyword_context_weight:
                keyword_context = [
                    seq for seq, _ in await self._store.keyword_search(match, filters, depth, "context")
                ]
        vector: list[int] = []
        vector_context: list[int] = []
        similarity: dict[int, float] = {}
        if query_vector is not None:
            await self._index.refresh()
            needs_sql_filter = bool(filters.tags or filters.since or filters.until)
            scope = Scope(
                conversation_key=conversation_key,
                kind_codes=tuple(KIND_CODES[kind] for kind in filters.kinds),
                memory_seqs=frozenset(await self._store.filtered_seqs(filters)) if needs_sql_filter else None,
            )
            ranking = self._index.rank(query_vector, depth, scope, also=[*keyword, *keyword_context])
            vector = [seq for seq, _ in ranking.content]
            vector_context = [seq for seq, _ in ranking.context]
            similarity = ranking.similarity
        fused = [Ranked(seq, float("inf"), similarity.get(seq)) for seq in exact] + [
            Ranked(seq, score, similarity.get(seq))
            for seq, score in fuse(
                [
                    (tuning.keyword_weight, keyword),
                    (tuning.keyword_context_weight, keyword_context),
                    (tuning.vector_weight, vector),
                    (tuning.vector_context_weight, vector_context),
                ],
                k=tuning.rrf_k,
            )
            if seq not in exact
        ]
        if threshold is not None:
            # The threshold is on meaning: exact matches, and keyword matches with no vector yet
            # (pending), are kept.
            fused = [r for r in fused if r.similarity is None or r.similarity >= threshold or r.seq in exact]
        chosen = fused[:top_k]
        memories = await self._store.memories_by_seq(r.seq for r in chosen)
        return [
            SearchHit(memories[r.seq], r.score, None if r.similarity is None else round(r.similarity, 4))
            for r in chosen
            if r.seq in memories  # deleted by another process between ranking and reading
        ]

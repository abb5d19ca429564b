"""Ranking: keyword candidates (the in-memory keyword index, FTS5 for exact phrases), vector
candidates from the matrix, fused, filtered.

``query_terms``, ``fts_any``, ``fts_phrase`` and ``fuse`` are pure so their behaviour is testable
without I/O; ``HybridSearch`` does the look-ups and assembles hits.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace

import anyio
import numpy as np

from ollama_mcp.domain import Facet, Scope, SearchFilters, SearchHit
from ollama_mcp.storage.ranker import QueryVector, resolve
from ollama_mcp.storage.ranking import (
    MAX_QUERY_TERMS,
    WORD,
    SearchTuning,
    candidate_depth,
    choose,
    happened_or_named_in,
    query_terms,
    told_later_span,
)
from ollama_mcp.storage.sqlite import vector_blocks
from ollama_mcp.storage.sqlite.keyword_index import KeywordIndex
from ollama_mcp.storage.sqlite.store import FACET_CODES, KIND_CODES, SearchReads, Store
from ollama_mcp.storage.sqlite.vector_index import EarlyLoad, VectorIndex
from ollama_mcp.when import TimeWindow


def fts_any(terms: Sequence[str]) -> str | None:
    """An FTS5 expression matching any of ``terms``; user syntax is never passed through.

    Every word becomes a quoted string ("a" OR "b"), so quotes, *, NEAR, OR, -, : and
    parentheses in the query are just characters, and cannot raise or change the query.
    """
    if not terms:
        return None
    return " OR ".join('"' + term.replace('"', '""') + '"' for term in terms)


def fts_phrase(text: str, required: Sequence[str] = ()) -> str | None:
    """An FTS5 phrase matching the words of ``text`` in order (two words at least), else None.

    ``required`` words (some of the phrase's own) are ANDed to it: that matches the same memories,
    but FTS5 then checks word positions only where the rare words meet, instead of in every memory
    holding "the" (2.5x faster at 100k memories).
    """
    words = [word.lower() for word in WORD.findall(text)][:MAX_QUERY_TERMS]
    if len(words) < 2:
        return None
    own = set(words)
    return " AND ".join(['"' + " ".join(words) + '"', *('"' + w + '"' for w in required if w in own)])


# A search brings the in-memory keyword index up to date itself when at most this many memories
# arrived or changed since it last looked (one memory: about 0.3 ms).
CATCH_UP_IN_SEARCH = 32


# How long a background load waits for running searches to end before it goes on anyway: with
# searches back to back (a team's server) there may be no quiet moment at all.
_GIVE_WAY_S = 0.05


class _InFlight:
    """The searches running now, and a way for background work to wait until none is.

    At 100k memories, loading the keyword index takes about 1 s after a restart (FTS5's postings
    read on two connections while the arrays are built: 0.9 s and 0.45 s of work). The searches
    of that second take their keywords from FTS5; beside the load, on a 2-core machine shared
    with the embedding server, the second of them took 26 ms over an embedding call, 15 ms when
    the load waits for it (bench/README.md).
    """

    def __init__(self) -> None:
        self._count = 0
        self._idle = anyio.Event()
        self._idle.set()

    @contextmanager
    def running(self) -> Iterator[None]:
        if not self._count:
            self._idle = anyio.Event()
        self._count += 1
        try:
            yield
        finally:
            self._count -= 1
            if not self._count:
                self._idle.set()

    async def quiet(self) -> None:
        """Return once no search runs, or after ``_GIVE_WAY_S`` at most."""
        with anyio.move_on_after(_GIVE_WAY_S):
            await self._idle.wait()


class HybridSearch:
    """The SQLite backend's ``Ranker``: finds memories by keywords and, when a query vector is
    given, by meaning, from indexes this process holds in memory and keeps current.

    Keyword lists come from FTS5, or in a large store from the in-memory keyword index
    (``keywords.py``) once it is loaded; from FTS5 even then when a query word is several tokens
    to FTS5 ("config_value": a phrase, which the postings cannot match). The exact-phrase list
    always comes from FTS5, which knows word positions.
    """

    def __init__(
        self, store: Store, model: str, tuning: SearchTuning | None = None, early_load: EarlyLoad | None = None,
    ) -> None:
        self._store = store
        self.vectors = VectorIndex(store, model, early_load)
        self._searching = _InFlight()
        self.keywords = KeywordIndex(store, self._searching.quiet)
        self.tuning = tuning or SearchTuning()
        self._merged_at = 0  # the memory count when this process last merged the keyword index
        self._newest_vector = -1  # the newest vector row when this process last folded
        self._common: dict[str, bool] = {}  # word -> is it common? (for the store size below)
        self._common_for_size = 0
        self._memory_count = 0
        self._searches_since_count = 0

    async def search(
        self,
        query: str,
        query_vector: np.ndarray | QueryVector | None,
        filters: SearchFilters,
        conversation_key: int | None,
        top_k: int,
        threshold: float | None,
        window: TimeWindow | None = None,
    ) -> list[SearchHit]:
        with self._searching.running():  # a keyword load meanwhile waits (_InFlight)
            tuning = self.tuning
            depth = candidate_depth(tuning, top_k, window)
            if window is not None:
                query = window.keyword_text  # the query vector is of the whole text; the keywords are not its dates

            words = query_terms(query)
            word_tokens = dict(zip(words, await self.keywords.tokens(words), strict=True))
            in_memory = all(len(tokens) <= 1 for tokens in word_tokens.values())
            if self.keywords.busy or not self.keywords.loaded:
                in_memory = False  # not held, or being loaded or rebuilt: FTS5 ranks the same, no waiting
            terms = await self._informative_terms(words, word_tokens if in_memory else None)
            needs_sql_filter = bool(
                filters.tags or filters.since or filters.until or filters.actors or filters.conversation_ids is not None
            )
            memory_seqs = frozenset(await self._store.filtered_seqs(filters)) if needs_sql_filter else None
            exclude_versions = (in_memory or query_vector is not None) and not filters.include_superseded
            reads = await self._reads(
                query, terms, filters, top_k, depth, fts=not in_memory, superseded=exclude_versions
            )
            exact, keyword, keyword_context = reads.keyword_lists
            scope = Scope(
                conversation_key=conversation_key,
                kind_codes=tuple(KIND_CODES[kind] for kind in filters.kinds),
                memory_seqs=memory_seqs,
                excluded_seqs=reads.superseded,
            )
            if in_memory and terms and self.keywords.behind(reads.keyword_state) > CATCH_UP_IN_SEARCH:
                # Another process wrote many memories: catching up would hold this search (100
                # memories: 30 ms). FTS5 ranks the same; the upkeep brings the index up to date.
                in_memory = False
                reads = await self._reads(query, terms, filters, top_k, depth, fts=True, superseded=exclude_versions)
                exact, keyword, keyword_context = reads.keyword_lists
            if in_memory and terms:
                await self.keywords.refresh(reads.keyword_state)
                tokens = [token for term in terms for token in word_tokens[term]]
                keyword = self.keywords.rank(FACET_CODES["content"], tokens, depth, scope)
                if tuning.keyword_context_weight:
                    keyword_context = self.keywords.rank(FACET_CODES["context"], tokens, depth, scope)
            told_later: frozenset[int] = frozenset()
            if window is not None and (span := told_later_span(tuning, window)) is not None:
                told = await self._store.moments_between(filters, *span, tuning.told_rows)
                told_later = happened_or_named_in(window, told)
            by_meaning: list[int] = []
            similarity: dict[int, float] = {}
            vector = await resolve(query_vector)  # Ollama computed it while the keyword work above ran
            if vector is not None:
                # After the keyword queries, not beside them: both are CPU-bound and BLAS already uses
                # both cores (measured: no gain, bench/README.md).
                await self.vectors.refresh(reads.data_version)
                ranking = await self.vectors.rank(
                    vector, depth, scope, candidates=[*exact, *keyword, *keyword_context, *told_later]
                )
                by_meaning = [seq for seq, _ in ranking.ranked]
                similarity = ranking.similarity
            return await choose(
                tuning, exact=exact, keyword=keyword, keyword_context=keyword_context, by_meaning=by_meaning,
                similarity=similarity, top_k=top_k, depth=depth, threshold=threshold, window=window,
                rows=self._store, words=words, told=told_later,
            )

    # -- keeping the indexes current (the Ranker protocol) ----------------------------------------

    def vectors_added(self) -> None:
        """This process wrote vectors: fetch them (by id) before the next search."""
        self.vectors.mark_dirty()

    async def catch_up(self) -> None:
        """Fetch the vectors this process wrote, and bring a held keyword index up to date, before
        the next search would (after a store: 0.8 ms of a search at 10k memories, and the keyword
        index's catch-up, another 0.85 ms at 100k)."""
        await self.vectors.prepare_stand_ins()
        if self.keywords.loaded and not self.keywords.busy:
            await self.keywords.refresh()

    async def removed(self, seqs: Iterable[int], contexts: Sequence[int] = ()) -> None:
        await self.vectors.remove(seqs)
        if contexts:
            await self.vectors.remove(contexts, facet="context")

    def invalidate(self) -> None:
        self.vectors.invalidate()

    async def warm_up(self) -> None:
        """Load the vectors (a search meanwhile waits for them, which only they give), then, in a
        large store, the keyword index (a search meanwhile takes its keyword lists from FTS5)."""
        await self.vectors.refresh()
        await self._fold()  # the next process reads blocks, not rows
        await self._hold_keywords(await self._store.approximate_memory_count())
        await self.vectors.read_own_vectors()  # those the load left on disk
        await self.vectors.prepare_stand_ins()  # last: a step at a time, beside the first searches

    async def upkeep(self, min_new: int = 0) -> bool:
        """Fold the vectors waiting in rows into blocks (``vector_blocks``); load the keyword index once
        the store is large; merge FTS5's keyword index into one segment if ``min_new`` memories
        (stored by any process) arrived since this process last did. A quiet store (no vector
        came since the last upkeep) then gives every free page back to the file system, not only
        those past the few megabytes kept for the next writes, and truncates its write-ahead log
        (``settle``). Returns whether it merged."""
        quiet = await self._fold()
        await self.vectors.read_own_vectors()  # those a load since the warm-up left on disk
        count = await self._store.approximate_memory_count()
        if self.keywords.loaded:
            await self.keywords.refresh()  # what searches left to it (a large catch-up)
        else:
            await self._hold_keywords(count)
        merged = count != self._merged_at and count - self._merged_at >= min_new
        if merged:
            await self._store.merge_keyword_indexes()
            self._merged_at = count
        if quiet:
            await self._store.settle()
        return merged

    async def _fold(self) -> bool:
        """Keep each vector once: empty the blocks that lost a quarter of their slots, then fold
        the rows waiting into blocks, a block's worth at a time (``VectorStore.fold_vectors``),
        and give the pages the rows left back to the file system. When no vector came since the
        last fold (a quiet store), the rows left after the whole blocks are folded too, into a
        partial block. Returns whether the store was quiet."""
        newest = await self._store.newest_vector_id()
        quiet, self._newest_vector = newest == self._newest_vector, newest
        await self._store.compact_vector_blocks(self.vectors.model)
        if await self._store.fold_vectors(self.vectors.model, tail=vector_blocks.TAIL_ROWS if quiet else 0):
            await self._store.give_back_free_pages()  # the rows' pages the fold emptied
        return quiet

    async def _hold_keywords(self, memory_count: int) -> None:
        """Load the in-memory keyword index once the store is large enough to need it. Below that
        FTS5 ranks as fast (10k memories: 2.2 ms a keyword search either way, and a search's FTS5
        statement runs while Ollama embeds its query), and the index would cost 20 MB and a load."""
        if memory_count >= self.tuning.keyword_index_min_memories and not self.keywords.loaded:
            await self.keywords.refresh()

    async def _reads(
        self, query: str, terms: list[str], filters: SearchFilters, top_k: int, depth: int, *, fts: bool,
        superseded: bool,
    ) -> SearchReads:
        """The database's part, in one trip: keyword_lists are (exact phrase matches, and with
        ``fts`` BM25 over content and over context, from FTS5), each best first."""
        searches: list[tuple[str, Facet, int]] = []
        phrase, match = fts_phrase(query, terms), fts_any(terms) if fts else None
        if phrase:
            searches.append((phrase, "content", top_k))
        if match:
            searches.append((match, "content", depth))
            if self.tuning.keyword_context_weight:
                searches.append((match, "context", depth))
        reads = await self._store.search_reads(searches, filters, superseded=superseded)
        found = list(reads.keyword_lists)
        exact = found.pop(0) if phrase else []
        keyword = found.pop(0) if match else []
        keyword_context = found.pop(0) if found else []
        return replace(reads, keyword_lists=[exact, keyword, keyword_context])

    async def _informative_terms(self, terms: list[str], tokens: dict[str, tuple[str, ...]] | None) -> list[str]:
        """``terms`` without those found in a large share of all memories (if any rarer remain).

        ``tokens``: each term's token, when the in-memory keyword index can count them (else
        FTS5 counts them).
        """
        if len(terms) < 2:
            return terms
        if tokens is not None:
            size = self.keywords.size
            cap = max(self.tuning.common_min_docs, int(size * self.tuning.common_share))
            rare = [t for t in terms if sum(self.keywords.document_count(token) for token in tokens[t]) <= cap]
            return rare or terms
        if self._searches_since_count % 64 == 0:  # the count moves slowly: read it now and then
            self._memory_count = await self._store.approximate_memory_count()
        self._searches_since_count += 1
        size = self._memory_count
        if not self._common_for_size or abs(size - self._common_for_size) > self._common_for_size // 5:
            self._common.clear()  # the store grew or shrank by a fifth: shares have moved
            self._common_for_size = max(size, 1)
        cap = max(self.tuning.common_min_docs, int(size * self.tuning.common_share))
        unknown = [t for t in terms if t not in self._common]
        if unknown:
            counts = await self._store.document_counts(unknown, cap)
            if len(self._common) > 10_000:
                self._common.clear()
            self._common.update({term: counts[term] > cap for term in unknown})
        return [t for t in terms if not self._common[t]] or terms

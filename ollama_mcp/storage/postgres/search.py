"""The PostgreSQL backend's ``Ranker``: every list is ranked inside the database, so an instance
holds no index of its own (nothing to load at start, nothing to go stale when another instance
writes) and its memory stays flat however large the store grows.

The lists are those of the SQLite ranker, fused by the same code (``ranking.choose``):

- exact: memories holding the query's words in order (``phraseto_tsquery``), best first;
- keywords over content and over context: full-text search (GIN indexes over generated
  ``tsvector`` columns) finds the matches, BM25 from term statistics ranks them;
- meaning in context: nearest context vectors by the (model, dimension)'s HNSW index (a memory
  without a context vector yet is ranked by a stand-in for it, ``ranking.stand_in``, held in
  this process while it waits), filtered after the index scan; when
  the filters leave fewer than wanted, an exact scan of the filtered memories takes over;
- told of later: for a short window, the memories of the days after it whose words name a time in
  it (``ranking.told_later_span``; by ``memories_conversation_occurred``);
- the content similarity of every candidate, read by key.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Sequence
from functools import partial
from typing import Any, Generic, TypeVar

import anyio
import numpy as np
import psycopg
from psycopg import sql

from ollama_mcp.background import at_once
from ollama_mcp.domain import SearchFilters, SearchHit
from ollama_mcp.errors import EmbeddingMismatchError
from ollama_mcp.storage.memory_rules import CONTEXT_NEIGHBOUR_CHARS, CONTEXT_NEIGHBOURS
from ollama_mcp.storage.postgres.dialect import POSTGRES
from ollama_mcp.storage.postgres.keyword_lists import KeywordLists
from ollama_mcp.storage.postgres.memories import moments_between
from ollama_mcp.storage.postgres.rows import filter_sql
from ollama_mcp.storage.postgres.store import PgStore
from ollama_mcp.storage.ranker import QueryVector, resolve
from ollama_mcp.storage.ranking import (
    SearchTuning,
    candidate_depth,
    choose,
    happened_or_named_in,
    query_terms,
    stand_in,
    told_later_span,
)
from ollama_mcp.storage.sql.rows import ALL_KINDS, text_kept
from ollama_mcp.when import TimeWindow

# HNSW neighbours fetched per wanted memory before filtering (a memory of several chunks has
# several rows, and filters drop some; narrow filters that leave too few fall back to an exact
# scan). 2, not 4, since only the context facet's index is scanned: at 1M memories, 160
# neighbours through the filter check cost 3-4 ms more a search than 80 (bench/README.md).
OVERFETCH = 2
SIZE_EVERY = 64  # searches between two reads of the store's size and word statistics (``KeywordLists.read_size``)
# pgvector's ef_search, by the store's size (and never below the neighbours fetched): an HNSW
# graph's recall at one ef_search falls as the graph grows, and the scan's cost rises with it.
# Each size's value keeps recall@10 against exact search at 0.97 or more for queries far from
# every memory, the hard case (synthetic, bench/pg_ef_search.py): at ef_search 100, 0.9985 at 10k
# memories and 0.9915 at 20k (0.974 at 40k, 0.889 at 100k); at 160, 0.997 at 40k (0.946 at
# 100k). Past 40k, 250: at 1M memories, recall@10 over 480 queries near stored ones was 0.948 at
# 200, 0.960 at 250, 0.969 at 300, and at 200 some query sets fell below 0.95
# (bench/postgres_1m.py). At 10k, 100 instead of 250 takes the scan from 3.6 to 1.4 ms, and
# LoCoMo dev's results on PostgreSQL are the same to the last question with either model.
EF_SEARCH_BY_SIZE = ((20_000, 100), (40_000, 160))  # (memories at most, ef_search)
MIN_EF_SEARCH = 250  # beyond the sizes above
# Memories without a context vector yet that a search ranks one by one, by stand-ins for their
# context vectors (``ranking.stand_in``, built once each in this process and held until the
# context vector arrives: 5,000 x 768 dimensions, 15 MB); past this many (a large import the
# backfill has not reached), by their own vectors, through the content facet's HNSW index.
GAPS_RANKED_EXACTLY = 5_000
STAND_INS_READ = 256  # waiting memories whose stand-ins one statement reads (with their parts: ~770 vectors)


class PgRanker:
    """Ranks memories of a ``PgStore`` inside PostgreSQL; see the module's docstring."""

    def __init__(self, store: PgStore, model: str, tuning: SearchTuning | None = None) -> None:
        self._store = store
        self.model = model
        self.tuning = tuning or SearchTuning()
        self._searches = 0
        self._words = KeywordLists()  # the keyword lists and the word statistics they rank by
        # Stand-ins for the context vectors of memories still waiting for theirs (``_stand_ins``).
        self._stand_ins: dict[int, np.ndarray] = {}
        self._stacked: tuple[list[int], np.ndarray] = ([], np.zeros((0, 0), dtype=np.float32))

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
        tuning = self.tuning
        depth = candidate_depth(tuning, top_k, window)
        if window is not None:
            query = window.keyword_text  # the query vector is of the whole text; the keywords are not its dates
        params: dict[str, Any] = {}
        where = filter_sql(filters, params)
        words = query_terms(query)
        lists: dict[str, list[int]] = {}
        span = told_later_span(tuning, window)  # what was said of a short window later, read with the keywords
        similarity: dict[int, float] = {}  # content similarity of every candidate with a vector
        # Every list here needs the vector (for the candidates' similarities): wait for it first.
        resolved = await resolve(query_vector)
        vector = None if resolved is None else resolved.astype(np.float32, copy=False)

        async def similarities(conn: psycopg.AsyncConnection, found: list[int]) -> None:
            if vector is not None:  # (a stored dimension other than the query's matches no row)
                similarity.update(await self._similarities(conn, vector, vector.size, found))

        # Both keyword lists score the query's informative lexemes, by their document frequencies
        # in each keyword column: the first list to ask reads them all.
        columns = ("content_words", "context_words") if tuning.keyword_context_weight else ("content_words",)
        informative = _ReadOnce(lambda conn: self._words.query_lexemes(conn, words, columns, tuning))

        async def by_content_words(conn: psycopg.AsyncConnection) -> None:
            lexemes = await informative.read(conn)
            lists["exact"] = await self._words.exact(conn, query, where, params, top_k)
            lists["keyword"] = await self._words.keywords(conn, "content_words", lexemes, where, params, depth)
            await similarities(conn, list(dict.fromkeys([*lists["exact"], *lists["keyword"]])))
            if window is not None and span is not None:
                # On this connection, after the keywords, not on one of its own: a read of 50 rows
                # (0.1 ms) while the nearest-vector scan takes milliseconds, and a fourth connection
                # a search would hold from the pool (8) for nothing.
                told = await moments_between(conn, filters, *span, tuning.told_rows)
                lists["told"] = list(happened_or_named_in(window, told))
                await similarities(conn, lists["told"])

        async def by_context_words(conn: psycopg.AsyncConnection) -> None:
            lexemes = await informative.read(conn)
            lists["keyword_context"] = await self._words.keywords(conn, "context_words", lexemes, where, params, depth)
            await similarities(conn, lists["keyword_context"])

        async def by_meaning(conn: psycopg.AsyncConnection) -> None:
            assert vector is not None
            lists["by_meaning"] = await self._by_meaning(conn, vector, where, params, depth, narrow=narrows(filters))
            await similarities(conn, lists["by_meaning"])

        self._searches += 1
        if (self._searches - 1) % SIZE_EVERY == 0:  # before the lists: the keyword lists use what it reads
            async with self._store.reading("search memories") as conn:
                await self._words.read_size(conn)
        # The lists run at once, each on its own connection (each statement reads its own committed
        # snapshot either way): a search waits for the slowest list, not for their sum.
        parts = [by_content_words]
        if tuning.keyword_context_weight:
            parts.append(by_context_words)
        if vector is not None:
            parts.append(by_meaning)
        await self._concurrently(parts)
        return await choose(
            tuning, exact=lists["exact"], keyword=lists["keyword"], keyword_context=lists.get("keyword_context", []),
            by_meaning=lists.get("by_meaning", []), similarity=similarity, top_k=top_k, depth=depth,
            threshold=threshold, window=window, rows=self._store, words=words, told=lists.get("told", []),
        )

    async def _concurrently(self, parts: Sequence[Callable[[psycopg.AsyncConnection], Awaitable[None]]]) -> None:
        """Runs each part on its own pooled connection, all at once (``at_once``: the first failure
        is raised as itself, after the other parts have stopped)."""

        async def on_a_connection(part: Callable[[psycopg.AsyncConnection], Awaitable[None]]) -> None:
            async with self._store.reading("search memories") as conn:
                await part(conn)

        await at_once(*(partial(on_a_connection, part) for part in parts))

    async def _by_meaning(
        self, conn: psycopg.AsyncConnection, vector: np.ndarray, where: list[str],
        params: dict[str, Any], depth: int, *, narrow: bool,
    ) -> list[int]:
        """The ``depth`` memories nearest in meaning (context vectors; own vectors where no context
        vector exists yet) that pass the filters."""
        filters = " AND ".join(where) or "true"
        limit = depth * OVERFETCH
        # The nearest context vectors, by the facet's HNSW index (used only when its predicate
        # appears literally in the query); and the memories with no context vector yet, by their own
        # vector: exactly, when few (the usual state: the backfill is seconds behind), else by the
        # content facet's index. context_gaps lists them (postgres/migrations/0013); each is checked
        # against memory_embeddings, so a stale row of it costs a probe, never a wrong rank.
        cursor = await conn.execute(  # one round trip: the stored dimension, the scans' ef_search, the gaps
            "SELECT (SELECT dim FROM memory_embeddings WHERE model = %(model)s LIMIT 1),"
            " set_config('hnsw.ef_search', %(ef)s, true),"
            " array(SELECT memory_seq FROM context_gaps WHERE model = %(model)s LIMIT %(gaps)s)",
            {"model": self.model, "ef": str(ef_search(self._words.memory_count, limit)),
             "gaps": GAPS_RANKED_EXACTLY + 1},
        )
        row = await cursor.fetchone()
        if row is None or row[0] is None:  # no vector of this model is stored yet
            return []
        dim = int(row[0])
        if vector.size != dim:
            raise EmbeddingMismatchError.model_changed(self.model, vector.size, dim)
        gaps: list[int] = list(row[2])
        dim_sql, model_sql = sql.Literal(dim), sql.Literal(self.model)

        def nearest(facet: str) -> sql.Composed:
            return sql.SQL(
                "SELECT e.memory_seq, e.vector::vector({dim}) <=> %(q)s AS distance FROM memory_embeddings e"
                " WHERE e.model = {model} AND e.dim = {dim} AND e.facet = {facet}"
                " ORDER BY e.vector::vector({dim}) <=> %(q)s LIMIT %(near)s"
            ).format(dim=dim_sql, model=model_sql, facet=sql.Literal(facet))

        context = nearest("context")
        no_context = lacks_context("u", model_sql)
        if not gaps:
            near = sql.SQL("({context})").format(context=context)
        elif len(gaps) <= GAPS_RANKED_EXACTLY:
            stand_ins = await self._stand_ins_of(conn, gaps, dim)
            seqs = list(stand_ins)
            gap_seqs: list[int] = []
            gap_distances: list[float] = []
            if seqs:  # cosine distances, as ``<=>`` gives them (every vector is unit length)
                if self._stacked[0] != seqs:  # (stacked again only when the waiting memories change)
                    self._stacked = (seqs, np.stack([stand_ins[seq] for seq in seqs]))
                distances = 1.0 - self._stacked[1] @ vector.astype(np.float32)
                nearest_gaps = np.argsort(distances, kind="stable")[:limit]
                gap_seqs, gap_distances = [seqs[i] for i in nearest_gaps.tolist()], distances[nearest_gaps].tolist()
            params = {**params, "gap_seqs": gap_seqs, "gap_distances": gap_distances}
            near = sql.SQL(
                "({context}) UNION ALL"
                " SELECT * FROM unnest(%(gap_seqs)s::bigint[], %(gap_distances)s::float8[]) AS g(memory_seq, distance)"
            ).format(context=context)
        else:  # a large import still waiting for the backfill
            near = sql.SQL(
                "({context}) UNION ALL (SELECT u.memory_seq, u.distance FROM ({content}) u WHERE {no_context})"
            ).format(context=context, content=nearest("content"), no_context=no_context)
        index_scan = sql.SQL(
            "WITH near AS ({near})"
            # Each neighbour's memory is checked against the filters by key ("LIMIT 1" keeps the
            # planner from hashing every memory for a few hundred neighbours: 8 of 17 ms at 10k).
            " SELECT e.memory_seq, min(e.distance) AS d FROM near e"
            " CROSS JOIN LATERAL (SELECT 1 FROM memories m WHERE m.seq = e.memory_seq AND {filters} LIMIT 1) passes"
            " GROUP BY e.memory_seq ORDER BY d, e.memory_seq LIMIT %(limit)s"
        ).format(near=near, filters=sql.SQL(filters))
        values = {**params, "q": vector, "near": limit, "limit": depth, "gaps": gaps}
        cursor = await conn.execute(index_scan, values)
        found = [int(row[0]) for row in await cursor.fetchall()]
        if len(found) >= depth or not narrow:
            return found
        # The filters kept too few of the index's neighbours: rank the filtered memories exactly
        # ("+ 0" keeps the planner off the index, whose scan stops at ef_search rows).
        covered = sql.SQL("(e.facet = 'context' OR {})").format(lacks_context("e", model_sql))
        exact_scan = sql.SQL(
            "SELECT e.memory_seq, min((e.vector::vector({dim}) <=> %(q)s) + 0) AS d FROM memories m"
            " JOIN memory_embeddings e ON e.memory_seq = m.seq AND e.model = {model} AND e.dim = {dim}"
            " WHERE {covered} AND {filters} GROUP BY e.memory_seq ORDER BY d, e.memory_seq LIMIT %(limit)s"
        ).format(dim=dim_sql, model=model_sql, covered=covered, filters=sql.SQL(filters))
        cursor = await conn.execute(exact_scan, values)
        return [int(row[0]) for row in await cursor.fetchall()]

    async def _stand_ins_of(self, conn: psycopg.AsyncConnection, gaps: list[int], dim: int) -> dict[int, np.ndarray]:
        """The stand-in of each of ``gaps`` (memories without a context vector, as context_gaps
        lists them) that has its own vector: built once, from the own vectors of the memories its
        context holds, by the rule contexts are written by (``rows.earlier_contents``); those
        no longer waiting are dropped."""
        waiting = set(gaps)
        for seq in self._stand_ins.keys() - waiting:
            del self._stand_ins[seq]
        missing = [seq for seq in gaps if seq not in self._stand_ins]
        for start in range(0, len(missing), STAND_INS_READ):  # (a few rows at a time: flat memory)
            await self._read_stand_ins(conn, missing[start:start + STAND_INS_READ], dim)
        return {seq: self._stand_ins[seq] for seq in gaps if seq in self._stand_ins}

    async def _read_stand_ins(self, conn: psycopg.AsyncConnection, missing: list[int], dim: int) -> None:
        """Build the stand-ins of ``missing`` in two statements, each by key: what their contexts
        hold, then those memories' own vectors. (One statement joining both read 256 memories in
        28 s right after a burst of stores, before ANALYZE had seen the new rows: the planner
        scanned memory_embeddings once per part; apart, each is a lookup by key.)"""
        if not missing:
            return
        flows = f"u.kind NOT IN ('summary', 'fact') AND {text_kept(POSTGRES, 'u.')}"
        cursor = await conn.execute(
            "SELECT u.seq, p.seq, CASE WHEN p.seq = u.seq THEN length(p.content)"
            " ELSE least(length(p.content), %(clip)s) END FROM memories u"
            " CROSS JOIN LATERAL (SELECT u.seq, u.content UNION ALL (SELECT q.seq, q.content FROM memories q"
            f"  WHERE {flows} AND q.conversation_id = u.conversation_id AND q.seq < u.seq"
            f"  AND q.kind NOT IN ('summary', 'fact') AND {text_kept(POSTGRES, 'q.')}"
            "  ORDER BY q.seq DESC LIMIT %(neighbours)s)) AS p(seq, content)"
            " WHERE u.seq = ANY(%(seqs)s)",
            {"clip": CONTEXT_NEIGHBOUR_CHARS, "neighbours": CONTEXT_NEIGHBOURS, "seqs": missing},
            prepare=False,  # a plan for this array's size, never a generic one
        )
        parts = [(int(seq), int(part), int(chars)) for seq, part, chars in await cursor.fetchall()]
        cursor = await conn.execute(
            "SELECT memory_seq, vector FROM memory_embeddings WHERE memory_seq = ANY(%(parts)s)"
            " AND model = %(model)s AND dim = %(dim)s AND facet = 'content' AND chunk_index = 0",
            {"parts": sorted({part for _, part, _ in parts}), "model": self.model, "dim": dim},
            prepare=False,
        )
        vectors = {int(seq): np.asarray(cell.to_numpy(), dtype=np.float32) for seq, cell in await cursor.fetchall()}
        own: dict[int, int] = {}
        earlier: dict[int, list[tuple[np.ndarray, int]]] = {}
        for seq, part, chars in parts:
            if part == seq:
                own[seq] = chars
            elif part in vectors:
                earlier.setdefault(seq, []).append((vectors[part], chars))
        for seq, chars in own.items():
            if seq in vectors:
                self._stand_ins[seq] = stand_in(vectors[seq], chars, earlier.get(seq, []))

    async def _similarities(
        self, conn: psycopg.AsyncConnection, vector: np.ndarray, dim: int, seqs: list[int]
    ) -> dict[int, float]:
        """The content similarity of each of ``seqs`` that has a content vector (its best chunk)."""
        if not seqs:
            return {}
        cursor = await conn.execute(
            sql.SQL(
                "SELECT memory_seq, max(1 - (vector::vector({dim}) <=> %(q)s)) FROM memory_embeddings"
                " WHERE memory_seq = ANY(%(seqs)s) AND model = %(model)s AND facet = 'content' AND dim = {dim}"
                " GROUP BY memory_seq"
            ).format(dim=sql.Literal(dim)),
            {"q": vector, "seqs": seqs, "model": self.model},
        )
        return {int(seq): float(score) for seq, score in await cursor.fetchall()}

    # -- the Ranker protocol's upkeep: nothing is held in this process ---------------------------

    def vectors_added(self) -> None:
        """Nothing to do: the database's indexes are current when the write commits."""

    async def catch_up(self) -> None:
        """Nothing to do: no copy of the vectors is held here."""

    async def removed(self, seqs: Iterable[int], contexts: Sequence[int] = ()) -> None:
        """Nothing to do: deleted rows left the indexes with the delete."""

    def invalidate(self) -> None:
        """Nothing to do: no copy of the vectors is held here."""

    async def warm_up(self) -> None:
        """Open the pool's connections ahead of the first search (the pool already did)."""

    async def upkeep(self, min_new: int = 0) -> bool:
        """PostgreSQL's autovacuum keeps the GIN and HNSW indexes; nothing runs here."""
        return False


T = TypeVar("T")


class _ReadOnce(Generic[T]):
    """A read the concurrent lists of one search need alike: the first list to ask makes it on its
    own connection; the others wait for that result (or its failure) instead of repeating it."""

    def __init__(self, read: Callable[[psycopg.AsyncConnection], Awaitable[T]]) -> None:
        self._read = read
        self._done: anyio.Event | None = None
        self._value: T | None = None
        self._failure: BaseException | None = None

    async def read(self, conn: psycopg.AsyncConnection) -> T:
        if self._done is not None:
            await self._done.wait()
            if self._failure is not None:
                raise self._failure
            assert self._value is not None
            return self._value
        self._done = anyio.Event()
        try:
            self._value = value = await self._read(conn)
        except BaseException as exc:  # the waiting lists raise it too, never reading an empty result
            self._failure = exc
            raise
        finally:
            self._done.set()
        return value


def ef_search(memories: int, neighbours: int) -> int:
    """pgvector's ``hnsw.ef_search`` for a scan of ``neighbours`` on a store of ``memories``: by
    EF_SEARCH_BY_SIZE, and never fewer than the neighbours (an HNSW scan yields at most
    ef_search rows)."""
    for most, ef in EF_SEARCH_BY_SIZE:
        if memories <= most:
            return max(ef, neighbours)
    return max(MIN_EF_SEARCH, neighbours)


def narrows(filters: SearchFilters) -> bool:
    """Whether ``filters`` can exclude a large share of memories (beyond replaced versions)."""
    return bool(filters.conversation_id or filters.conversation_ids is not None or filters.tags or filters.since
                or filters.until or filters.actors) or set(filters.kinds) != ALL_KINDS


def lacks_context(alias: str, model: sql.Composable) -> sql.Composed:
    """The memory of row ``alias`` (a ``memory_embeddings`` row) has no context vector of ``model``."""
    return sql.SQL(
        "NOT EXISTS (SELECT 1 FROM memory_embeddings c WHERE c.memory_seq = {alias}.memory_seq"
        " AND c.model = {model} AND c.facet = 'context')"
    ).format(alias=sql.Identifier(alias), model=model)

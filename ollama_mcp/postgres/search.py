"""The PostgreSQL backend's ``Ranker``: every list is ranked inside the database, so an instance
holds no index of its own (nothing to load at start, nothing to go stale when another instance
writes) and its memory stays flat however large the store grows.

The lists are those of the SQLite ranker, fused by the same code (``ranking.rank_lists``):

- exact: memories holding the query's words in order (``phraseto_tsquery``), best first;
- keywords over content and over context: full-text search (GIN indexes over generated
  ``tsvector`` columns) finds the matches, BM25 from term statistics ranks them;
- meaning in context: nearest context vectors by the (model, dimension)'s HNSW index (a memory
  without a context vector yet is ranked by its own vector), filtered after the index scan; when
  the filters leave fewer than wanted, an exact scan of the filtered memories takes over;
- the content similarity of every candidate, read by key.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import psycopg
from psycopg import sql

from ollama_mcp.domain import SearchFilters, SearchHit
from ollama_mcp.errors import EmbeddingMismatchError
from ollama_mcp.postgres.rows import ALL_KINDS, filter_sql, stored_dimension
from ollama_mcp.postgres.store import PgStore
from ollama_mcp.ranking import MAX_QUERY_TERMS, WORD, SearchTuning, query_terms, rank_lists, to_hits

# HNSW candidates fetched per wanted memory before filtering (two facets, several chunks, and
# filters drop some), and pgvector's ef_search for that many: recall@10 figures in bench/README.md.
OVERFETCH = 4
# BM25's parameters, as SQLite's FTS5 uses them.
BM25_K1 = 1.2
BM25_B = 0.75
EXACT_STATISTICS_ROWS = 10_000
SIZE_EVERY = 64
MIN_EF_SEARCH = 100


class PgRanker:
    """Ranks memories of a ``PgStore`` inside PostgreSQL; see the module's docstring."""

    def __init__(self, store: PgStore, model: str, tuning: SearchTuning | None = None) -> None:
        self._store = store
        self.model = model
        self.tuning = tuning or SearchTuning()
        # Ranking inputs, not data (old values move scores a little, never a result set): the
        # store's size and average words per memory, read every SIZE_EVERY searches; and per word,
        # whether it is common and its document frequency, kept while the size moves less than a fifth.
        self._searches = 0
        self._memory_count = 0
        self._average_words: dict[str, float] = {}  # column -> average distinct words per memory
        self._cached_for_size = 0
        self._common: dict[str, bool] = {}  # query word -> in a large share of all memories?
        self._frequencies: dict[tuple[str, str], int] = {}  # (column, lexeme) -> memories holding it

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
        params: dict[str, Any] = {}
        where = filter_sql(filters, params)
        async with self._store.reading("search memories") as conn:
            await self._read_size(conn)
            terms = await self._informative_terms(conn, query_terms(query))
            exact = await self._exact(conn, query, where, params, top_k)
            keyword = await self._keywords(conn, "content_words", terms, where, params, depth)
            keyword_context = (
                await self._keywords(conn, "context_words", terms, where, params, depth)
                if tuning.keyword_context_weight else []
            )
            by_meaning: list[int] = []
            similarity: dict[int, float] = {}
            if query_vector is not None:
                dim = await stored_dimension(conn, self.model)
                if dim is not None:
                    if query_vector.size != dim:
                        raise EmbeddingMismatchError.model_changed(self.model, query_vector.size, dim)
                    vector = query_vector.astype(np.float32, copy=False)
                    by_meaning = await self._by_meaning(conn, vector, dim, where, params, depth, narrow=narrows(filters))
                    candidates = list(dict.fromkeys([*exact, *keyword, *keyword_context, *by_meaning]))
                    similarity = await self._similarities(conn, vector, dim, candidates)
        chosen = rank_lists(
            tuning, exact=exact, keyword=keyword, keyword_context=keyword_context, by_meaning=by_meaning,
            similarity=similarity, top_k=top_k, depth=depth, threshold=threshold,
        )
        return to_hits(chosen, await self._store.memories_by_seq(r.seq for r in chosen))

    async def _exact(
        self, conn: psycopg.AsyncConnection, query: str, where: list[str], params: dict[str, Any], top_k: int
    ) -> list[int]:
        """Memories whose content holds the query's words in this order (two words at least)."""
        words = [word.lower() for word in WORD.findall(query)][:MAX_QUERY_TERMS]
        if len(words) < 2:
            return []
        conditions = " AND ".join(["m.content_words @@ q", *where])
        cursor = await conn.execute(
            f"SELECT m.seq FROM memories m, phraseto_tsquery('english', %(phrase)s) q WHERE {conditions}"
            " AND numnode(q) > 0 ORDER BY ts_rank_cd(m.content_words, q) DESC, m.seq LIMIT %(limit)s",
            {**params, "phrase": " ".join(words), "limit": top_k},
        )
        return [int(row[0]) for row in await cursor.fetchall()]

    async def _keywords(
        self, conn: psycopg.AsyncConnection, column: str, terms: Sequence[str], where: list[str],
        params: dict[str, Any], depth: int,
    ) -> list[int]:
        """Memories matching any of ``terms`` in ``column``, best first by BM25.

        PostgreSQL finds the matches (GIN index); BM25 scores them from each match's term counts
        (its tsvector) and each word's document frequency (``_statistics``). ``ts_rank_cd`` alone
        has no inverse document frequency, and ranked LoCoMo 0.03 lower (bench/README.md).
        """
        if not terms:
            return []
        # Each word becomes its own plainto_tsquery, ORed: the user's text is never parsed as
        # tsquery syntax, so quotes, &, |, ! and : are just characters.
        any_term = " || ".join(f"plainto_tsquery('english', %(term{i})s)" for i in range(len(terms)))
        words = {f"term{i}": term for i, term in enumerate(terms)}
        cursor = await conn.execute(
            "SELECT DISTINCT lexeme FROM unnest(tsvector_to_array(to_tsvector('english', %(text)s))) AS lexeme",
            {"text": " ".join(terms)},
        )
        lexemes = [row[0] for row in await cursor.fetchall()]
        if not lexemes:
            return []
        count, average, frequencies = await self._statistics(conn, column, lexemes)
        idf = [math.log(1 + (count - df + 0.5) / (df + 0.5)) for df in frequencies]
        conditions = " AND ".join([f"m.{column} @@ query.q", *where])
        cursor = await conn.execute(
            f"WITH words(lexeme, idf) AS (SELECT * FROM unnest(%(lexemes)s::text[], %(idf)s::float8[]))"
            f" SELECT m.seq, sum(w.idf * u.tf * {BM25_K1 + 1}"
            f" / (u.tf + {BM25_K1} * (1 - {BM25_B} + {BM25_B} * length(m.{column}) / %(average)s))) AS score"
            f" FROM memories m CROSS JOIN (SELECT {any_term} AS q) query"
            f" CROSS JOIN LATERAL (SELECT v.lexeme, coalesce(array_length(v.positions, 1), 1) AS tf"
            f" FROM unnest(m.{column}) v) u JOIN words w ON w.lexeme = u.lexeme"
            f" WHERE {conditions} AND numnode(query.q) > 0"
            " GROUP BY m.seq ORDER BY score DESC, m.seq LIMIT %(limit)s",
            {**params, **words, "lexemes": lexemes, "idf": idf, "average": max(average, 1.0), "limit": depth},
        )
        return [int(row[0]) for row in await cursor.fetchall()]

    async def _read_size(self, conn: psycopg.AsyncConnection) -> None:
        """Every SIZE_EVERY searches: the memory count (exact below EXACT_STATISTICS_ROWS, else the
        planner's estimate) and the average distinct words per memory (from a sample of about
        EXACT_STATISTICS_ROWS rows), so that reading them never stalls a search on a full scan."""
        self._searches += 1
        if (self._searches - 1) % SIZE_EVERY:
            return
        cursor = await conn.execute(
            "SELECT CASE WHEN reltuples < %(exact)s THEN (SELECT count(*) FROM memories) ELSE reltuples::bigint END"
            " FROM pg_class WHERE oid = 'memories'::regclass",
            {"exact": EXACT_STATISTICS_ROWS},
        )
        row = await cursor.fetchone()
        self._memory_count = count = int(row[0]) if row else 0
        share = 100.0 if count <= EXACT_STATISTICS_ROWS else 100.0 * EXACT_STATISTICS_ROWS / count
        cursor = await conn.execute(
            "SELECT coalesce(avg(length(content_words)), 0), coalesce(avg(length(context_words)), 0)"
            " FROM memories TABLESAMPLE SYSTEM (%s)", (share,),
        )
        row = await cursor.fetchone()
        self._average_words = {"content_words": float(row[0]), "context_words": float(row[1])} if row else {}
        if not self._cached_for_size or abs(count - self._cached_for_size) > self._cached_for_size // 5:
            self._common.clear()  # the store grew or shrank by a fifth: shares have moved
            self._frequencies.clear()
            self._cached_for_size = max(count, 1)

    async def _statistics(
        self, conn: psycopg.AsyncConnection, column: str, lexemes: Sequence[str]
    ) -> tuple[int, float, list[int]]:
        """BM25's inputs for ``column``: the memory count, the average number of distinct words,
        and each lexeme's document frequency (cached, see ``__init__``)."""
        for lexeme in lexemes:
            if (column, lexeme) not in self._frequencies:
                cursor = await conn.execute(
                    f"SELECT count(*) FROM memories WHERE {column} @@ plainto_tsquery('simple', %s)", (lexeme,)
                )
                row = await cursor.fetchone()
                if len(self._frequencies) > 20_000:
                    self._frequencies.clear()
                self._frequencies[(column, lexeme)] = int(row[0]) if row else 0
        average = self._average_words.get(column, 0.0)
        return self._memory_count, average, [self._frequencies[(column, lexeme)] for lexeme in lexemes]

    async def _informative_terms(self, conn: psycopg.AsyncConnection, terms: list[str]) -> list[str]:
        """``terms`` without those found in a large share of all memories (if any rarer remain):
        they barely move the ranking, yet scoring every memory they match is what is slow."""
        if len(terms) < 2:
            return terms
        cap = max(self.tuning.common_min_docs, int(self._memory_count * self.tuning.common_share))
        for term in terms:
            if term not in self._common:
                cursor = await conn.execute(
                    "SELECT count(*) FROM (SELECT 1 FROM memories WHERE content_words @@ plainto_tsquery('english', %s)"
                    " LIMIT %s) AS found",
                    (term, cap + 1),
                )
                row = await cursor.fetchone()
                if len(self._common) > 10_000:
                    self._common.clear()
                self._common[term] = bool(row and row[0] > cap)
        return [t for t in terms if not self._common[t]] or terms

    async def _by_meaning(
        self, conn: psycopg.AsyncConnection, vector: np.ndarray, dim: int, where: list[str],
        params: dict[str, Any], depth: int, *, narrow: bool,
    ) -> list[int]:
        """The ``depth`` memories nearest in meaning (context vectors; own vectors where no context
        vector exists yet) that pass the filters."""
        covered = (
            "(e.facet = 'context' OR NOT EXISTS (SELECT 1 FROM memory_embeddings c WHERE c.memory_seq = e.memory_seq"
            " AND c.model = e.model AND c.facet = 'context'))"
        )
        filters = " AND ".join([covered, *where])
        limit = depth * OVERFETCH
        # The partial index is used only when its predicate appears literally in the query.
        index_scan = sql.SQL(
            "WITH near AS (SELECT e.memory_seq, e.facet, e.model, e.vector::vector({dim}) <=> %(q)s AS distance"
            " FROM memory_embeddings e WHERE e.model = {model} AND e.dim = {dim}"
            " ORDER BY e.vector::vector({dim}) <=> %(q)s LIMIT %(near)s)"
            " SELECT e.memory_seq, min(e.distance) AS d FROM near e JOIN memories m ON m.seq = e.memory_seq"
            " WHERE {filters} GROUP BY e.memory_seq ORDER BY d, e.memory_seq LIMIT %(limit)s"
        ).format(dim=sql.Literal(dim), model=sql.Literal(self.model), filters=sql.SQL(filters))
        values = {**params, "q": vector, "near": limit, "limit": depth}
        await conn.execute(sql.SQL("SET LOCAL hnsw.ef_search = {}").format(sql.Literal(max(MIN_EF_SEARCH, limit))))
        cursor = await conn.execute(index_scan, values)
        found = [int(row[0]) for row in await cursor.fetchall()]
        if len(found) >= depth or not narrow:
            return found
        # The filters kept too few of the index's neighbours: rank the filtered memories exactly
        # ("+ 0" keeps the planner off the index, whose scan stops at ef_search rows).
        exact_scan = sql.SQL(
            "SELECT e.memory_seq, min((e.vector::vector({dim}) <=> %(q)s) + 0) AS d FROM memories m"
            " JOIN memory_embeddings e ON e.memory_seq = m.seq AND e.model = {model} AND e.dim = {dim}"
            " WHERE {filters} GROUP BY e.memory_seq ORDER BY d, e.memory_seq LIMIT %(limit)s"
        ).format(dim=sql.Literal(dim), model=sql.Literal(self.model), filters=sql.SQL(filters))
        cursor = await conn.execute(exact_scan, values)
        return [int(row[0]) for row in await cursor.fetchall()]

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

    async def removed(self, seqs: Iterable[int], contexts: Sequence[int] = ()) -> None:
        """Nothing to do: deleted rows left the indexes with the delete."""

    def invalidate(self) -> None:
        """Nothing to do: no copy of the vectors is held here."""

    async def warm_up(self) -> None:
        """Open the pool's connections ahead of the first search (the pool already did)."""

    async def upkeep(self, min_new: int = 0) -> bool:
        """PostgreSQL's autovacuum keeps the GIN and HNSW indexes; nothing runs here."""
        return False


def narrows(filters: SearchFilters) -> bool:
    """Whether ``filters`` can exclude a large share of memories (beyond replaced versions)."""
    return bool(filters.conversation_id or filters.tags or filters.since or filters.until) or \
        set(filters.kinds) != ALL_KINDS

"""The PostgreSQL ranker's keyword lists: memories holding the query's words in order
(``exact``), and those holding any of its informative lexemes in a keyword column, ranked by BM25
(``keywords``), with the word statistics BM25 needs (the store's size, the average words per
memory, each lexeme's document frequency), read now and then and kept in this process: ranking
inputs, not data (an old value moves scores a little, never a result set)."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import psycopg

from ollama_mcp.storage.ranking import MAX_QUERY_TERMS, WORD, SearchTuning

# BM25's parameters, as SQLite's FTS5 uses them.
BM25_K1 = 1.2
BM25_B = 0.75
# Above this many memories, document frequencies of common words come from the planner's
# statistics (ANALYZE's most common lexemes of each tsvector column) rather than from counting.
EXACT_STATISTICS_ROWS = 10_000
# Memories a keyword list scores at most: those holding the query's rarest words, adding commoner
# words while their document frequencies stay under this. A word in more memories than this adds
# to the scores of the memories found but finds none itself; this bounds a search on a large
# store (the rarest words carry most of BM25's weight). Each costs a heap fetch: at 1M memories,
# 1,000 rows instead of 2,000 took 3 ms off a search (bench/README.md).
KEYWORD_ROWS = 1_000


class KeywordLists:
    """The keyword lists of one ranker, and the statistics they rank by."""

    def __init__(self) -> None:
        # The store's size, average words per memory and the planner's common lexemes (read by
        # ``read_size``); each lexeme's document frequency, kept while the size moves less than a fifth.
        self.memory_count = 0
        self._average_words: dict[str, float] = {}  # column -> average distinct words per memory
        self._cached_for_size = 0
        self._common_shares: dict[str, dict[str, float]] = {}  # column -> lexeme -> share (planner's)
        self.frequencies: dict[tuple[str, str], int] = {}  # (column, lexeme) -> memories holding it

    async def exact(
        self, conn: psycopg.AsyncConnection, query: str, where: list[str], params: dict[str, Any], top_k: int
    ) -> list[int]:
        """Memories whose content holds the query's words in this order (two words at least).

        Two lexemes at least, too (``numnode`` 3: a <-> b): the English configuration drops stop
        words, and "what did Sam do" would otherwise become the one word 'sam', which every
        memory naming Sam matches as an exact phrase (and which, on a large store, ranks each of
        them by ``ts_rank_cd``: 0.5-1.5 s at 1M memories for a common word).
        """
        words = [word.lower() for word in WORD.findall(query)][:MAX_QUERY_TERMS]
        if len(words) < 2:
            return []
        conditions = " AND ".join(["m.content_words @@ q", *where])
        cursor = await conn.execute(
            f"SELECT m.seq FROM memories m, phraseto_tsquery('english', %(phrase)s) q WHERE {conditions}"
            " AND numnode(q) >= 3 ORDER BY ts_rank_cd(m.content_words, q) DESC, m.seq LIMIT %(limit)s",
            {**params, "phrase": " ".join(words), "limit": top_k},
        )
        return [int(row[0]) for row in await cursor.fetchall()]

    async def keywords(
        self, conn: psycopg.AsyncConnection, column: str, words: QueryLexemes, where: list[str],
        params: dict[str, Any], depth: int,
    ) -> list[int]:
        """Memories holding any of the query's lexemes (``words``) in ``column``, best first by BM25.

        PostgreSQL finds the matches (GIN index); BM25 scores them from the lexemes each match
        holds (each counted once), its length and each word's document frequency. ``ts_rank_cd`` alone has no inverse
        document frequency, and ranked LoCoMo 0.03 lower (bench/README.md). The memories scored
        are bounded by KEYWORD_ROWS (see there).
        """
        lexemes, frequencies = words.lexemes, words.frequencies[column]
        if not lexemes:
            return []
        count = self.memory_count
        idf = [math.log(1 + (count - df + 0.5) / (df + 0.5)) for df in frequencies]
        finding: list[str] = []
        rows = 0
        for df, lexeme in sorted(zip(frequencies, lexemes, strict=True)):
            if finding and rows + df > KEYWORD_ROWS:
                break
            finding.append(lexeme)
            rows += df
        conditions = " AND ".join([f"m.{column} @@ %(match)s::tsquery", *where])
        # Each lexeme counts once per memory (a term frequency of 1): a test of the tsvector per
        # lexeme instead of unnesting every found memory's words, which was two thirds of the
        # statement at 1M memories (bench/README.md).
        held = " + ".join(f"(CASE WHEN f.words @@ %(lexeme{i})s::tsquery THEN %(idf{i})s ELSE 0 END)"
                          for i in range(len(lexemes)))
        cursor = await conn.execute(
            f"WITH found AS (SELECT m.seq, m.{column} AS words FROM memories m WHERE {conditions} LIMIT %(rows)s)"
            f" SELECT f.seq, ({held}) * {BM25_K1 + 1}"
            f" / (1 + {BM25_K1} * (1 - {BM25_B} + {BM25_B} * length(f.words) / %(average)s)) AS score"
            " FROM found f ORDER BY score DESC, f.seq LIMIT %(limit)s",
            {**params, **{f"lexeme{i}": tsquery_any([lexeme]) for i, lexeme in enumerate(lexemes)},
             **{f"idf{i}": value for i, value in enumerate(idf)},
             "match": tsquery_any(finding), "rows": KEYWORD_ROWS,
             "average": max(self._average_words.get(column, 0.0), 1.0), "limit": depth},
        )
        return [int(row[0]) for row in await cursor.fetchall()]

    async def read_size(self, conn: psycopg.AsyncConnection) -> None:
        """Read every few searches (``search.SIZE_EVERY``): the memory count (exact below
        EXACT_STATISTICS_ROWS, else the planner's estimate), the average distinct words per memory
        (from a sample of about EXACT_STATISTICS_ROWS rows) and, on large stores, the planner's most
        common lexemes, so that reading them never stalls a search on a full scan."""
        cursor = await conn.execute(
            "SELECT CASE WHEN reltuples < %(exact)s THEN (SELECT count(*) FROM memories) ELSE reltuples::bigint END"
            " FROM pg_class WHERE oid = 'memories'::regclass",
            {"exact": EXACT_STATISTICS_ROWS},
        )
        row = await cursor.fetchone()
        self.memory_count = count = int(row[0]) if row else 0
        share = 100.0 if count <= EXACT_STATISTICS_ROWS else 100.0 * EXACT_STATISTICS_ROWS / count
        cursor = await conn.execute(
            "SELECT coalesce(avg(length(content_words)), 0), coalesce(avg(length(context_words)), 0)"
            " FROM memories TABLESAMPLE SYSTEM (%s)", (share,),
        )
        row = await cursor.fetchone()
        self._average_words = {"content_words": float(row[0]), "context_words": float(row[1])} if row else {}
        self._common_shares = {}
        if count > EXACT_STATISTICS_ROWS:
            # ANALYZE's most common elements of a tsvector column, each with the share of rows
            # holding it (the array's last three entries are its minimum, maximum and null share).
            cursor = await conn.execute(
                "SELECT attname, most_common_elems::text::text[], most_common_elem_freqs FROM pg_stats"
                " WHERE schemaname = current_schema() AND tablename = 'memories'"
                " AND attname IN ('content_words', 'context_words') AND most_common_elems IS NOT NULL"
            )
            for column, elements, shares in await cursor.fetchall():
                self._common_shares[column] = dict(zip(elements, shares, strict=False))
        if not self._cached_for_size or abs(count - self._cached_for_size) > self._cached_for_size // 5:
            self.frequencies.clear()  # the store grew or shrank by a fifth: frequencies have moved
            self._cached_for_size = max(count, 1)

    async def _document_frequencies(
        self, conn: psycopg.AsyncConnection, columns: Sequence[str], lexemes: Sequence[str]
    ) -> dict[str, list[int]]:
        """How many memories hold each of ``lexemes`` in each of ``columns``: estimated from the
        planner's statistics for common words of a large store, counted for the others (cached,
        see ``__init__``). Every count is made by one statement: a query brings several new words,
        and a statement each was a round trip each (bench/README.md)."""
        # Read into a dict of this call's own: the cache is shared by concurrent searches, and one
        # of them may clear it (the store grew by a fifth) while this one waits on the counts.
        known: dict[tuple[str, str], int] = {}
        counting: dict[str, list[str]] = {}
        for column in columns:
            common = self._common_shares.get(column, {})
            for lexeme in lexemes:
                cached = self.frequencies.get((column, lexeme))
                if cached is not None:
                    known[column, lexeme] = cached
                elif lexeme in common:
                    known[column, lexeme] = round(common[lexeme] * self.memory_count)
                else:
                    counting.setdefault(column, []).append(lexeme)
        if counting:
            # One SELECT per column, each counting its lexemes by the column's GIN index (a
            # correlated count per row: a bitmap scan for that one lexeme).
            parts: list[str] = []
            values: dict[str, Any] = {}
            for i, (column, wanted) in enumerate(counting.items()):
                parts.append(
                    f"SELECT %(column{i})s::text, l.lexeme, (SELECT count(*) FROM memories"
                    f" WHERE {column} @@ l.query::tsquery) FROM unnest(%(lexemes{i})s::text[],"
                    f" %(queries{i})s::text[]) AS l(lexeme, query)"
                )
                values |= {f"column{i}": column, f"lexemes{i}": wanted,
                           f"queries{i}": [tsquery_any([lexeme]) for lexeme in wanted]}
            cursor = await conn.execute(" UNION ALL ".join(parts), values)
            for column, lexeme, found in await cursor.fetchall():
                known[column, lexeme] = int(found)
            if len(self.frequencies) > 20_000:
                self.frequencies.clear()
            self.frequencies.update({key: known[key] for key in
                                      ((column, lexeme) for column, wanted in counting.items() for lexeme in wanted)})
        return {column: [known[column, lexeme] for lexeme in lexemes] for column in columns}

    async def query_lexemes(
        self, conn: psycopg.AsyncConnection, terms: list[str], columns: Sequence[str], tuning: SearchTuning
    ) -> QueryLexemes:
        """The distinct lexemes of ``terms``, without those found in a large share of all memories
        (if any rarer remain): they barely move the ranking, yet scoring every memory they match
        is what is slow; with their document frequencies in each of ``columns``."""
        if not terms:
            return QueryLexemes([], {column: [] for column in columns})
        cursor = await conn.execute(
            "SELECT DISTINCT lexeme FROM unnest(tsvector_to_array(to_tsvector('english', %(text)s))) AS lexeme",
            {"text": " ".join(terms)},
        )
        lexemes = sorted(row[0] for row in await cursor.fetchall())
        frequencies = await self._document_frequencies(conn, columns, lexemes)  # (no statement if none)
        if len(lexemes) < 2:
            return QueryLexemes(lexemes, frequencies)
        cap = max(tuning.common_min_docs, int(self.memory_count * tuning.common_share))
        kept = [i for i, df in enumerate(frequencies["content_words"]) if df <= cap] or list(range(len(lexemes)))
        return QueryLexemes([lexemes[i] for i in kept],
                            {column: [frequencies[column][i] for i in kept] for column in columns})


@dataclass(frozen=True)
class QueryLexemes:
    """The query's informative lexemes, and the memories holding each, per keyword column."""

    lexemes: list[str]
    frequencies: dict[str, list[int]]  # column -> document frequency of each lexeme, in order


def tsquery_any(lexemes: Iterable[str]) -> str:
    """A tsquery matching any of ``lexemes`` taken literally (quoted: no operator, no stemming)."""
    return " | ".join("'" + lexeme.replace("\\", "\\\\").replace("'", "''") + "'" for lexeme in lexemes)

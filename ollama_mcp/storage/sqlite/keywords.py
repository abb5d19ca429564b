"""What search reads: keyword lists from FTS5, the in-memory keyword index's postings and change
log, filters, FTS5 upkeep."""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import AsyncGenerator, AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiosqlite
import anyio

from ollama_mcp.domain import Facet, SearchFilters
from ollama_mcp.storage.sqlite import db
from ollama_mcp.storage.sqlite.base import StoreBase, identity
from ollama_mcp.storage.sqlite.dialect import SQLITE
from ollama_mcp.storage.sqlite.rows import (
    FACET_CODES,
    KEPT_CHANGES,
    KEYWORD_TABLES,
    KIND_CODES,
    NEWEST_CHANGE,
    NEWEST_SEQ,
    TOKENIZER,
    filter_sql,
)

log = logging.getLogger(__name__)

# How far the memories had come (``KeywordState``): read in the transaction it describes.
_STATE = f"SELECT {NEWEST_SEQ}, {NEWEST_CHANGE}"
# A memory's keyword-index columns: its seq, its conversation's key and its kind (plus, formatted
# in, any other columns wanted).
_MEMORY_COLUMNS = "SELECT m.seq, m.conversation_key, m.kind{} FROM memories m"
# A connection's views of the FTS5 indexes' postings (``temp.<table>_instance``).
_POSTINGS_VIEWS = [
    f"CREATE VIRTUAL TABLE IF NOT EXISTS temp.{table}_instance USING fts5vocab(main, '{table}', 'instance')"
    for table in KEYWORD_TABLES.values()
]
# Tokens per part of ``keyword_snapshot``: a frequent token's postings are one long text.
_SNAPSHOT_TERMS = 256


@dataclass(frozen=True)
class SearchReads:
    """What a search reads from the database before ranking (``Store.search_reads``)."""

    keyword_lists: list[list[int]]  # per keyword search asked for: memory seqs, best first
    superseded: frozenset[int]  # memories replaced by a newer version (if asked for)
    data_version: int  # PRAGMA data_version at the time of reading
    keyword_state: KeywordState  # how far the keyword index's inputs had come at that time


@dataclass(frozen=True)
class KeywordState:
    """How far the memories had come: their highest seq and the newest ``memory_changes`` id.
    An in-memory keyword index that saw the same two numbers holds exactly these memories."""

    newest_seq: int
    newest_change: int


@dataclass(frozen=True)
class KeywordRows:
    """Memories for the keyword index: per memory (seq, conversation key, kind code), and the
    postings of each index (facet code) as FTS5 has tokenized them: (token, seqs), the seqs as
    space-separated text (as SQLite's group_concat hands them over: numpy parses it in one call),
    a seq once per occurrence, ascending. From one read transaction, as of ``state``."""

    state: KeywordState
    memories: list[tuple[int, int, int]]
    postings: dict[int, list[tuple[str, str]]]
    # Memories deleted or rewritten since the state the caller asked from (they may be among
    # ``memories`` again, rewritten); empty for a full snapshot.
    changed: list[int]


class KeywordStore(StoreBase):
    """What search reads: keyword lists from FTS5, the in-memory keyword index's postings and
    change log, filters, FTS5 upkeep."""

    async def search_reads(
        self, searches: Sequence[tuple[str, Facet, int]], filters: SearchFilters, *, superseded: bool
    ) -> SearchReads:
        """Everything a search reads before ranking, in one statement: for each (FTS5 expression,
        index, limit) the memory seqs best first by BM25; with ``superseded``, every replaced
        version; and the data version (for the vector index's freshness check).

        One statement because each trip to the database thread costs about 0.1 ms, a tenth of a
        search at 10k memories. The expressions must already be safe FTS5 syntax (see
        ``search.fts_any``).
        """
        where, params = filter_sql(filters)
        conditions = "".join(" AND " + w for w in where)
        parts = [
            "SELECT -2 AS list, data_version AS seq, 0 AS score FROM pragma_data_version",
            f"SELECT -3, {NEWEST_SEQ}, 0",
            f"SELECT -4, {NEWEST_CHANGE}, 0",
        ]
        args: list[Any] = []
        if superseded:
            parts.append("SELECT -1, seq, 0 FROM memories WHERE superseded_by IS NOT NULL")
        for i, (match, facet, limit) in enumerate(searches):
            table = KEYWORD_TABLES[FACET_CODES[facet]]
            # CROSS JOIN keeps the index as the outer loop (a plan driven by memories would run
            # the MATCH once per row); ORDER BY the index's own rank column (BM25), not an alias,
            # lets FTS5 sort inside the index, and the join then stops at LIMIT: half the time
            # at 100k memories (bench/README.md).
            parts.append(
                f"SELECT * FROM (SELECT {i} AS list, m.seq, {table}.rank AS score FROM {table}"
                f" CROSS JOIN memories m ON m.seq = {table}.rowid WHERE {table} MATCH ?{conditions}"
                f" ORDER BY {table}.rank LIMIT ?)"
            )
            args.extend([match, *params, limit])
        ranked: list[list[tuple[float, int]]] = [[] for _ in searches]
        replaced: set[int] = set()
        singles: dict[int, int] = {}
        for i, seq, score in await self._fetchall(" UNION ALL ".join(parts), args, "search the keyword index"):
            if i >= 0:
                ranked[i].append((float(score), int(seq)))
            elif i == -1:
                replaced.add(int(seq))
            else:
                singles[i] = int(seq)
        return SearchReads(
            [[seq for _, seq in sorted(found)] for found in ranked], frozenset(replaced), singles[-2],
            KeywordState(singles[-3], singles[-4]),
        )

    async def merge_keyword_indexes(self) -> None:
        """Merge each keyword index into one segment (FTS5 'optimize'), and prune the change log.

        Every write transaction adds a small segment, and FTS5's own merging leaves a dozen or so
        behind; each query then looks every word up in each of them. Merging takes about 50 ms at
        10k memories and 0.7 s at 100k, holding the write lock (other writers wait, as for any
        write), and makes keyword queries about 0.5 ms faster at 10k (bench/README.md).
        """
        async with self._transaction("merge the keyword indexes") as conn:
            for table in KEYWORD_TABLES.values():
                await conn.execute(f"INSERT INTO {table} ({table}) VALUES ('optimize')")
            # The change log the in-memory keyword indexes read: the newest KEPT_CHANGES rows
            # are plenty for any process that keeps searching; one further behind reloads.
            await conn.execute(
                "DELETE FROM memory_changes WHERE id <= (SELECT max(id) FROM memory_changes) - ?", (KEPT_CHANGES,)
            )

    async def keyword_rows(self, since: KeywordState) -> KeywordRows | None:
        """The memories new or changed since ``since`` for an in-memory keyword index; None when
        ``memory_changes`` was pruned past ``since`` (the caller must then load everything,
        ``keyword_snapshot``). They are tokenized by scratch FTS5 tables with the same tokenizer
        as the FTS5 indexes, so a catch-up gives exactly the tokens FTS5 matches.
        """
        await self._ensure_keyword_scratch()
        # A catch-up runs on every search after a store: one statement (one snapshot, one trip to
        # the database thread) reads the state, the change log since ``since``, and the memories
        # new or changed since. Two lookups by rowid for the memories: with "seq > ? OR seq IN
        # (...)" SQLite scans the whole table (23 ms at 100k memories).
        select = _MEMORY_COLUMNS.format(f", m.content, {SQLITE.context_of('m')}")
        rows = await self._fetchall(
            f"SELECT 0, s.*, NULL, NULL, NULL FROM ({_STATE}) s"
            " UNION ALL SELECT 1, id, memory_seq, NULL, NULL, NULL FROM memory_changes WHERE id > ?2"
            f" UNION ALL SELECT 2, * FROM ({select} WHERE m.seq > ?1)"
            f" UNION ALL SELECT 2, * FROM ({select} WHERE m.seq <= ?1"
            " AND m.seq IN (SELECT memory_seq FROM memory_changes WHERE id > ?2))",
            (since.newest_seq, since.newest_change), "read the keyword index",
        )
        state = KeywordState(int(rows[0][1]), int(rows[0][2]))
        went_back = state.newest_change < since.newest_change or (
            state.newest_change == since.newest_change and state.newest_seq < since.newest_seq
        )
        if went_back:
            return None  # the file was replaced (a restored backup): start over
        log = sorted((int(row[1]), int(row[2])) for row in rows if row[0] == 1)
        if state.newest_change > since.newest_change and (not log or log[0][0] != since.newest_change + 1):
            return None  # pruned past what the caller saw
        changed = sorted({seq for _, seq in log})
        found = [row[1:] for row in rows if row[0] == 2]
        memories = [(int(seq), int(conv), KIND_CODES[kind]) for seq, conv, kind, _, _ in found]
        texts = [(seq, content, context) for seq, _, _, content, context in found]
        return KeywordRows(state, memories, await self._tokenize_memories(texts), changed)

    @asynccontextmanager
    async def keyword_snapshot(self) -> AsyncIterator[KeywordSnapshot]:
        """Every memory for a new in-memory keyword index, as of one state: the memories (without
        postings), then each FTS5 index's postings, ``_SNAPSHOT_TERMS`` tokens a part, so that
        they are never all held as text at once (at 100k memories, 47 MB of it).

        Each index is read on a connection of its own, so that the two reads can run at once
        (FTS5 hands postings over in SQLite's code, which runs beside Python: 0.9 s of a 1.4 s
        load at 100k memories; bench/README.md), and the store's own connection stays free for
        searches and stores meanwhile. Both read transactions must see one state
        (``KeywordState``): when a write lands between their starts, the second index is read on
        the first's connection instead (its two statements then take turns). When the path no
        longer names the file the store has open (moved, replaced), everything is read on the
        store's own connection, as every read then is. The parts may be read only inside the
        ``async with``."""
        readers = await self._snapshot_readers()
        if not readers:
            await self._ensure_keyword_scratch()
            async with self._transaction("read the keyword index", write=False) as conn:
                yield await _snapshot([conn] * len(KEYWORD_TABLES), self.path, begin=False)
            return
        try:
            try:
                snapshot = await _snapshot(readers, self.path, begin=True)
            except sqlite3.Error as exc:
                raise db.translate(exc, "read the keyword index", self.path) from exc
            yield snapshot
        finally:
            with anyio.CancelScope(shield=True):
                for reader in readers:
                    await reader.close()  # (ends its read transaction)

    async def _snapshot_readers(self) -> list[aiosqlite.Connection]:
        """A connection per FTS5 index, each with the postings views; none when the path no longer
        names the store's file or it cannot be opened again."""
        readers: list[aiosqlite.Connection] = []
        if identity(self.path) != self._identity:
            return readers
        opened = False
        try:
            for _ in KEYWORD_TABLES:
                reader = await db.connect_reader(self.path)
                if reader is None:
                    return []
                readers.append(reader)
                for statement in _POSTINGS_VIEWS:
                    await reader.execute(statement)
            opened = True
            return readers
        except sqlite3.Error as exc:
            raise db.translate(exc, "read the keyword index", self.path) from exc
        finally:
            if not opened:
                with anyio.CancelScope(shield=True):
                    for reader in readers:
                        await reader.close()

    async def tokenize(self, words: Sequence[str]) -> list[list[str]]:
        """Each of ``words`` as the keyword index's tokenizer splits and stems it."""
        await self._ensure_keyword_scratch()
        tokens: list[list[str]] = [[] for _ in words]
        found = await self._tokenize_memories([(i, word, "") for i, word in enumerate(words)])
        for token, docs in found.get(FACET_CODES["content"], []):
            for doc in docs.split():
                tokens[int(doc)].append(token)
        return tokens

    async def _tokenize_memories(self, texts: Sequence[tuple[int, str, str]]) -> dict[int, list[tuple[str, str]]]:
        """(seq, content, context) tokenized like ``keyword_rows`` postings, in scratch tables."""
        if not texts:
            return {}
        async with self._lock:
            try:
                await self._conn.executemany(
                    "INSERT INTO temp.keyword_scratch (rowid, content, context) VALUES (?, ?, ?)", texts
                )
                # Grouped per (column, term), each group's docs ascending: a sort of the few
                # hundred rows of the memories just inserted.
                cursor = await self._conn.execute(
                    "SELECT col, term, group_concat(doc, ' ') FROM (SELECT col, term, doc FROM"
                    " temp.keyword_scratch_instance ORDER BY col, term, doc) GROUP BY col, term"
                )
                rows = await cursor.fetchall()
            except sqlite3.Error as exc:
                raise db.translate(exc, "tokenize memories", self.path) from exc
            finally:
                await self._conn.execute("INSERT INTO temp.keyword_scratch (keyword_scratch) VALUES ('delete-all')")
        postings: dict[int, list[tuple[str, str]]] = {}
        for column, term, docs in rows:
            postings.setdefault(FACET_CODES[column], []).append((str(term), str(docs)))
        return postings

    async def _ensure_keyword_scratch(self) -> None:
        """This connection's views of the FTS5 indexes' postings, and its scratch tokenizer."""
        if self._keyword_scratch:
            return
        statements = [
            *_POSTINGS_VIEWS,
            "CREATE VIRTUAL TABLE IF NOT EXISTS temp.keyword_scratch USING fts5"
            f" (content, context, content = '', tokenize = '{TOKENIZER}')",
            "CREATE VIRTUAL TABLE IF NOT EXISTS temp.keyword_scratch_instance"
            " USING fts5vocab(temp, 'keyword_scratch', 'instance')",
        ]
        async with self._lock:
            try:
                for statement in statements:
                    await self._conn.execute(statement)
            except sqlite3.Error as exc:
                raise db.translate(exc, "prepare the keyword index", self.path) from exc
        self._keyword_scratch = True

    async def document_counts(self, terms: Sequence[str], cap: int) -> dict[str, int]:
        """How many memories contain each word (counting stops past ``cap``), in one query."""
        parts = " UNION ALL ".join(
            "SELECT ?, (SELECT count(*) FROM (SELECT 1 FROM memories_fts WHERE memories_fts MATCH ? LIMIT ?))"
            for _ in terms
        )
        args = [x for term in terms for x in (term, '"' + term.replace('"', '""') + '"', cap + 1)]
        rows = await self._fetchall(parts, args, "count keyword matches")
        return {row[0]: int(row[1]) for row in rows}

    async def approximate_memory_count(self) -> int:
        """The highest memory seq: the count of memories ever stored, read in constant time."""
        rows = await self._fetchall("SELECT max(seq) FROM memories", (), "count memories")
        return int(rows[0][0] or 0)

    async def filtered_seqs(self, filters: SearchFilters) -> list[int]:
        """Every memory seq that passes ``filters`` (used to mask the vector index)."""
        where, params = filter_sql(filters)
        clause = f"WHERE {' AND '.join(where)}" if where else ""
        rows = await self._fetchall(f"SELECT m.seq FROM memories m {clause}", params, "filter memories")
        return [int(row[0]) for row in rows]


class KeywordSnapshot:
    """``KeywordStore.keyword_snapshot``: the memories, then per FTS5 index its postings' parts;
    the postings of different indexes may be read at once."""

    def __init__(self, memories: KeywordRows, postings: list[AsyncGenerator[KeywordRows, None]]) -> None:
        self.memories = memories  # the state, and every memory (seq, conversation key, kind)
        self.postings = postings  # one iterator of parts per FTS5 index (facet)


async def _snapshot(readers: list[aiosqlite.Connection], path: Path, *, begin: bool) -> KeywordSnapshot:
    """Read the memories on ``readers[0]`` (one per FTS5 index, or one connection given for all)
    after beginning each one's read transaction (``begin``; else they are in one), the first's
    first. A reader that does not see the first's state (a write landed between) is not used:
    its index is read on the first's connection too."""
    first, states = readers[0], []
    for reader in dict.fromkeys(readers):
        if begin:
            await reader.execute("BEGIN")
        states.append(await _state(reader))
    if any(state != states[0] for state in states):
        log.debug("a write landed while the keyword index's readers began: one reads both indexes")
        readers = [first] * len(readers)
    cursor = await first.execute(_MEMORY_COLUMNS.format("") + " ORDER BY m.seq")
    memories = KeywordRows(
        states[0], [(int(seq), int(conv), KIND_CODES[kind]) for seq, conv, kind in await cursor.fetchall()], {}, []
    )
    return KeywordSnapshot(memories, [
        _postings(reader, facet, table, states[0], path)
        for reader, (facet, table) in zip(readers, KEYWORD_TABLES.items(), strict=True)
    ])


async def _state(conn: aiosqlite.Connection) -> KeywordState:
    cursor = await conn.execute(_STATE)
    return KeywordState(*(await cursor.fetchone() or (0, 0)))


async def _postings(
    conn: aiosqlite.Connection, facet: int, table: str, state: KeywordState, path: Path
) -> AsyncGenerator[KeywordRows, None]:
    """One FTS5 index's postings, a part at a time, read in ``conn``'s open transaction (which
    has the index's ``_instance`` view)."""
    try:
        cursor = await conn.execute(f"SELECT term, group_concat(doc, ' ') FROM temp.{table}_instance GROUP BY term")
        try:
            while batch := await cursor.fetchmany(_SNAPSHOT_TERMS):
                yield KeywordRows(state, [], {facet: [(str(term), str(docs)) for term, docs in batch]}, [])
        finally:
            # A statement left unfinished (the load stopped midway) would keep its read
            # transaction, and so the WAL, after its connection is closed, until collected.
            with anyio.CancelScope(shield=True):
                await cursor.close()
    except sqlite3.Error as exc:
        raise db.translate(exc, "read the keyword index", path) from exc

"""All SQL: conversations, memories, tags, vectors and the keyword index, returned as domain values.

Every write is one ``BEGIN IMMEDIATE`` transaction, so a row, its tags, its keyword entry (kept
by triggers) and its vectors appear or vanish together, and several processes can share the
file. One connection serves the whole process; a lock keeps concurrent tasks from interleaving
statements inside each other's transactions.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiosqlite
import anyio

from ollama_mcp import db
from ollama_mcp.domain import (
    Conversation,
    ConversationStatus,
    EmbeddingRow,
    Facet,
    Memory,
    MemoryKind,
    SearchFilters,
)
from ollama_mcp.errors import (
    ConversationClosedError,
    ConversationNotFoundError,
    MemoryNotFoundError,
    StorageError,
)

KIND_CODES: dict[str, int] = {"note": 0, "message": 1, "summary": 2}
FACET_CODES: dict[str, int] = {"content": 0, "context": 1}
# A memory's context is its content preceded by this many earlier memories of its conversation
# (each clipped to its last CONTEXT_NEIGHBOUR_CHARS). Measured on LoCoMo: bench/README.md.
CONTEXT_NEIGHBOURS = 2
CONTEXT_NEIGHBOUR_CHARS = 1000
_VECTOR_BATCH_ROWS = 4096

# "This memory has no vector of model ?1 for the facet": pending embeddings, everywhere.
_MISSING_VECTOR = (
    "NOT EXISTS (SELECT 1 FROM memory_embeddings e WHERE e.memory_seq = m.seq AND e.model = ?1 AND e.facet = '{}')"
)
_CONVERSATION_COLUMNS = "c.rowid, c.id, c.name, c.status, c.anonymous, c.created_at, c.ended_at, c.metadata"
_MEMORY_COLUMNS = "m.seq, m.id, m.conversation_id, m.kind, m.content, m.tags, m.metadata, m.created_at, m.context"


@dataclass(frozen=True)
class VectorBatch:
    """Rows of ``memory_embeddings`` for one model, as the vector index needs them."""

    ids: list[int]
    memory_seqs: list[int]
    conversation_keys: list[int]
    kinds: list[int]
    facets: list[int]
    dims: list[int]
    vectors: list[bytes]


class Store:
    """The only owner of SQL. Open with ``await Store.open(path)``; close with ``aclose``."""

    def __init__(self, conn: aiosqlite.Connection, path: Path) -> None:
        self._conn = conn
        self.path = path
        self._lock = anyio.Lock()

    @classmethod
    async def open(cls, path: Path) -> Store:
        return cls(await db.connect(path), path)

    async def aclose(self) -> None:
        await self._conn.close()

    # -- plumbing ---------------------------------------------------------------------------

    @asynccontextmanager
    async def _transaction(self, action: str, *, write: bool = True) -> AsyncIterator[aiosqlite.Connection]:
        async with self._lock:
            try:
                await self._conn.execute("BEGIN IMMEDIATE" if write else "BEGIN")
                try:
                    yield self._conn
                except BaseException:
                    await self._conn.execute("ROLLBACK")
                    raise
                await self._conn.execute("COMMIT")
            except sqlite3.Error as exc:
                if self._conn.in_transaction:
                    await self._conn.execute("ROLLBACK")
                raise db.translate(exc, action) from exc

    async def _fetchall(self, sql: str, params: Sequence[Any], action: str) -> list[sqlite3.Row | tuple]:
        try:
            return list(await self._conn.execute_fetchall(sql, params))
        except sqlite3.Error as exc:
            raise db.translate(exc, action) from exc

    async def data_version(self) -> int:
        """Changes whenever another connection commits: lets caches notice other processes."""
        rows = await self._fetchall("PRAGMA data_version", (), "read the data version")
        return int(rows[0][0])

    # -- conversations ------------------------------------------------------------------------

    async def create_conversation(
        self, conversation_id: str, name: str | None, metadata: dict[str, Any], anonymous: bool, created_at: str
    ) -> Conversation:
        async with self._transaction("create the conversation") as conn:
            cursor = await conn.execute(
                "INSERT INTO conversations (id, name, anonymous, metadata, created_at) VALUES (?, ?, ?, ?, ?)",
                (conversation_id, name, int(anonymous), _dump(metadata), created_at),
            )
            key = cursor.lastrowid
        return Conversation(
            key=int(key or 0), id=conversation_id, name=name, status="active", anonymous=anonymous,
            created_at=created_at, metadata=metadata,
        )

    async def get_conversation(self, conversation_id: str, *, count_memories: bool = False) -> Conversation:
        """The conversation (``memory_count`` is filled only when asked: it costs a count)."""
        count = (
            "(SELECT count(*) FROM memories m WHERE m.conversation_id = c.id AND m.kind = 'note')"
            if count_memories else "0"
        )
        rows = await self._fetchall(
            f"SELECT {_CONVERSATION_COLUMNS}, {count} FROM conversations c WHERE c.id = ?",
            (conversation_id,),
            "read the conversation",
        )
        if not rows:
            raise ConversationNotFoundError(conversation_id)
        return _conversation(rows[0])

    async def list_conversations(self, status: ConversationStatus | None, limit: int) -> list[Conversation]:
        where, params = ("WHERE c.status = ?", [status]) if status else ("", [])
        rows = await self._fetchall(
            f"SELECT {_CONVERSATION_COLUMNS}, (SELECT count(*) FROM memories m"
            " WHERE m.conversation_id = c.id AND m.kind = 'note')"
            f" FROM conversations c {where} ORDER BY c.created_at DESC, c.rowid DESC LIMIT ?",
            [*params, limit],
            "list conversations",
        )
        return [_conversation(row) for row in rows]

    async def end_conversation(
        self, conversation_id: str, ended_at: str, summary: str | None, summary_memory: Memory | None
    ) -> tuple[Conversation, int]:
        """Mark the conversation completed (storing the summary as a searchable memory too)."""
        async with self._transaction("end the conversation") as conn:
            status = await _status(conn, conversation_id)
            if status != "active":
                raise ConversationClosedError(conversation_id)
            if summary_memory is not None:
                await _insert_memory_row(conn, summary_memory, role=None)
            await conn.execute(
                "UPDATE conversations SET status = 'completed', ended_at = ?, summary = ? WHERE id = ?",
                (ended_at, summary, conversation_id),
            )
            count = await (await conn.execute(
                "SELECT count(*) FROM memories WHERE conversation_id = ? AND kind = 'note'", (conversation_id,)
            )).fetchone()
        return await self.get_conversation(conversation_id), int(count[0] if count else 0)

    # -- memories -----------------------------------------------------------------------------

    async def insert_memory(self, memory: Memory, embeddings: Sequence[EmbeddingRow] = ()) -> tuple[Memory, bool]:
        """Insert a memory into an active conversation; returns (memory, was_duplicate).

        A note whose content already exists in the conversation is not inserted again: the
        existing memory is returned, so a client retrying a slow call never duplicates.
        """
        async with self._transaction("store the memory") as conn:
            status = await _status(conn, memory.conversation_id)
            if status != "active":
                raise ConversationClosedError(memory.conversation_id)
            seq = await _insert_memory_row(conn, memory, role=None)
            if seq is None:
                existing = await (await conn.execute(
                    f"SELECT {_MEMORY_COLUMNS} FROM memories m"
                    " WHERE m.conversation_id = ? AND m.kind = 'note' AND m.content_hash = ?",
                    (memory.conversation_id, content_hash(memory.content)),
                )).fetchone()
                assert existing is not None, "the unique index reported a conflict with no row"
                return _memory(existing), True
            stored = await _memory_by_seq(conn, seq)
            await _insert_embeddings(conn, [EmbeddingRow(**{**row.__dict__, "memory_seq": seq}) for row in embeddings])
        return stored, False

    async def insert_memories(self, memories: Sequence[Memory], vectors: Sequence[EmbeddingRow | None]) -> int:
        """Bulk insert (imports): one transaction, a few statements for the whole batch.

        Same rules as ``insert_memory`` (notes already present are skipped; each memory's context
        is its content after the two memories before it), without a round trip per row.
        ``vectors[i]`` is an optional content vector for ``memories[i]``. Returns how many were new.
        """
        if not memories:
            return 0
        async with self._transaction("import memories") as conn:
            rows = []
            seen: dict[str, set[str]] = {}
            recent: dict[str, list[str]] = {}
            for memory in memories:
                conv = memory.conversation_id
                if conv not in recent:
                    await _status(conn, conv)  # raises if the conversation does not exist
                    earlier = await (await conn.execute(
                        "SELECT content FROM memories WHERE conversation_id = ? AND kind != 'summary'"
                        " ORDER BY seq DESC LIMIT ?", (conv, CONTEXT_NEIGHBOURS),
                    )).fetchall()
                    recent[conv] = [row[0] for row in reversed(earlier)]
                    hashes = [content_hash(m.content) for m in memories if m.conversation_id == conv]
                    existing = await (await conn.execute(
                        "SELECT content_hash FROM memories WHERE conversation_id = ? AND kind = 'note'"
                        " AND content_hash IN (SELECT value FROM json_each(?))", (conv, json.dumps(hashes)),
                    )).fetchall()
                    seen[conv] = {row[0] for row in existing}
                digest = content_hash(memory.content)
                if memory.kind == "note" and digest in seen[conv]:
                    continue
                seen[conv].add(digest)
                context = memory.content
                if memory.kind != "summary":
                    context = compose_context(recent[conv], memory.content)
                    recent[conv] = [*recent[conv], memory.content][-CONTEXT_NEIGHBOURS:]
                rows.append((memory, digest, context))
            await conn.executemany(
                "INSERT INTO memories (id, conversation_id, kind, content, content_hash, context, tags, metadata,"
                " created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [(m.id, m.conversation_id, m.kind, m.content, digest, context, json.dumps(list(m.tags)),
                  _dump(m.metadata), m.created_at) for m, digest, context in rows],
            )
            seqs = dict(await (await conn.execute(
                "SELECT id, seq FROM memories WHERE id IN (SELECT value FROM json_each(?))",
                (json.dumps([m.id for m, _, _ in rows]),),
            )).fetchall())
            await conn.executemany(
                "INSERT OR IGNORE INTO memory_tags (memory_seq, tag) VALUES (?, ?)",
                [(seqs[m.id], tag) for m, _, _ in rows for tag in m.tags],
            )
            vector_of = {m.id: v for m, v in zip(memories, vectors, strict=True) if v is not None}
            await _insert_embeddings(conn, [
                EmbeddingRow(**{**vector_of[m.id].__dict__, "memory_seq": seqs[m.id]})
                for m, _, _ in rows if m.id in vector_of
            ])
        return len(rows)

    async def memories_by_seq(self, seqs: Iterable[int]) -> dict[int, Memory]:
        wanted = list(dict.fromkeys(seqs))
        if not wanted:
            return {}
        rows = await self._fetchall(
            f"SELECT {_MEMORY_COLUMNS} FROM memories m WHERE m.seq IN (SELECT value FROM json_each(?))",
            (json.dumps(wanted),),
            "read memories",
        )
        return {row[0]: _memory(row) for row in rows}

    async def delete_memory(self, memory_id: str) -> tuple[Memory, list[int]]:
        """Remove a memory with its tags, vectors (cascade) and keyword entries (triggers), at once.

        The memories that had it in their context get a context without it (and lose their
        context vectors, which the backfill recomputes): deleted text must not stay findable.
        Returns the deleted memory and the seqs whose context changed.
        """
        async with self._transaction("delete the memory") as conn:
            row = await (await conn.execute(
                f"SELECT {_MEMORY_COLUMNS} FROM memories m WHERE m.id = ?", (memory_id,)
            )).fetchone()
            if row is None:
                raise MemoryNotFoundError(memory_id)
            deleted = _memory(row)
            await conn.execute("DELETE FROM memories WHERE seq = ?", (deleted.seq,))
            followers = await (await conn.execute(
                "SELECT seq, content FROM memories WHERE conversation_id = ? AND kind != 'summary' AND seq > ?"
                " ORDER BY seq LIMIT ?",
                (deleted.conversation_id, deleted.seq, CONTEXT_NEIGHBOURS),
            )).fetchall() if deleted.kind != "summary" else []
            for seq, content in followers:
                context = await _context(conn, deleted.conversation_id, content, before_seq=seq)
                await conn.execute("UPDATE memories SET context = ? WHERE seq = ?", (context, seq))
                await conn.execute("DELETE FROM memory_embeddings WHERE memory_seq = ? AND facet = 'context'", (seq,))
        return deleted, [seq for seq, _ in followers]

    # -- search ---------------------------------------------------------------------------------

    async def keyword_search(
        self, searches: Sequence[tuple[str, Facet, int]], filters: SearchFilters
    ) -> list[list[int]]:
        """For each (FTS5 expression, index, limit): memory seqs best first by BM25, in one query.

        The expressions must already be safe FTS5 syntax (see ``search.fts_query``).
        """
        where, params = _filter_sql(filters)
        conditions = "".join(" AND " + w for w in where)
        parts, args = [], []
        for i, (match, facet, limit) in enumerate(searches):
            table = "memories_fts" if facet == "content" else "memory_contexts_fts"
            parts.append(
                f"SELECT * FROM (SELECT {i} AS list, m.seq, bm25({table}) AS rank FROM {table}"
                f" JOIN memories m ON m.seq = {table}.rowid WHERE {table} MATCH ?{conditions}"
                " ORDER BY rank LIMIT ?)"
            )
            args.extend([match, *params, limit])
        ranked: list[list[tuple[float, int]]] = [[] for _ in searches]
        if parts:
            for i, seq, rank in await self._fetchall(" UNION ALL ".join(parts), args, "search the keyword index"):
                ranked[i].append((float(rank), int(seq)))
        return [[seq for _, seq in sorted(found)] for found in ranked]

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
        where, params = _filter_sql(filters)
        clause = f"WHERE {' AND '.join(where)}" if where else ""
        rows = await self._fetchall(f"SELECT m.seq FROM memories m {clause}", params, "filter memories")
        return [int(row[0]) for row in rows]

    # -- vectors --------------------------------------------------------------------------------

    async def insert_embeddings(self, rows: Sequence[EmbeddingRow]) -> int:
        """Store vectors; rows of memories deleted meanwhile, or stored already, are skipped."""
        if not rows:
            return 0
        async with self._transaction("store embeddings") as conn:
            return await _insert_embeddings(conn, rows)

    async def model_dimension(self, model: str, conversation_id: str | None = None) -> int | None:
        """The dimension the stored vectors of ``model`` use (in one conversation, if given)."""
        if conversation_id is None:
            sql, params = "SELECT dim FROM memory_embeddings WHERE model = ? LIMIT 1", [model]
        else:
            sql = (
                "SELECT e.dim FROM memory_embeddings e JOIN memories m ON m.seq = e.memory_seq"
                " WHERE e.model = ? AND m.conversation_id = ? LIMIT 1"
            )
            params = [model, conversation_id]
        rows = await self._fetchall(sql, params, "read the embedding dimension")
        return int(rows[0][0]) if rows else None

    async def pending_memories(
        self, model: str, limit: int, after_seq: int = 0
    ) -> list[tuple[Memory, tuple[Facet, ...]]]:
        """Memories after ``after_seq`` lacking a vector of ``model`` for some facet, oldest first,
        with those facets. (A cursor: a pass over a large store stays linear.)"""
        content, context = _MISSING_VECTOR.format("content"), _MISSING_VECTOR.format("context")
        rows = await self._fetchall(
            f"SELECT {_MEMORY_COLUMNS}, {content}, {context} FROM memories m"
            f" WHERE m.seq > ?3 AND ({content} OR {context}) ORDER BY m.seq LIMIT ?2",
            (model, limit, after_seq),
            "find memories awaiting embeddings",
        )
        out: list[tuple[Memory, tuple[Facet, ...]]] = []
        for row in rows:
            facets: tuple[Facet, ...] = (("content",) if row[9] else ()) + (("context",) if row[10] else ())
            out.append((_memory(row), facets))
        return out

    async def memory_is_pending(self, memory_seq: int, model: str) -> bool:
        rows = await self._fetchall(
            f"SELECT {_MISSING_VECTOR.format('content')} FROM memories m WHERE m.seq = ?2",
            (model, memory_seq),
            "read the embedding state",
        )
        return bool(rows and rows[0][0])

    async def vector_snapshot(self, model: str, after_id: int, sink: Callable[[VectorBatch], None]) -> int:
        """Stream vectors of ``model`` with id > ``after_id`` to ``sink``; return the model's row count.

        Everything comes from one read transaction, so comparing the returned count with what the
        caller holds afterwards tells whether rows were deleted meanwhile.
        """
        async with self._transaction("load vectors", write=False) as conn:
            counts = await (await conn.execute(
                "SELECT count(*) FROM memory_embeddings WHERE model = ?", (model,)
            )).fetchone()
            total = int(counts[0]) if counts else 0
            cursor = await conn.execute(
                "SELECT e.id, e.memory_seq, c.rowid, m.kind, e.facet, e.dim, e.vector FROM memory_embeddings e"
                " JOIN memories m ON m.seq = e.memory_seq JOIN conversations c ON c.id = m.conversation_id"
                " WHERE e.model = ? AND e.id > ? ORDER BY e.id",
                (model, after_id),
            )
            while rows := await cursor.fetchmany(_VECTOR_BATCH_ROWS):
                sink(VectorBatch(
                    ids=[r[0] for r in rows], memory_seqs=[r[1] for r in rows],
                    conversation_keys=[r[2] for r in rows], kinds=[KIND_CODES[r[3]] for r in rows],
                    facets=[FACET_CODES[r[4]] for r in rows], dims=[r[5] for r in rows], vectors=[r[6] for r in rows],
                ))
        return total


@dataclass(frozen=True)
class StoreSummary:
    """What a database holds, for the CLI's read-only reports."""

    schema_version: int
    conversations: dict[str, int]  # by status
    memories: dict[str, int]  # by kind
    vectors: list[tuple[str, int, int]]  # (model, dimension, memories with a content vector)
    pending: int  # memories without a content vector of the model asked about


def summarize(path: Path, model: str) -> StoreSummary:
    """Read ``path`` read-only (no migration, no write, no lock taken) for doctor and stats."""
    try:
        with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as conn:
            conn.execute(f"PRAGMA busy_timeout = {db.BUSY_TIMEOUT_MS}")
            version = conn.execute("SELECT max(version) FROM schema_migrations").fetchone()[0] or 0
            return StoreSummary(
                schema_version=int(version),
                conversations=dict(conn.execute("SELECT status, count(*) FROM conversations GROUP BY status")),
                memories=dict(conn.execute("SELECT kind, count(*) FROM memories GROUP BY kind")),
                vectors=conn.execute(
                    "SELECT model, dim, count(DISTINCT memory_seq) FROM memory_embeddings WHERE facet = 'content'"
                    " GROUP BY model, dim ORDER BY model"
                ).fetchall(),
                pending=conn.execute(
                    f"SELECT count(*) FROM memories m WHERE {_MISSING_VECTOR.format('content')}", (model,)
                ).fetchone()[0],
            )
    except sqlite3.Error as exc:
        raise StorageError(
            f"{path} could not be read as an ollama-mcp database ({exc}); run `ollama-mcp doctor`."
        ) from exc


# -- row helpers (module level so transactions can share them) -----------------------------------


async def _status(conn: aiosqlite.Connection, conversation_id: str) -> str:
    row = await (await conn.execute("SELECT status FROM conversations WHERE id = ?", (conversation_id,))).fetchone()
    if row is None:
        raise ConversationNotFoundError(conversation_id)
    return str(row[0])


async def _insert_memory_row(conn: aiosqlite.Connection, memory: Memory, role: str | None) -> int | None:
    """Insert the row (with its context) and its tags; None when an identical note already exists."""
    context = memory.content
    if memory.kind != "summary":
        context = await _context(conn, memory.conversation_id, memory.content, before_seq=None)
    cursor = await conn.execute(
        "INSERT INTO memories (id, conversation_id, kind, role, content, content_hash, context, tags, metadata,"
        " created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
        " ON CONFLICT (conversation_id, content_hash) WHERE kind = 'note' DO NOTHING",
        (memory.id, memory.conversation_id, memory.kind, role, memory.content, content_hash(memory.content),
         context, json.dumps(list(memory.tags)), _dump(memory.metadata), memory.created_at),
    )
    if cursor.rowcount == 0:
        return None
    seq = int(cursor.lastrowid or 0)
    if memory.tags:
        await conn.executemany(
            "INSERT OR IGNORE INTO memory_tags (memory_seq, tag) VALUES (?, ?)", [(seq, tag) for tag in memory.tags]
        )
    return seq


async def _context(conn: aiosqlite.Connection, conversation_id: str, content: str, before_seq: int | None) -> str:
    """``content`` preceded by the (clipped) memories just before it in its conversation."""
    rows = await (await conn.execute(
        "SELECT content FROM memories WHERE conversation_id = ? AND kind != 'summary' AND seq < ?"
        " ORDER BY seq DESC LIMIT ?",
        (conversation_id, before_seq if before_seq is not None else 2**62, CONTEXT_NEIGHBOURS),
    )).fetchall()
    return compose_context([row[0] for row in reversed(rows)], content)


def compose_context(earlier: Sequence[str], content: str) -> str:
    """A memory's context: the last CONTEXT_NEIGHBOURS earlier texts, each clipped to its end, then the memory."""
    clipped = [text[-CONTEXT_NEIGHBOUR_CHARS:] for text in earlier[-CONTEXT_NEIGHBOURS:]]
    return "\n".join([*clipped, content])


async def _memory_by_seq(conn: aiosqlite.Connection, seq: int) -> Memory:
    row = await (await conn.execute(f"SELECT {_MEMORY_COLUMNS} FROM memories m WHERE m.seq = ?", (seq,))).fetchone()
    assert row is not None, "a row read inside its own insert transaction"
    return _memory(row)


async def _insert_embeddings(conn: aiosqlite.Connection, rows: Sequence[EmbeddingRow]) -> int:
    before = conn.total_changes
    await conn.executemany(
        "INSERT OR IGNORE INTO memory_embeddings (memory_seq, model, facet, chunk_index, dim, vector, created_at)"
        " SELECT ?, ?, ?, ?, ?, ?, strftime('%Y-%m-%dT%H:%M:%fZ', 'now')"
        " WHERE EXISTS (SELECT 1 FROM memories WHERE seq = ?)",
        [(r.memory_seq, r.model, r.facet, r.chunk_index, r.dim, r.vector, r.memory_seq) for r in rows],
    )
    return conn.total_changes - before


def _filter_sql(filters: SearchFilters) -> tuple[list[str], list[Any]]:
    where: list[str] = []
    params: list[Any] = []
    if filters.conversation_id is not None:
        where.append("m.conversation_id = ?")
        params.append(filters.conversation_id)
    if filters.kinds and set(filters.kinds) != set(KIND_CODES):
        where.append(f"m.kind IN ({', '.join('?' for _ in filters.kinds)})")
        params.extend(filters.kinds)
    if filters.since is not None:
        where.append("m.created_at >= ?")
        params.append(filters.since)
    if filters.until is not None:
        where.append("m.created_at <= ?")
        params.append(filters.until)
    if filters.tags:
        where.append(
            "m.seq IN (SELECT memory_seq FROM memory_tags WHERE tag IN (SELECT value FROM json_each(?))"
            " GROUP BY memory_seq HAVING count(*) = ?)"
        )
        params.extend([json.dumps(list(filters.tags)), len(filters.tags)])
    return where, params


def content_hash(content: str) -> str:
    """sha256 of the text: how a retried store finds the note it already stored."""
    return hashlib.sha256(content.encode("utf-8")).hexdigest()


def _dump(value: dict[str, Any]) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _conversation(row: Sequence[Any]) -> Conversation:
    return Conversation(
        key=int(row[0]), id=row[1], name=row[2], status=row[3], anonymous=bool(row[4]), created_at=row[5],
        ended_at=row[6], metadata=json.loads(row[7]), memory_count=int(row[8]) if len(row) > 8 else 0,
    )


def _memory(row: Sequence[Any]) -> Memory:
    kind: MemoryKind = row[3]
    return Memory(
        seq=int(row[0]), id=row[1], conversation_id=row[2], kind=kind, content=row[4],
        tags=tuple(json.loads(row[5])), metadata=json.loads(row[6]), created_at=row[7], context=row[8],
    )


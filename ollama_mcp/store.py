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
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, overload

import aiosqlite
import anyio

from ollama_mcp import db
from ollama_mcp.domain import (
    AuditRow,
    Conversation,
    ConversationStatus,
    EmbeddingRow,
    Facet,
    Job,
    JobKind,
    Memory,
    MemoryKind,
    SearchFilters,
)
from ollama_mcp.errors import (
    ConversationClosedError,
    ConversationNotFoundError,
    InvalidInputError,
    MemoryNotFoundError,
    MemorySupersededError,
    StorageError,
)

KIND_CODES: dict[str, int] = {"note": 0, "message": 1, "summary": 2}
FACET_CODES: dict[str, int] = {"content": 0, "context": 1}
# A memory's context is its content preceded by this many earlier memories of its conversation
# (each clipped to its last CONTEXT_NEIGHBOUR_CHARS). Measured on LoCoMo: bench/README.md.
CONTEXT_NEIGHBOURS = 2
CONTEXT_NEIGHBOUR_CHARS = 1000
_VECTOR_BATCH_ROWS = 4096
# The keyword indexes' tokenizer (schema/0001_initial.sql): scratch tables that tokenize new
# memories and query words for the in-memory keyword index use the same one.
TOKENIZER = "porter unicode61 remove_diacritics 2"
KEYWORD_TABLES: dict[int, str] = {FACET_CODES["content"]: "memories_fts", FACET_CODES["context"]: "memory_contexts_fts"}
# memory_changes rows older than this many are pruned by the upkeep (a reader further behind
# rebuilds its index).
KEPT_CHANGES = 10_000
# How far the keyword index's inputs have come (KeywordState): the highest memory seq, and the
# AUTOINCREMENT counter of memory_changes (not max(id), which pruning the log would lower).
_NEWEST_SEQ = "(SELECT coalesce(max(seq), 0) FROM memories)"
_NEWEST_CHANGE = "(SELECT coalesce(max(seq), 0) FROM sqlite_sequence WHERE name = 'memory_changes')"

# "This memory has no vector of model ?1 for the facet": pending embeddings, everywhere.
_MISSING_VECTOR = (
    "NOT EXISTS (SELECT 1 FROM memory_embeddings e WHERE e.memory_seq = m.seq AND e.model = ?1 AND e.facet = '{}')"
)
_CONVERSATION_COLUMNS = (
    "c.rowid, c.id, c.name, c.status, c.anonymous, c.created_at, c.ended_at, c.metadata, c.summary,"
    " c.summary_status, c.rolling_summary, c.summarized_through, c.expires_at"
)
_MEMORY_COLUMNS = (
    "m.seq, m.id, m.conversation_id, m.kind, m.content, m.tags, m.metadata, m.created_at, m.context,"
    " m.role, m.actor, m.tool_calls, m.tool_call_id, m.superseded_by"
)
_MEMORY_WIDTH = 14  # columns in _MEMORY_COLUMNS: what a query selects after them starts here


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


class Store:
    """The only owner of SQL. Open with ``await Store.open(path)``; close with ``aclose``."""

    def __init__(self, conn: aiosqlite.Connection, path: Path) -> None:
        self._conn = conn
        self.path = path
        self._lock = anyio.Lock()
        self._keyword_scratch = False  # temp tables of this connection (keyword_rows) created

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
        self, conversation_id: str, name: str | None, metadata: dict[str, Any], anonymous: bool, created_at: str,
        expires_at: str | None = None,
    ) -> Conversation:
        async with self._transaction("create the conversation") as conn:
            cursor = await conn.execute(
                "INSERT INTO conversations (id, name, anonymous, metadata, created_at, expires_at)"
                " VALUES (?, ?, ?, ?, ?, ?)",
                (conversation_id, name, int(anonymous), _dump(metadata), created_at, expires_at),
            )
            key = cursor.lastrowid
        return Conversation(
            key=int(key or 0), id=conversation_id, name=name, status="active", anonymous=anonymous,
            created_at=created_at, metadata=metadata, expires_at=expires_at,
        )

    async def get_conversation(self, conversation_id: str, *, count_memories: bool = False) -> Conversation:
        """The conversation (``memory_count`` is filled only when asked: it costs a count)."""
        count = (
            "(SELECT count(*) FROM memories m WHERE m.conversation_id = c.id AND m.kind = 'note' AND m.superseded_by IS NULL)"
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
            " WHERE m.conversation_id = c.id AND m.kind = 'note' AND m.superseded_by IS NULL)"
            f" FROM conversations c {where} ORDER BY c.created_at DESC, c.rowid DESC LIMIT ?",
            [*params, limit],
            "list conversations",
        )
        return [_conversation(row) for row in rows]

    async def end_conversation(
        self, conversation_id: str, ended_at: str, summary_memory: Memory | None, *, queue_summary: bool
    ) -> tuple[Conversation, int]:
        """Mark the conversation completed, in one transaction with what becomes of its summary:
        the given one stored (also as a searchable memory), or a summarize job queued when
        ``queue_summary`` and the conversation has anything to summarize."""
        async with self._transaction("end the conversation") as conn:
            status = await _status(conn, conversation_id)
            if status != "active":
                raise ConversationClosedError(conversation_id)
            summary_status = "none"
            if summary_memory is not None:
                await _insert_memory_row(conn, summary_memory)
                summary_status = "given"
            elif queue_summary:
                has_content = await (await conn.execute(
                    "SELECT 1 FROM memories WHERE conversation_id = ? AND kind != 'summary' LIMIT 1",
                    (conversation_id,),
                )).fetchone()
                if has_content:
                    await _enqueue(conn, "summarize", conversation_id, ended_at)
                    summary_status = "pending"
            await conn.execute(
                "UPDATE conversations SET status = 'completed', ended_at = ?, summary = ?, summary_status = ?"
                " WHERE id = ?",
                (ended_at, summary_memory.content if summary_memory else None, summary_status, conversation_id),
            )
            count = await (await conn.execute(
                "SELECT count(*) FROM memories WHERE conversation_id = ? AND kind = 'note' AND superseded_by IS NULL",
                (conversation_id,),
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
            seq = await _insert_memory_row(conn, memory)
            if seq is None:
                existing = await (await conn.execute(
                    f"SELECT {_MEMORY_COLUMNS} FROM memories m WHERE m.conversation_id = ? AND m.kind = 'note'"
                    " AND m.content_hash = ? AND m.superseded_by IS NULL",
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
                    recent[conv] = await _earlier_contents(conn, conv)
                    hashes = [content_hash(m.content) for m in memories if m.conversation_id == conv]
                    existing = await (await conn.execute(
                        "SELECT content_hash FROM memories WHERE conversation_id = ? AND kind = 'note' AND superseded_by IS NULL"
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
            seqs = {row[0]: row[1] for row in await (await conn.execute(
                "SELECT id, seq FROM memories WHERE id IN (SELECT value FROM json_each(?))",
                (json.dumps([m.id for m, _, _ in rows]),),
            )).fetchall()}
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

    async def get_memory(self, memory_id: str) -> Memory:
        rows = await self._fetchall(
            f"SELECT {_MEMORY_COLUMNS} FROM memories m WHERE m.id = ?", (memory_id,), "read the memory"
        )
        if not rows:
            raise MemoryNotFoundError(memory_id)
        return _memory(rows[0])

    async def update_memory(self, memory_id: str, revise: Callable[[Memory], Memory]) -> tuple[Memory, Memory]:
        """Store ``revise(old)`` as the new version of ``memory_id``; the old row stays, marked
        ``superseded_by`` the new one. Returns (old, new), in one transaction.

        The new version takes the old one's place in the conversation: its context is built from
        the memories before the old version, not from the latest ones.
        """
        async with self._transaction("update the memory") as conn:
            old = await _memory_by_id(conn, memory_id)
            if old.superseded_by is not None:
                raise MemorySupersededError(memory_id, await _latest_version(conn, memory_id))
            if old.kind == "message":
                raise InvalidInputError(
                    "memory_id", "names a message of the conversation's transcript, which is never edited",
                    "store a note with the correction instead",
                )
            new = revise(old)
            await conn.execute("UPDATE memories SET superseded_by = ? WHERE seq = ?", (new.id, old.seq))
            seq = await _insert_memory_row(conn, new, context_before=old.seq)
            if seq is None:
                raise InvalidInputError(
                    "content", "is identical to another current memory of this conversation",
                    "delete one of the two, or change the wording",
                )
            stored = await _memory_by_seq(conn, seq)
        return replace(old, superseded_by=new.id), stored

    async def delete_memory(self, memory_id: str) -> tuple[Memory, list[int], list[int]]:
        """Remove a memory and all its versions, with their tags, vectors (cascade) and keyword
        entries (triggers), at once: a deleted fact must not stay findable as an older version.

        The memories that had a deleted one in their context get a context without it (and lose
        their context vectors, which the backfill recomputes). Returns the named memory, the seqs
        deleted and the seqs whose context changed.
        """
        async with self._transaction("delete the memory") as conn:
            named = await _memory_by_id(conn, memory_id)
            versions = await (await conn.execute(
                "WITH RECURSIVE newer(id) AS (SELECT ?1 UNION SELECT m.superseded_by FROM memories m JOIN newer"
                " ON m.id = newer.id WHERE m.superseded_by IS NOT NULL),"
                " older(id) AS (SELECT ?1 UNION SELECT m.id FROM memories m JOIN older ON m.superseded_by = older.id)"
                " SELECT seq, kind FROM memories WHERE id IN (SELECT id FROM newer UNION SELECT id FROM older)"
                " ORDER BY seq",
                (memory_id,),
            )).fetchall()
            deleted = [int(seq) for seq, _ in versions]
            await conn.execute(
                "DELETE FROM memories WHERE seq IN (SELECT value FROM json_each(?))", (json.dumps(deleted),)
            )
            changed: list[int] = []
            if named.kind != "summary":
                for seq in deleted:
                    followers = await (await conn.execute(
                        "SELECT seq, content FROM memories WHERE conversation_id = ? AND kind != 'summary'"
                        " AND seq > ? ORDER BY seq LIMIT ?",
                        (named.conversation_id, seq, CONTEXT_NEIGHBOURS),
                    )).fetchall()
                    for follower, content in followers:
                        if follower in changed:
                            continue
                        context = await _context(conn, named.conversation_id, content, before_seq=follower)
                        await conn.execute("UPDATE memories SET context = ? WHERE seq = ?", (context, follower))
                        await conn.execute(
                            "DELETE FROM memory_embeddings WHERE memory_seq = ? AND facet = 'context'", (follower,)
                        )
                        changed.append(follower)
        return named, deleted, changed

    async def messages(self, conversation_id: str, limit: int, before_seq: int | None = None) -> list[Memory]:
        """The latest ``limit`` messages before ``before_seq`` (default: all), oldest first."""
        rows = await self._fetchall(
            f"SELECT {_MEMORY_COLUMNS} FROM memories m WHERE m.conversation_id = ? AND m.kind = 'message'"
            " AND m.seq < ? ORDER BY m.seq DESC LIMIT ?",
            (conversation_id, before_seq if before_seq is not None else 2**62, limit),
            "read the conversation's messages",
        )
        return [_memory(row) for row in reversed(rows)]

    async def conversation_memories(
        self, conversation_id: str, *, after_seq: int = 0, limit: int = -1, kinds: Sequence[MemoryKind] = ()
    ) -> list[Memory]:
        """Memories of every version (of ``kinds``, default all) after ``after_seq``, oldest first."""
        kind_sql = "AND m.kind IN (SELECT value FROM json_each(?3))" if kinds else "AND ?3 IS NULL"
        rows = await self._fetchall(
            f"SELECT {_MEMORY_COLUMNS} FROM memories m WHERE m.conversation_id = ?1 AND m.seq > ?2 {kind_sql}"
            " ORDER BY m.seq LIMIT ?4",
            (conversation_id, after_seq, json.dumps(list(kinds)) if kinds else None, limit),
            "read the conversation",
        )
        return [_memory(row) for row in rows]

    async def transcript_size(self, conversation_id: str, after_seq: int) -> tuple[int, int]:
        """(messages, characters) of the conversation's messages after ``after_seq``."""
        rows = await self._fetchall(
            "SELECT count(*), coalesce(sum(length(content)), 0) FROM memories"
            " WHERE conversation_id = ? AND kind = 'message' AND seq > ?",
            (conversation_id, after_seq), "measure the transcript",
        )
        return int(rows[0][0]), int(rows[0][1])

    async def conversation_snapshot(
        self, conversation_id: str, offset: int = 0, limit: int = -1
    ) -> tuple[Conversation, list[Memory], int]:
        """A conversation, its memories of every kind and version in order (from ``offset``, at
        most ``limit``) and their total, read in one transaction: a concurrent delete either
        happened before (not found) or not at all."""
        async with self._transaction("read the conversation", write=False) as conn:
            row = await (await conn.execute(
                f"SELECT {_CONVERSATION_COLUMNS} FROM conversations c WHERE c.id = ?", (conversation_id,)
            )).fetchone()
            if row is None:
                raise ConversationNotFoundError(conversation_id)
            total = await (await conn.execute(
                "SELECT count(*) FROM memories WHERE conversation_id = ?", (conversation_id,)
            )).fetchone()
            rows = await (await conn.execute(
                f"SELECT {_MEMORY_COLUMNS} FROM memories m WHERE m.conversation_id = ? ORDER BY m.seq"
                " LIMIT ? OFFSET ?", (conversation_id, limit, offset),
            )).fetchall()
        return _conversation(row), [_memory(r) for r in rows], int(total[0]) if total else 0

    async def conversation_ids(self) -> list[str]:
        rows = await self._fetchall(
            "SELECT id FROM conversations ORDER BY created_at, rowid", (), "list conversations"
        )
        return [row[0] for row in rows]

    async def import_conversation(
        self, conversation: Conversation, memories: Sequence[Memory], summarized_through_id: str | None
    ) -> tuple[bool, int]:
        """Insert an exported conversation and its memories with their ids, in one transaction.

        Idempotent: a conversation or memory whose id exists is left as it is (and a note whose
        text is already current in the conversation is skipped), so importing twice changes
        nothing. Returns (conversation was new, memories added).
        """
        async with self._transaction("import the conversation") as conn:
            cursor = await conn.execute(
                "INSERT OR IGNORE INTO conversations (id, name, anonymous, status, metadata, summary, summary_status,"
                " rolling_summary, created_at, ended_at, expires_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (conversation.id, conversation.name, int(conversation.anonymous), conversation.status,
                 _dump(conversation.metadata), conversation.summary, conversation.summary_status,
                 conversation.rolling_summary, conversation.created_at, conversation.ended_at,
                 conversation.expires_at),
            )
            new_conversation = cursor.rowcount > 0
            recent = await _earlier_contents(conn, conversation.id)
            rows = []
            for m in memories:
                context = m.content
                if m.kind != "summary":
                    context = compose_context(recent, m.content)
                    recent = [*recent, m.content][-CONTEXT_NEIGHBOURS:]
                rows.append((
                    m.id, conversation.id, m.kind, m.role, m.actor,
                    json.dumps(list(m.tool_calls)) if m.tool_calls else None, m.tool_call_id, m.content,
                    content_hash(m.content), context, json.dumps(list(m.tags)), _dump(m.metadata), m.created_at,
                    m.superseded_by,
                ))
            count_sql = "SELECT count(*) FROM memories WHERE conversation_id = ?"
            before = (await (await conn.execute(count_sql, (conversation.id,))).fetchone() or (0,))[0]
            await conn.executemany(
                "INSERT OR IGNORE INTO memories (id, conversation_id, kind, role, actor, tool_calls, tool_call_id,"
                " content, content_hash, context, tags, metadata, created_at, superseded_by)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                rows,
            )
            after = (await (await conn.execute(count_sql, (conversation.id,))).fetchone() or (0,))[0]
            await conn.execute(
                "INSERT OR IGNORE INTO memory_tags (memory_seq, tag) SELECT m.seq, t.value FROM memories m,"
                " json_each(m.tags) t WHERE m.conversation_id = ?",
                (conversation.id,),
            )
            if summarized_through_id is not None:
                await conn.execute(
                    "UPDATE conversations SET summarized_through = (SELECT seq FROM memories WHERE id = ?)"
                    " WHERE id = ? AND summarized_through = 0 AND EXISTS (SELECT 1 FROM memories WHERE id = ?)",
                    (summarized_through_id, conversation.id, summarized_through_id),
                )
        return new_conversation, int(after) - int(before)

    # -- deferred work ----------------------------------------------------------------------------

    async def enqueue_job(self, kind: JobKind, conversation_id: str, now: str) -> bool:
        """Queue a job unless one of that kind is already open for the conversation."""
        async with self._transaction("queue background work") as conn:
            return await _enqueue(conn, kind, conversation_id, now)

    async def claim_job(self, now: str, lease_until: str) -> Job | None:
        """Take the next due job (or one whose worker's lease lapsed: it died) under a lease."""
        async with self._transaction("claim background work") as conn:
            row = await (await conn.execute(
                "UPDATE jobs SET state = 'running', attempts = attempts + 1, lease_until = ?2"
                " WHERE id = (SELECT id FROM jobs WHERE (state = 'queued' AND run_after <= ?1)"
                " OR (state = 'running' AND lease_until <= ?1) ORDER BY run_after, id LIMIT 1)"
                " RETURNING id, kind, conversation_id, attempts, last_error",
                (now, lease_until),
            )).fetchone()
        return None if row is None else Job(int(row[0]), row[1], row[2], int(row[3]), row[4])

    async def renew_job(self, job_id: int, lease_until: str) -> None:
        async with self._transaction("renew background work") as conn:
            await conn.execute(
                "UPDATE jobs SET lease_until = ? WHERE id = ? AND state = 'running'", (lease_until, job_id)
            )

    async def next_job_time(self) -> str | None:
        """When the next job falls due (a queued job's run_after or a running job's lease end)."""
        rows = await self._fetchall(
            "SELECT min(CASE state WHEN 'queued' THEN run_after ELSE lease_until END) FROM jobs"
            " WHERE state IN ('queued', 'running')", (), "read background work",
        )
        return rows[0][0] if rows else None

    async def retry_job(self, job_id: int, run_after: str, error: str) -> None:
        async with self._transaction("reschedule background work") as conn:
            await conn.execute(
                "UPDATE jobs SET state = 'queued', run_after = ?, lease_until = NULL, last_error = ? WHERE id = ?",
                (run_after, error, job_id),
            )

    async def fail_job(self, job: Job, error: str, now: str) -> None:
        """Give up on a job, keeping the reason; a summary that will not come is marked failed."""
        async with self._transaction("record failed background work") as conn:
            await conn.execute(
                "UPDATE jobs SET state = 'failed', lease_until = NULL, last_error = ?, finished_at = ? WHERE id = ?",
                (error, now, job.id),
            )
            if job.kind == "summarize":
                await conn.execute(
                    "UPDATE conversations SET summary_status = 'failed' WHERE id = ? AND summary_status = 'pending'",
                    (job.conversation_id,),
                )

    async def finish_job(
        self, job: Job, now: str, *, summary: Memory | None = None, rolling: tuple[str, int] | None = None
    ) -> None:
        """Mark a job done with what it produced, in one transaction: a conversation summary
        (stored as a memory too) or a rolling summary reaching a message seq."""
        async with self._transaction("store the result of background work") as conn:
            if summary is not None:
                await _insert_memory_row(conn, summary)
                await conn.execute(
                    "UPDATE conversations SET summary = ?, summary_status = 'done' WHERE id = ?",
                    (summary.content, job.conversation_id),
                )
            if rolling is not None:
                text, through = rolling
                await conn.execute(
                    "UPDATE conversations SET rolling_summary = ?, summarized_through = ?"
                    " WHERE id = ? AND summarized_through < ?",
                    (text, through, job.conversation_id, through),
                )
            await conn.execute(
                "UPDATE jobs SET state = 'done', lease_until = NULL, finished_at = ? WHERE id = ?", (now, job.id)
            )

    # -- agent audit ------------------------------------------------------------------------------

    async def insert_audit(self, rows: Sequence[AuditRow]) -> None:
        if not rows:
            return
        async with self._transaction("write the agent audit") as conn:
            await conn.executemany(
                "INSERT INTO agent_audit (request_id, conversation_id, step, tool, arguments_digest, risk, decision,"
                " outcome, duration_ms, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [(r.request_id, r.conversation_id, r.step, r.tool, r.arguments_digest, r.risk, r.decision,
                  r.outcome, r.duration_ms, r.created_at) for r in rows],
            )

    # -- retention --------------------------------------------------------------------------------

    async def expired_conversations(self, now: str, inactive_before: str | None) -> list[str]:
        """Conversations past their own expiry, or (with ``inactive_before``) untouched since then."""
        rows = await self._fetchall(
            "SELECT id FROM conversations WHERE expires_at IS NOT NULL AND expires_at <= ?1"
            " UNION SELECT c.id FROM conversations c WHERE ?2 IS NOT NULL"
            " AND max(c.created_at, coalesce(c.ended_at, ''),"
            " coalesce((SELECT max(m.created_at) FROM memories m WHERE m.conversation_id = c.id), '')) < ?2",
            (now, inactive_before), "find expired conversations",
        )
        return [row[0] for row in rows]

    async def delete_conversation(self, conversation_id: str) -> list[int]:
        """Delete a conversation with its memories, messages, tags, vectors, keyword entries and
        jobs in one transaction (foreign-key cascades and triggers). Returns the memory seqs."""
        async with self._transaction("delete the conversation") as conn:
            await _status(conn, conversation_id)
            rows = await (await conn.execute(
                "SELECT seq FROM memories WHERE conversation_id = ?", (conversation_id,)
            )).fetchall()
            await conn.execute("DELETE FROM conversations WHERE id = ?", (conversation_id,))
        return [int(row[0]) for row in rows]

    # -- search ---------------------------------------------------------------------------------

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
        where, params = _filter_sql(filters)
        conditions = "".join(" AND " + w for w in where)
        parts = [
            "SELECT -2 AS list, data_version AS seq, 0 AS score FROM pragma_data_version",
            f"SELECT -3, {_NEWEST_SEQ}, 0",
            f"SELECT -4, {_NEWEST_CHANGE}, 0",
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

    @overload
    async def keyword_rows(self, since: None = None) -> KeywordRows: ...
    @overload
    async def keyword_rows(self, since: KeywordState) -> KeywordRows | None: ...

    async def keyword_rows(self, since: KeywordState | None = None) -> KeywordRows | None:
        """The memories for an in-memory keyword index: all of them (``since`` None), or those
        new or changed since ``since``; None when ``memory_changes`` was pruned past ``since``
        (the caller must then load everything).

        A full load reads the postings straight out of the FTS5 indexes (about 2 s at 100k
        memories); new and changed memories are tokenized by scratch FTS5 tables with the same
        tokenizer, so both give exactly the tokens FTS5 matches.
        """
        await self._ensure_keyword_scratch()
        state_sql = f"SELECT {_NEWEST_SEQ}, {_NEWEST_CHANGE}"
        columns = "SELECT m.seq, c.rowid, m.kind{} FROM memories m JOIN conversations c ON c.id = m.conversation_id"
        if since is None:
            async with self._transaction("read the keyword index", write=False) as conn:
                state = KeywordState(*(await (await conn.execute(state_sql)).fetchone() or (0, 0)))
                cursor = await conn.execute(columns.format("") + " ORDER BY m.seq")
                memories = [(int(seq), int(conv), KIND_CODES[kind]) for seq, conv, kind in await cursor.fetchall()]
                postings: dict[int, list[tuple[str, str]]] = {}
                for facet, table in KEYWORD_TABLES.items():
                    cursor = await conn.execute(f"SELECT term, group_concat(doc, ' ') FROM temp.{table}_instance GROUP BY term")
                    postings[facet] = [(str(term), str(docs)) for term, docs in await cursor.fetchall()]
            return KeywordRows(state, memories, postings, [])
        # A catch-up runs on every search after a store: one statement (one snapshot, one trip to
        # the database thread) reads the state, the change log since ``since``, and the memories
        # new or changed since. Two lookups by rowid for the memories: with "seq > ? OR seq IN
        # (...)" SQLite scans the whole table (23 ms at 100k memories).
        select = columns.format(", m.content, m.context")
        rows = await self._fetchall(
            f"SELECT 0, s.*, NULL, NULL, NULL FROM ({state_sql}) s"
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
                raise db.translate(exc, "tokenize memories") from exc
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
            f"CREATE VIRTUAL TABLE IF NOT EXISTS temp.{table}_instance USING fts5vocab(main, '{table}', 'instance')"
            for table in KEYWORD_TABLES.values()
        ] + [
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
                raise db.translate(exc, "prepare the keyword index") from exc
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
            missing_content, missing_context = row[_MEMORY_WIDTH], row[_MEMORY_WIDTH + 1]
            facets: list[Facet] = []
            if missing_content:
                facets.append("content")
            if missing_context:
                facets.append("context")
            out.append((_memory(row), tuple(facets)))
        return out

    async def pending_count(self, model: str) -> int:
        """Memories lacking a vector of ``model`` for some facet."""
        content, context = _MISSING_VECTOR.format("content"), _MISSING_VECTOR.format("context")
        rows = await self._fetchall(
            f"SELECT count(*) FROM memories m WHERE ({content} OR {context})", (model,), "count pending memories"
        )
        return int(rows[0][0])

    async def delete_vectors(self, model: str) -> int:
        """Drop every vector of ``model`` (reembed --force); the memories become pending."""
        async with self._transaction("delete vectors") as conn:
            cursor = await conn.execute("DELETE FROM memory_embeddings WHERE model = ?", (model,))
            return cursor.rowcount

    async def memory_is_pending(self, memory_seq: int, model: str) -> bool:
        rows = await self._fetchall(
            f"SELECT {_MISSING_VECTOR.format('content')} FROM memories m WHERE m.seq = ?2",
            (model, memory_seq),
            "read the embedding state",
        )
        return bool(rows and rows[0][0])

    async def vector_snapshot(
        self, model: str, after_id: int, sink: Callable[[VectorBatch], None], *, count: bool = True
    ) -> int | None:
        """Stream vectors of ``model`` with id > ``after_id`` to ``sink``; return the model's row
        count (with ``count``; else None).

        Everything comes from one read transaction, so comparing the returned count with what the
        caller holds afterwards tells whether rows were deleted meanwhile. The count reads the
        whole model index (6-9 ms at 100k memories).
        """
        async with self._transaction("load vectors", write=False) as conn:
            total = None
            if count:
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
    jobs: dict[str, int]  # background jobs by state
    job_problems: list[tuple[str, str, str]]  # (kind, state, last error) of jobs waiting or failed


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
                jobs=dict(conn.execute("SELECT state, count(*) FROM jobs GROUP BY state")) if version >= 2 else {},
                job_problems=conn.execute(
                    "SELECT kind, state, last_error FROM jobs WHERE last_error IS NOT NULL AND state != 'done'"
                    " ORDER BY id DESC LIMIT 3"
                ).fetchall() if version >= 2 else [],
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


async def _insert_memory_row(
    conn: aiosqlite.Connection, memory: Memory, *, context_before: int | None = None
) -> int | None:
    """Insert the row (with its context: the memories before it, or before seq ``context_before``)
    and its tags; None when an identical current note already exists."""
    context = memory.content
    if memory.kind != "summary":
        context = await _context(conn, memory.conversation_id, memory.content, before_seq=context_before)
    cursor = await conn.execute(
        "INSERT INTO memories (id, conversation_id, kind, role, actor, tool_calls, tool_call_id, content,"
        " content_hash, context, tags, metadata, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
        " ON CONFLICT (conversation_id, content_hash) WHERE kind = 'note' AND superseded_by IS NULL DO NOTHING",
        (memory.id, memory.conversation_id, memory.kind, memory.role, memory.actor,
         json.dumps(list(memory.tool_calls)) if memory.tool_calls else None, memory.tool_call_id,
         memory.content, content_hash(memory.content), context, json.dumps(list(memory.tags)),
         _dump(memory.metadata), memory.created_at),
    )
    if cursor.rowcount == 0:
        return None
    seq = int(cursor.lastrowid or 0)
    if memory.tags:
        await conn.executemany(
            "INSERT OR IGNORE INTO memory_tags (memory_seq, tag) VALUES (?, ?)", [(seq, tag) for tag in memory.tags]
        )
    return seq


async def _latest_version(conn: aiosqlite.Connection, memory_id: str) -> str:
    row = await (await conn.execute(
        "WITH RECURSIVE chain(id, next) AS (SELECT id, superseded_by FROM memories WHERE id = ?"
        " UNION ALL SELECT m.id, m.superseded_by FROM memories m JOIN chain ON m.id = chain.next)"
        " SELECT id FROM chain WHERE next IS NULL",
        (memory_id,),
    )).fetchone()
    return str(row[0]) if row else memory_id


async def _enqueue(conn: aiosqlite.Connection, kind: JobKind, conversation_id: str, now: str) -> bool:
    cursor = await conn.execute(
        "INSERT INTO jobs (kind, conversation_id, run_after, created_at) VALUES (?, ?, ?, ?)"
        " ON CONFLICT (kind, conversation_id) WHERE state IN ('queued', 'running') DO NOTHING",
        (kind, conversation_id, now, now),
    )
    return cursor.rowcount > 0


async def _context(conn: aiosqlite.Connection, conversation_id: str, content: str, before_seq: int | None) -> str:
    """``content`` preceded by the (clipped) memories just before it in its conversation."""
    return compose_context(await _earlier_contents(conn, conversation_id, before_seq), content)


async def _earlier_contents(conn: aiosqlite.Connection, conversation_id: str, before_seq: int | None = None) -> list[str]:
    """The texts of the CONTEXT_NEIGHBOURS memories before ``before_seq`` (default: the latest),
    oldest first; summaries are not part of anyone's context."""
    rows = await (await conn.execute(
        "SELECT content FROM memories WHERE conversation_id = ? AND kind != 'summary' AND seq < ?"
        " ORDER BY seq DESC LIMIT ?",
        (conversation_id, before_seq if before_seq is not None else 2**62, CONTEXT_NEIGHBOURS),
    )).fetchall()
    return [row[0] for row in reversed(list(rows))]


def compose_context(earlier: Sequence[str], content: str) -> str:
    """A memory's context: the last CONTEXT_NEIGHBOURS earlier texts, each clipped to its end, then the memory."""
    clipped = [text[-CONTEXT_NEIGHBOUR_CHARS:] for text in earlier[-CONTEXT_NEIGHBOURS:]]
    return "\n".join([*clipped, content])


async def _memory_by_id(conn: aiosqlite.Connection, memory_id: str) -> Memory:
    row = await (await conn.execute(f"SELECT {_MEMORY_COLUMNS} FROM memories m WHERE m.id = ?", (memory_id,))).fetchone()
    if row is None:
        raise MemoryNotFoundError(memory_id)
    return _memory(row)


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
    if not filters.include_superseded:
        where.append("m.superseded_by IS NULL")
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
        ended_at=row[6], metadata=json.loads(row[7]), summary=row[8], summary_status=row[9],
        rolling_summary=row[10], summarized_through=int(row[11]), expires_at=row[12],
        memory_count=int(row[13]) if len(row) > 13 else 0,
    )


def _memory(row: Sequence[Any]) -> Memory:
    kind: MemoryKind = row[3]
    return Memory(
        seq=int(row[0]), id=row[1], conversation_id=row[2], kind=kind, content=row[4],
        tags=tuple(json.loads(row[5])), metadata=json.loads(row[6]), created_at=row[7], context=row[8],
        role=row[9], actor=row[10], tool_calls=tuple(json.loads(row[11])) if row[11] else (),
        tool_call_id=row[12], superseded_by=row[13],
    )


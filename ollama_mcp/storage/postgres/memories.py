"""Memories: insert (one or in bulk, de-duplicated), read, revise, delete."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace
from typing import Any

import psycopg
from psycopg.types.json import Jsonb

from ollama_mcp.domain import EmbeddingRow, Memory, SearchFilters
from ollama_mcp.errors import ConversationClosedError, InvalidInputError, MemoryNotFoundError, MemorySupersededError
from ollama_mcp.storage.postgres.base import PgStoreBase
from ollama_mcp.storage.postgres.rows import (
    MEMORY_COLUMNS,
    earlier_contents,
    execute_many,
    facts_from,
    filter_sql,
    insert_embedding_rows,
    insert_memory_row,
    latest_version,
    lock_conversation,
    memory_by_id,
    memory_by_seq,
    memory_from_row,
    memory_where,
    rewrite_followers,
)
from ollama_mcp.storage.records import (
    CONTEXT_NEIGHBOURS,
    MOMENT_COLUMNS,
    NEIGHBOUR_COLUMNS,
    compose_context,
    content_hash,
    moment_from_row,
    own_context,
)
from ollama_mcp.when import times_named


class MemoryStore(PgStoreBase):
    """Memories: insert (one or in bulk, de-duplicated), read, revise, delete."""

    async def insert_memory(self, memory: Memory, embeddings: Sequence[EmbeddingRow] = ()) -> tuple[Memory, bool]:
        """Insert a memory into an active conversation; returns (memory, was_duplicate). A note
        already current in the conversation is returned instead of stored twice."""
        async with self._transaction("store the memory") as conn:
            if await lock_conversation(conn, memory.conversation_id) != "active":
                raise ConversationClosedError(memory.conversation_id)
            seq = await insert_memory_row(conn, memory)
            if seq is None:
                existing = await memory_where(
                    conn,
                    "m.conversation_id = %s AND m.kind = 'note' AND m.content_hash = %s AND m.superseded_by IS NULL",
                    (memory.conversation_id, content_hash(memory.content)),
                )
                assert existing is not None, "the unique index reported a conflict with no row"
                return existing, True
            stored = await memory_by_seq(conn, seq)
            await insert_embedding_rows(conn, [replace(row, memory_seq=seq) for row in embeddings])
        if embeddings:
            await self.ensure_vector_index(embeddings[0].model, embeddings[0].dim)
        return stored, False

    async def insert_memories(self, memories: Sequence[Memory], vectors: Sequence[EmbeddingRow | None]) -> int:
        """Bulk insert (imports) in one transaction; same rules as ``insert_memory``. Returns how
        many were new."""
        if not memories:
            return 0
        added = 0
        written: list[EmbeddingRow] = []
        async with self._transaction("import memories") as conn:
            recent: dict[str, list[str]] = {}
            seen: dict[str, set[str]] = {}
            rows = []
            for memory in memories:
                conv = memory.conversation_id
                if conv not in recent:
                    await lock_conversation(conn, conv)
                    recent[conv] = await earlier_contents(conn, conv)
                    cursor = await conn.execute(
                        "SELECT content_hash FROM memories WHERE conversation_id = %s AND kind = 'note'"
                        " AND superseded_by IS NULL AND content_hash = ANY(%s)",
                        (conv, [content_hash(m.content) for m in memories if m.conversation_id == conv]),
                    )
                    seen[conv] = {row[0] for row in await cursor.fetchall()}
                digest = content_hash(memory.content)
                if memory.kind == "note" and digest in seen[conv]:
                    continue
                seen[conv].add(digest)
                context = memory.content
                if not own_context(memory):
                    context = compose_context(recent[conv], memory.content)
                    recent[conv] = [*recent[conv], memory.content][-CONTEXT_NEIGHBOURS:]
                rows.append((memory, digest, context))
            await execute_many(
                conn,
                "INSERT INTO memories (id, conversation_id, kind, content, content_hash, context, tags, metadata,"
                " created_at, occurred_at, spoken_of) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
                [(m.id, m.conversation_id, m.kind, m.content, digest, context, list(m.tags), Jsonb(m.metadata),
                  m.created_at, m.occurred_at, times_named(m.content, m.occurred_at)) for m, digest, context in rows],
            )
            added = len(rows)
            cursor = await conn.execute(
                "SELECT id, seq FROM memories WHERE id = ANY(%s)", ([m.id for m, _, _ in rows],)
            )
            seqs = {row[0]: int(row[1]) for row in await cursor.fetchall()}
            given = {m.id: v for m, v in zip(memories, vectors, strict=True) if v is not None}
            written = [replace(given[m.id], memory_seq=seqs[m.id]) for m, _, _ in rows if m.id in given]
            await insert_embedding_rows(conn, written)
        if written:
            await self.ensure_vector_index(written[0].model, written[0].dim)
        return added

    async def memories_by_seq(self, seqs: Iterable[int]) -> dict[int, Memory]:
        wanted = list(dict.fromkeys(seqs))
        if not wanted:
            return {}
        rows = await self._fetchall(
            f"SELECT {MEMORY_COLUMNS} FROM memories m WHERE m.seq = ANY(%s)", (wanted,), "read memories"
        )
        return {int(row[0]): memory_from_row(row) for row in rows}

    async def moments_by_seq(self, seqs: Iterable[int]) -> dict[int, tuple[str, str]]:
        wanted = list(dict.fromkeys(seqs))
        if not wanted:
            return {}
        rows = await self._fetchall(
            f"SELECT {MOMENT_COLUMNS} FROM memories m WHERE m.seq = ANY(%s)", (wanted,),
            "read when memories happened",
        )
        return dict(moment_from_row(row) for row in rows)

    async def moments_between(
        self, filters: SearchFilters, start: str, end: str, limit: int
    ) -> dict[int, tuple[str, str]]:
        async with self._connection("read what happened after a time") as conn:
            return await moments_between(conn, filters, start, end, limit)

    async def name_times(self, limit: int) -> int:
        rows = await self._fetchall(
            "SELECT seq, content, occurred_at FROM memories WHERE spoken_of IS NULL ORDER BY seq LIMIT %s",
            (limit,), "read the memories whose times are not kept yet",
        )
        if rows:  # parsed outside the write transaction; a memory redacted meanwhile keeps its ""
            seqs = [int(seq) for seq, _, _ in rows]
            named = [times_named(content, occurred_at) for _, content, occurred_at in rows]
            async with self._transaction("keep the times memories name") as conn:
                await conn.execute(  # one statement: the row counts' trigger runs per statement
                    "UPDATE memories m SET spoken_of = n.spoken FROM unnest(%s::bigint[], %s::text[]) AS n(seq, spoken)"
                    " WHERE m.seq = n.seq AND m.spoken_of IS NULL",
                    (seqs, named),
                )
        return len(rows)

    async def adjacent_seqs(self, seqs: Iterable[int]) -> dict[int, tuple[int | None, int | None]]:
        wanted = list(dict.fromkeys(seqs))
        if not wanted:
            return {}
        rows = await self._fetchall(
            f"SELECT m.seq, {NEIGHBOUR_COLUMNS} FROM memories m WHERE m.seq = ANY(%s)",
            (wanted,),
            "read neighbouring memories",
        )
        return {int(row[0]): (row[1], row[2]) for row in rows}

    async def get_memory(self, memory_id: str) -> Memory:
        rows = await self._fetchall(
            f"SELECT {MEMORY_COLUMNS} FROM memories m WHERE m.id = %s", (memory_id,), "read the memory"
        )
        if not rows:
            raise MemoryNotFoundError(memory_id)
        return memory_from_row(rows[0])

    async def update_memory(self, memory_id: str, revise: Callable[[Memory], Memory]) -> tuple[Memory, Memory]:
        """Store ``revise(old)`` as the new version of ``memory_id`` (the old row stays, marked
        ``superseded_by``), in one transaction; the new version's context is the old one's place."""
        async with self._transaction("update the memory") as conn:
            await lock_conversation(conn, (await memory_by_id(conn, memory_id)).conversation_id)
            old = await memory_by_id(conn, memory_id)  # again, under the lock
            if old.superseded_by is not None:
                raise MemorySupersededError(memory_id, await latest_version(conn, memory_id))
            if old.kind == "message":
                raise InvalidInputError(
                    "memory_id", "names a message of the conversation's transcript, which is never edited",
                    "store a note with the correction instead",
                )
            if old.kind == "fact":
                raise InvalidInputError(
                    "memory_id", "names a fact the chat model extracted, which is never edited",
                    "delete it with delete_memory, and store a note with the correction instead",
                )
            new = revise(old)
            await conn.execute("UPDATE memories SET superseded_by = %s WHERE seq = %s", (new.id, old.seq))
            seq = await insert_memory_row(conn, new, context_before=old.seq)
            if seq is None:
                raise InvalidInputError(
                    "content", "is identical to another current memory of this conversation",
                    "delete one of the two, or change the wording",
                )
            stored = await memory_by_seq(conn, seq)
        return replace(old, superseded_by=new.id), stored

    async def delete_memory(self, memory_id: str) -> tuple[Memory, list[int], list[int]]:
        """Remove a memory with all its versions and their vectors at once; the memories that had
        one of them in their context get a new context (and lose their context vectors). Returns
        the named memory, the seqs deleted and the seqs whose context changed."""
        async with self._transaction("delete the memory") as conn:
            await lock_conversation(conn, (await memory_by_id(conn, memory_id)).conversation_id)
            named = await memory_by_id(conn, memory_id)
            cursor = await conn.execute(
                "WITH RECURSIVE newer(id) AS (SELECT %(id)s::text UNION SELECT m.superseded_by FROM memories m"
                " JOIN newer ON m.id = newer.id WHERE m.superseded_by IS NOT NULL),"
                " older(id) AS (SELECT %(id)s::text UNION SELECT m.id FROM memories m JOIN older ON m.superseded_by ="
                " older.id)"
                " SELECT seq FROM memories WHERE id IN (SELECT id FROM newer UNION SELECT id FROM older)",
                {"id": memory_id},
            )
            versions = [int(row[0]) for row in await cursor.fetchall()]
            deleted = sorted(versions + await facts_from(conn, versions))  # its facts go with it (cascade)
            await conn.execute("DELETE FROM memories WHERE seq = ANY(%s)", (versions,))
            changed = [] if own_context(named) else await rewrite_followers(conn, named.conversation_id, deleted)
        return named, deleted, changed


async def moments_between(
    conn: psycopg.AsyncConnection, filters: SearchFilters, start: str, end: str, limit: int
) -> dict[int, tuple[str, str]]:
    """``Storage.moments_between`` on ``conn`` (the ranker reads it beside its other lists)."""
    params: dict[str, Any] = {"start": start, "end": end, "limit": limit}
    where = [*filter_sql(filters, params), "m.occurred_at >= %(start)s", "m.occurred_at < %(end)s"]
    cursor = await conn.execute(
        f"SELECT {MOMENT_COLUMNS} FROM memories m WHERE {' AND '.join(where)}"
        " ORDER BY m.occurred_at, m.seq LIMIT %(limit)s",
        params,
    )
    return dict(moment_from_row(row) for row in await cursor.fetchall())

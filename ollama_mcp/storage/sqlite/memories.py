"""Memories: insert (one or in bulk, de-duplicated), read, revise, delete."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace

from ollama_mcp.domain import EmbeddingRow, Memory, SearchFilters
from ollama_mcp.errors import ConversationClosedError, InvalidInputError, MemoryNotFoundError, MemorySupersededError
from ollama_mcp.storage.records import MOMENT_COLUMNS, NEIGHBOUR_COLUMNS, moment_from_row
from ollama_mcp.storage.sqlite.base import StoreBase
from ollama_mcp.storage.sqlite.rows import (
    CONTEXT_NEIGHBOURS,
    MEMORY_COLUMNS,
    compose_context,
    content_hash,
    conversation_status,
    dump_json,
    earlier_contents,
    facts_from,
    filter_sql,
    insert_embedding_rows,
    insert_memory_row,
    latest_version,
    memory_by_id,
    memory_by_seq,
    memory_from_row,
    own_context,
    rewrite_followers,
)
from ollama_mcp.when import times_named


class MemoryStore(StoreBase):
    """Memories: insert (one or in bulk, de-duplicated), read, revise, delete."""

    async def insert_memory(self, memory: Memory, embeddings: Sequence[EmbeddingRow] = ()) -> tuple[Memory, bool]:
        """Insert a memory into an active conversation; returns (memory, was_duplicate).

        A note whose content already exists in the conversation is not inserted again: the
        existing memory is returned, so a client retrying a slow call never duplicates.
        """
        async with self._transaction("store the memory") as conn:
            status = await conversation_status(conn, memory.conversation_id)
            if status != "active":
                raise ConversationClosedError(memory.conversation_id)
            seq = await insert_memory_row(conn, memory)
            if seq is None:
                existing = await (await conn.execute(
                    f"SELECT {MEMORY_COLUMNS} FROM memories m WHERE m.conversation_id = ? AND m.kind = 'note'"
                    " AND m.content_hash = ? AND m.superseded_by IS NULL",
                    (memory.conversation_id, content_hash(memory.content)),
                )).fetchone()
                assert existing is not None, "the unique index reported a conflict with no row"
                return memory_from_row(existing), True
            stored = await memory_by_seq(conn, seq)
            await insert_embedding_rows(
                conn, [EmbeddingRow(**{**row.__dict__, "memory_seq": seq}) for row in embeddings]
            )
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
                    await conversation_status(conn, conv)  # raises if the conversation does not exist
                    recent[conv] = await earlier_contents(conn, conv)
                    hashes = [content_hash(m.content) for m in memories if m.conversation_id == conv]
                    existing = await (
                        await conn.execute(
                            "SELECT content_hash FROM memories WHERE conversation_id = ? AND kind = 'note' AND"
                            " superseded_by IS NULL"
                            " AND content_hash IN (SELECT value FROM json_each(?))",
                            (conv, json.dumps(hashes)),
                        )
                    ).fetchall()
                    seen[conv] = {row[0] for row in existing}
                digest = content_hash(memory.content)
                if memory.kind == "note" and digest in seen[conv]:
                    continue
                seen[conv].add(digest)
                context = memory.content
                if not own_context(memory):
                    context = compose_context(recent[conv], memory.content)
                    recent[conv] = [*recent[conv], memory.content][-CONTEXT_NEIGHBOURS:]
                rows.append((memory, digest, context))
            await conn.executemany(
                "INSERT INTO memories (id, conversation_id, kind, content, content_hash, context, tags, metadata,"
                " created_at, occurred_at, spoken_of) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [
                    (
                        m.id,
                        m.conversation_id,
                        m.kind,
                        m.content,
                        digest,
                        context,
                        json.dumps(list(m.tags)),
                        dump_json(m.metadata),
                        m.created_at,
                        m.occurred_at,
                        times_named(m.content, m.occurred_at),
                    )
                    for m, digest, context in rows
                ],
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
            await insert_embedding_rows(conn, [
                EmbeddingRow(**{**vector_of[m.id].__dict__, "memory_seq": seqs[m.id]})
                for m, _, _ in rows if m.id in vector_of
            ])
        return len(rows)

    async def memories_by_seq(self, seqs: Iterable[int]) -> dict[int, Memory]:
        wanted = list(dict.fromkeys(seqs))
        if not wanted:
            return {}
        rows = await self._fetchall(
            f"SELECT {MEMORY_COLUMNS} FROM memories m WHERE m.seq IN (SELECT value FROM json_each(?))",
            (json.dumps(wanted),),
            "read memories",
        )
        return {row[0]: memory_from_row(row) for row in rows}

    async def moments_by_seq(self, seqs: Iterable[int]) -> dict[int, tuple[str, str]]:
        wanted = list(dict.fromkeys(seqs))
        if not wanted:
            return {}
        rows = await self._fetchall(
            f"SELECT {MOMENT_COLUMNS} FROM memories m WHERE m.seq IN (SELECT value FROM json_each(?))",
            (json.dumps(wanted),),
            "read when memories happened",
        )
        return dict(moment_from_row(row) for row in rows)

    async def moments_between(
        self, filters: SearchFilters, start: str, end: str, limit: int
    ) -> dict[int, tuple[str, str]]:
        where, params = filter_sql(filters)
        rows = await self._fetchall(
            f"SELECT {MOMENT_COLUMNS} FROM memories m"
            f" WHERE {' AND '.join([*where, 'm.occurred_at >= ?', 'm.occurred_at < ?'])}"
            " ORDER BY m.occurred_at, m.seq LIMIT ?",
            (*params, start, end, limit),
            "read what happened after a time",
        )
        return dict(moment_from_row(row) for row in rows)

    async def name_times(self, limit: int) -> int:
        rows = await self._fetchall(
            "SELECT seq, content, occurred_at FROM memories WHERE spoken_of IS NULL ORDER BY seq LIMIT ?",
            (limit,), "read the memories whose times are not kept yet",
        )
        if rows:  # parsed outside the write transaction; a memory redacted meanwhile keeps its ""
            named = [(times_named(content, occurred_at), seq) for seq, content, occurred_at in rows]
            async with self._transaction("keep the times memories name") as conn:
                await conn.executemany("UPDATE memories SET spoken_of = ? WHERE seq = ? AND spoken_of IS NULL", named)
        return len(rows)

    async def adjacent_seqs(self, seqs: Iterable[int]) -> dict[int, tuple[int | None, int | None]]:
        wanted = list(dict.fromkeys(seqs))
        if not wanted:
            return {}
        rows = await self._fetchall(
            f"SELECT m.seq, {NEIGHBOUR_COLUMNS} FROM memories m WHERE m.seq IN (SELECT value FROM json_each(?))",
            (json.dumps(wanted),),
            "read neighbouring memories",
        )
        return {row[0]: (row[1], row[2]) for row in rows}

    async def get_memory(self, memory_id: str) -> Memory:
        rows = await self._fetchall(
            f"SELECT {MEMORY_COLUMNS} FROM memories m WHERE m.id = ?", (memory_id,), "read the memory"
        )
        if not rows:
            raise MemoryNotFoundError(memory_id)
        return memory_from_row(rows[0])

    async def update_memory(self, memory_id: str, revise: Callable[[Memory], Memory]) -> tuple[Memory, Memory]:
        """Store ``revise(old)`` as the new version of ``memory_id``; the old row stays, marked
        ``superseded_by`` the new one. Returns (old, new), in one transaction.

        The new version takes the old one's place in the conversation: its context is built from
        the memories before the old version, not from the latest ones.
        """
        async with self._transaction("update the memory") as conn:
            old = await memory_by_id(conn, memory_id)
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
            await conn.execute("UPDATE memories SET superseded_by = ? WHERE seq = ?", (new.id, old.seq))
            seq = await insert_memory_row(conn, new, context_before=old.seq)
            if seq is None:
                raise InvalidInputError(
                    "content", "is identical to another current memory of this conversation",
                    "delete one of the two, or change the wording",
                )
            stored = await memory_by_seq(conn, seq)
        return replace(old, superseded_by=new.id), stored

    async def delete_memory(self, memory_id: str) -> tuple[Memory, list[int], list[int]]:
        """Remove a memory and all its versions, with their tags, vectors (cascade) and keyword
        entries (triggers), at once: a deleted fact must not stay findable as an older version.

        The memories that had a deleted one in their context get a context without it (and lose
        their context vectors, which the backfill recomputes). Returns the named memory, the seqs
        deleted and the seqs whose context changed.
        """
        async with self._transaction("delete the memory") as conn:
            named = await memory_by_id(conn, memory_id)
            versions = await (await conn.execute(
                "WITH RECURSIVE newer(id) AS (SELECT ?1 UNION SELECT m.superseded_by FROM memories m JOIN newer"
                " ON m.id = newer.id WHERE m.superseded_by IS NOT NULL),"
                " older(id) AS (SELECT ?1 UNION SELECT m.id FROM memories m JOIN older ON m.superseded_by = older.id)"
                " SELECT seq, kind FROM memories WHERE id IN (SELECT id FROM newer UNION SELECT id FROM older)"
                " ORDER BY seq",
                (memory_id,),
            )).fetchall()
            deleted = [int(seq) for seq, _ in versions]
            facts = await facts_from(conn, deleted)
            await conn.execute(
                "DELETE FROM memories WHERE seq IN (SELECT value FROM json_each(?))", (json.dumps(deleted),)
            )
            deleted = sorted(deleted + facts)  # its facts went with it (cascade)
            changed = [] if own_context(named) else await rewrite_followers(conn, named.conversation_id, deleted)
        return named, deleted, changed

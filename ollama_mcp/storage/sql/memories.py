"""Memories: insert (one or in bulk, de-duplicated), read, revise, delete, on either SQL backend.
What differs stays in the backend's ``memories.py``: reading moments under search filters, and
keeping the times memories name."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace
from typing import Any

from ollama_mcp.domain import EmbeddingRow, Memory, SearchFilters, utc_now
from ollama_mcp.errors import ConversationClosedError, InvalidInputError, MemoryNotFoundError, MemorySupersededError
from ollama_mcp.storage.memory_rules import CONTEXT_NEIGHBOURS, SOURCE_ID, compose_context, note_digest, own_context
from ollama_mcp.storage.sql.dialect import Dialect
from ollama_mcp.storage.sql.fragments import MOMENT_COLUMNS, moment_from_row, neighbour_columns
from ollama_mcp.storage.sql.parts import SqlParts
from ollama_mcp.storage.sql.placing import claims_to_keep
from ollama_mcp.storage.sql.rows import (
    context_column,
    context_followers,
    earlier_contents,
    execute,
    facts_from,
    fetchall,
    filter_conditions,
    insert_memory_row,
    latest_version,
    lock_conversation,
    memory_by_id,
    memory_by_seq,
    memory_columns,
    memory_from_row,
    memory_where,
    rewrite_followers,
    text_kept,
)
from ollama_mcp.when import times_named


class MemoryStore(SqlParts):
    """Memories: insert (one or in bulk, de-duplicated), read, revise, delete."""

    async def insert_memory(self, memory: Memory, embeddings: Sequence[EmbeddingRow] = ()) -> tuple[Memory, bool]:
        """Insert a memory into an active conversation; returns (memory, was_duplicate).

        A note whose content already exists in the conversation is not inserted again: the
        existing memory is returned, so a client retrying a slow call never duplicates.
        """
        d = self._dialect
        async with self._transaction("store the memory") as conn:
            if await lock_conversation(conn, d, memory.conversation_id) != "active":
                raise ConversationClosedError(memory.conversation_id)
            seq = await insert_memory_row(conn, d, memory)
            if seq is None:
                existing = await memory_where(
                    conn, d,
                    f"{d.of_conversation('m')} AND m.kind = 'note' AND m.note_digest = ? AND m.superseded_by IS NULL",
                    (memory.conversation_id, note_digest(memory)),
                )
                assert existing is not None, "the unique index reported a conflict with no row"
                return existing, True
            stored = await memory_by_seq(conn, d, seq)
            await self._insert_vectors(conn, [replace(row, memory_seq=seq) for row in embeddings])
        await self._vectors_stored(embeddings)
        return stored, False

    async def insert_memories(self, memories: Sequence[Memory], vectors: Sequence[EmbeddingRow | None]) -> int:
        """Bulk insert (imports): one transaction, a few statements for the whole batch.

        Same rules as ``insert_memory`` (notes already present are skipped; each memory's context
        is its content after the two memories before it), without a round trip per row.
        ``vectors[i]`` is an optional content vector for ``memories[i]``. Returns how many were new.
        """
        if not memories:
            return 0
        d = self._dialect
        written: list[EmbeddingRow] = []
        async with self._transaction("import memories") as conn:
            rows: list[tuple[Memory, bytes | None, str | None, str]] = []
            seen: dict[str, set[bytes]] = {}
            recent: dict[str, list[str]] = {}
            for memory in memories:
                conv = memory.conversation_id
                if conv not in recent:
                    await lock_conversation(conn, d, conv)  # raises if the conversation does not exist
                    recent[conv] = await earlier_contents(conn, d, conv) if d.stores_context else []
                    seen[conv] = await _notes_present(
                        conn, d, conv, [x for m in memories if m.conversation_id == conv if (x := note_digest(m))])
                digest = note_digest(memory)
                if digest is not None:
                    if digest in seen[conv]:
                        continue
                    seen[conv].add(digest)
                context = None  # (SQLite computes it: sqlite/migrations/0019_context_view.sql)
                if d.stores_context:
                    context = memory.content
                    if not own_context(memory):
                        context = compose_context(recent[conv], memory.content)
                        recent[conv] = [*recent[conv], memory.content][-CONTEXT_NEIGHBOURS:]
                rows.append((memory, digest, context, await claims_to_keep(conn, d, memory)))
            await d.execute_many(
                conn,
                d.sql(
                    f"INSERT INTO memories (id, conversation_id{d.KEY_COLUMN}, kind, content, note_digest,"
                    f" {context_column(d)}, tags, metadata, created_at, occurred_at, spoken_of, claims)"
                    f" VALUES (?, ?{d.KEY_VALUE}, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
                ),
                [(m.id, m.conversation_id, m.kind, m.content, digest, context,
                  d.tags(m.tags), d.json(m.metadata),
                  m.created_at, m.occurred_at, times_named(m.content, m.occurred_at), claims)
                 for m, digest, context, claims in rows],
            )
            ids = d.listed([m.id for m, _, _, _ in rows])
            seqs = {
                row[0]: int(row[1])
                for row in await fetchall(conn, d, f"SELECT id, seq FROM memories WHERE {d.in_list('id')}", (ids,))
            }
            await d.keep_tags(conn, [(seqs[m.id], tag) for m, _, _, _ in rows for tag in m.tags])
            given = {m.id: v for m, v in zip(memories, vectors, strict=True) if v is not None}
            written = [replace(given[m.id], memory_seq=seqs[m.id]) for m, _, _, _ in rows if m.id in given]
            await self._insert_vectors(conn, written)
        await self._vectors_stored(written)
        return len(rows)

    async def name_times(self, limit: int) -> int:
        """Keep the times the next ``limit`` memories name that were stored without (imports, older
        schemas); how many were read."""
        rows = await self._fetchall(
            self._dialect.sql(
                "SELECT seq, content, occurred_at FROM memories WHERE spoken_of IS NULL ORDER BY seq LIMIT ?"
            ),
            (limit,), "read the memories whose times are not kept yet",
        )
        if rows:  # parsed outside the write transaction; a memory redacted meanwhile keeps its ""
            named = [(int(seq), times_named(content, occurred_at)) for seq, content, occurred_at in rows]
            async with self._transaction("keep the times memories name") as conn:
                await self._dialect.keep_times(conn, named)
        return len(rows)

    async def _rows_of(self, columns: str, seqs: Iterable[int], action: str) -> list[Any]:
        """``columns`` of the memories (``m``) ``seqs``, in no particular order."""
        wanted = list(dict.fromkeys(seqs))
        if not wanted:
            return []
        d = self._dialect
        return await self._fetchall(
            d.sql(f"SELECT {columns} FROM memories m WHERE {d.in_list('m.seq')}"), (d.listed(wanted),), action
        )

    async def memories_by_seq(self, seqs: Iterable[int]) -> dict[int, Memory]:
        rows = await self._rows_of(memory_columns(self._dialect), seqs, "read memories")
        return {int(row[0]): memory_from_row(self._dialect, row) for row in rows}

    async def moments_by_seq(self, seqs: Iterable[int]) -> dict[int, tuple[str, str]]:
        rows = await self._rows_of(MOMENT_COLUMNS, seqs, "read when memories happened")
        return dict(moment_from_row(row) for row in rows)

    async def adjacent_seqs(self, seqs: Iterable[int]) -> dict[int, tuple[int | None, int | None]]:
        rows = await self._rows_of(f"m.seq, {neighbour_columns(self._dialect)}", seqs, "read neighbouring memories")
        return {int(row[0]): (row[1], row[2]) for row in rows}

    async def get_memory(self, memory_id: str) -> Memory:
        rows = await self._fetchall(
            self._dialect.sql(f"SELECT {memory_columns(self._dialect)} FROM memories m WHERE m.id = ?"), (memory_id,),
            "read the memory",
        )
        if not rows:
            raise MemoryNotFoundError(memory_id)
        return memory_from_row(self._dialect, rows[0])

    async def listed_memories(self, filters: SearchFilters, limit: int) -> list[Memory]:
        """The memories ``filters`` allow, newest first (when they happened, then when stored): what
        a search with no query words lists."""
        d = self._dialect
        conditions, params = filter_conditions(d, filters)
        where = " AND ".join([*conditions, text_kept(d, "m.")])
        newest = "ORDER BY m.occurred_at DESC, m.seq DESC"
        rows = await self._fetchall(
            d.sql(f"SELECT {memory_columns(d)} FROM memories m WHERE {where} {newest} LIMIT ?"), (*params, limit),
            "list the memories",
        )
        return [memory_from_row(d, row) for row in rows]

    async def searched_counts(self, filters: SearchFilters) -> tuple[int, dict[str, int]]:
        """What a search in ``filters`` looked through: how many conversations, and how many
        memories of each kind (what a search that found nothing says it searched)."""
        d = self._dialect
        conditions, params = filter_conditions(d, filters)
        where = " AND ".join([*conditions, text_kept(d, "m.")])
        rows = await self._fetchall(
            d.sql(f"SELECT m.kind, count(*) FROM memories m WHERE {where}"
                  " GROUP BY m.kind"), params, "count the memories searched",
        )
        conversations = await self._fetchall(
            d.sql(f"SELECT count(DISTINCT m.conversation_id) FROM memories m WHERE {where}"), params,
            "count the conversations searched",
        )
        return int(conversations[0][0]), {str(row[0]): int(row[1]) for row in rows}

    async def deleted_imports(self, ids: Sequence[str]) -> set[str]:
        """Which of ``ids`` (of imported conversations and memories) the user deleted."""
        if not ids:
            return set()
        d = self._dialect
        rows = await self._fetchall(
            d.sql(f"SELECT id FROM deleted_imports WHERE {d.in_list('id')}"), (d.listed(ids),),
            "read what was deleted",
        )
        return {str(row[0]) for row in rows}

    async def restore_deleted_imports(self, ids: Sequence[str]) -> int:
        """Let an import bring ``ids`` back (``import --restore-deleted``); how many were deleted."""
        if not ids:
            return 0
        d = self._dialect
        async with self._transaction("forget what was deleted") as conn:
            return await execute(conn, d, f"DELETE FROM deleted_imports WHERE {d.in_list('id')}", (d.listed(ids),))

    async def update_memory(self, memory_id: str, revise: Callable[[Memory], Memory]) -> tuple[Memory, Memory]:
        """Store ``revise(old)`` as the new version of ``memory_id``; the old row stays, marked
        ``superseded_by`` the new one. Returns (old, new), in one transaction.

        The new version takes the old one's place in the conversation: its context is built from
        the memories before the old version, not from the latest ones.
        """
        d = self._dialect
        async with self._transaction("update the memory") as conn:
            await lock_conversation(conn, d, (await memory_by_id(conn, d, memory_id)).conversation_id)
            old = await memory_by_id(conn, d, memory_id)  # again, under the lock
            if old.superseded_by is not None:
                raise MemorySupersededError(memory_id, await latest_version(conn, d, memory_id))
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
            await execute(conn, d, "UPDATE memories SET superseded_by = ? WHERE seq = ?", (new.id, old.seq))
            seq = await insert_memory_row(conn, d, new, context_before=old.seq)
            if seq is None:
                raise InvalidInputError(
                    "content", "is identical to another current memory of this conversation",
                    "delete one of the two, or change the wording",
                )
            stored = await memory_by_seq(conn, d, seq)
        return replace(old, superseded_by=new.id), stored

    async def delete_memory(self, memory_id: str) -> tuple[Memory, list[int], list[int]]:
        """Remove a memory and all its versions, with their tags, vectors (cascade) and keyword
        entries, at once: a deleted fact must not stay findable as an older version.

        The memories that had a deleted one in their context get a context without it (and lose
        their context vectors, which the backfill recomputes). Returns the named memory, the seqs
        deleted and the seqs whose context changed.
        """
        d = self._dialect
        async with self._transaction("delete the memory") as conn:
            await lock_conversation(conn, d, (await memory_by_id(conn, d, memory_id)).conversation_id)
            named = await memory_by_id(conn, d, memory_id)  # again, under the lock
            rows = await fetchall(
                conn, d,
                "WITH RECURSIVE newer(id) AS (SELECT CAST(? AS TEXT) UNION SELECT m.superseded_by FROM memories m"
                " JOIN newer ON m.id = newer.id WHERE m.superseded_by IS NOT NULL),"
                " older(id) AS (SELECT CAST(? AS TEXT) UNION SELECT m.id FROM memories m"
                " JOIN older ON m.superseded_by = older.id)"
                " SELECT seq FROM memories WHERE id IN (SELECT id FROM newer UNION SELECT id FROM older)",
                (memory_id, memory_id),
            )
            versions = [int(row[0]) for row in rows]
            deleted = sorted(versions + await facts_from(conn, d, versions))  # its facts go with it (cascade)
            followers = {} if own_context(named) else await context_followers(conn, d, named.conversation_id, deleted)
            await execute(  # an imported turn stays deleted when its export is imported again
                conn, d,
                f"INSERT INTO deleted_imports (id, deleted_at) SELECT id, ? FROM memories WHERE {d.in_list('seq')}"
                f" AND {d.json_text('metadata', SOURCE_ID)} IS NOT NULL ON CONFLICT DO NOTHING",
                (utc_now(), d.listed(versions)),
            )
            await execute(conn, d, f"DELETE FROM memories WHERE {d.in_list('seq')}", (d.listed(versions),))
            changed = await rewrite_followers(conn, d, followers)
        return named, deleted, changed


# Digests asked for in one statement: one placeholder each (a JSON list cannot carry bytes), well
# under SQLite's 32,766 and PostgreSQL's 65,535 parameters.
_DIGESTS_A_STATEMENT = 500


async def _notes_present(conn: Any, d: Dialect, conversation_id: str, digests: Sequence[bytes]) -> set[bytes]:
    """Which of ``digests`` a current note of the conversation already has (the unique index
    ``memories_note_once`` answers)."""
    found: set[bytes] = set()
    unique = sorted(set(digests))
    for start in range(0, len(unique), _DIGESTS_A_STATEMENT):
        chunk = unique[start:start + _DIGESTS_A_STATEMENT]
        rows = await fetchall(
            conn, d,
            f"SELECT note_digest FROM memories WHERE {d.of_conversation('')} AND kind = 'note'"
            f" AND superseded_by IS NULL AND note_digest IN ({', '.join('?' * len(chunk))})",
            (conversation_id, *chunk),
        )
        found.update(bytes(row[0]) for row in rows)
    return found

"""Conversations: create, read, list, end, and delete (retention)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from psycopg.types.json import Jsonb

from ollama_mcp.domain import Conversation, ConversationQuery, Memory
from ollama_mcp.errors import ConversationClosedError, ConversationNotFoundError
from ollama_mcp.storage.postgres.base import PgStoreBase
from ollama_mcp.storage.postgres.rows import (
    CONVERSATION_COLUMNS,
    conversation_from_row,
    enqueue_job_row,
    insert_memory_row,
    lock_conversation,
)
from ollama_mcp.storage.records import like_escape


class ConversationStore(PgStoreBase):
    """Conversations: create, read, list, end, and delete (retention)."""

    async def create_conversation(
        self, conversation_id: str, name: str | None, metadata: dict[str, Any], anonymous: bool, created_at: str,
        expires_at: str | None = None, follows: str | None = None,
    ) -> Conversation:
        async with self._transaction("create the conversation") as conn:
            if follows is not None and not await (await conn.execute(
                "SELECT 1 FROM conversations WHERE id = %s FOR KEY SHARE", (follows,)
            )).fetchone():
                raise ConversationNotFoundError(follows)
            cursor = await conn.execute(
                "INSERT INTO conversations (id, name, anonymous, metadata, created_at, expires_at)"
                " VALUES (%s, %s, %s, %s, %s, %s) RETURNING key",
                (conversation_id, name, anonymous, Jsonb(metadata), created_at, expires_at),
            )
            row = await cursor.fetchone()
            if follows is not None:
                await conn.execute(
                    "INSERT INTO conversation_relations (conversation_id, related_id, kind, created_at)"
                    " VALUES (%s, %s, 'follow_up', %s)",
                    (conversation_id, follows, created_at),
                )
        return Conversation(
            key=int(row[0]) if row else 0, id=conversation_id, name=name, status="active", anonymous=anonymous,
            created_at=created_at, metadata=metadata, expires_at=expires_at,
        )

    async def get_conversation(self, conversation_id: str, *, count_memories: bool = False) -> Conversation:
        """The conversation, with its memory count (a column here: always filled)."""
        rows = await self._fetchall(
            f"SELECT {CONVERSATION_COLUMNS} FROM conversations c WHERE c.id = %s", (conversation_id,),
            "read the conversation",
        )
        if not rows:
            raise ConversationNotFoundError(conversation_id)
        return conversation_from_row(rows[0])

    async def list_conversations(self, query: ConversationQuery) -> list[Conversation]:
        """The conversations ``query`` selects, with their counts (columns kept by triggers) and
        last activity (an index lookup per conversation on (conversation_id, created_at))."""
        where: list[str] = ["true"]
        params: list[Any] = []
        if query.status:
            where.append("c.status = %s")
            params.append(query.status)
        if query.name_contains:
            where.append("c.name ILIKE %s")  # backslash is LIKE's escape character by default
            params.append(f"%{like_escape(query.name_contains)}%")
        for key, value in query.metadata:
            where.append("c.metadata ->> %s = %s")
            params += [key, value]
        if query.ids is not None:
            where.append("c.id = ANY(%s)")
            params.append(list(query.ids))
        first = "last_activity" if query.order == "activity" else "created_at"
        rows = await self._fetchall(
            f"SELECT {CONVERSATION_COLUMNS}, c.message_count, t.last_activity"
            " FROM (SELECT c.key AS k, c.created_at, greatest(c.created_at, coalesce(c.ended_at, ''),"
            " coalesce((SELECT max(m.created_at) FROM memories m WHERE m.conversation_id = c.id), ''))"
            f" AS last_activity FROM conversations c WHERE {' AND '.join(where)}"
            f" ORDER BY {first} DESC, c.key DESC LIMIT %s) t"
            f" JOIN conversations c ON c.key = t.k ORDER BY t.{first} DESC, t.k DESC",
            [*params, query.limit], "list conversations",
        )
        return [conversation_from_row(row) for row in rows]

    async def end_conversation(
        self, conversation_id: str, ended_at: str, summary_memory: Memory | None, *, queue_summary: bool,
        queue_facts: bool = False,
    ) -> tuple[Conversation, int]:
        """Mark the conversation completed, in one transaction with what becomes of its summary
        (stored, or a summarize job queued when there is anything to summarize)."""
        async with self._transaction("end the conversation") as conn:
            if await lock_conversation(conn, conversation_id) != "active":
                raise ConversationClosedError(conversation_id)
            summary_status = "none"
            if summary_memory is not None:
                await insert_memory_row(conn, summary_memory)
                summary_status = "given"
                await enqueue_job_row(conn, "relate", conversation_id, ended_at)  # link it to ones like it
            elif queue_summary:
                cursor = await conn.execute(
                    "SELECT 1 FROM memories WHERE conversation_id = %s AND kind IN ('note', 'message') LIMIT 1",
                    (conversation_id,),
                )
                if await cursor.fetchone():
                    await enqueue_job_row(conn, "summarize", conversation_id, ended_at)
                    summary_status = "pending"
            if queue_facts:
                await enqueue_job_row(conn, "facts", conversation_id, ended_at)
            cursor = await conn.execute(
                "UPDATE conversations SET status = 'completed', ended_at = %s, summary = %s, summary_status = %s"
                f" WHERE id = %s RETURNING {CONVERSATION_COLUMNS.replace('c.', '')}",
                (ended_at, summary_memory.content if summary_memory else None, summary_status, conversation_id),
            )
            row = await cursor.fetchone()
            # No client continues an ended conversation (deleting one cascades the same).
            await conn.execute("DELETE FROM current_conversations WHERE conversation_id = %s", (conversation_id,))
        assert row is not None, "the row locked above"
        ended = conversation_from_row(row)
        return ended, ended.memory_count

    async def conversation_ids(self) -> list[str]:
        rows = await self._fetchall("SELECT id FROM conversations ORDER BY created_at, key", (), "list conversations")
        return [row[0] for row in rows]

    async def change_marks(self, conversation_ids: Sequence[str]) -> dict[str, tuple[Any, ...]]:
        """For each of the conversations that exists, a mark that changes whenever it or its
        memories change, whichever instance writes (see the SQLite store)."""
        rows = await self._fetchall(
            "SELECT c.id, c.status, c.summary_status, c.summarized_through, count(m.seq), max(m.seq),"
            " (SELECT count(*) + coalesce(sum(r.score), 0) FROM conversation_relations r"
            "  WHERE r.conversation_id = c.id OR r.related_id = c.id)"
            " FROM conversations c LEFT JOIN memories m ON m.conversation_id = c.id"
            " WHERE c.id = ANY(%s) GROUP BY c.id",
            (list(conversation_ids),), "read what changed",
        )
        return {row[0]: tuple(row[1:]) for row in rows}

    async def conversations_mark(self) -> tuple[Any, ...]:
        """A mark that changes whenever a conversation is created, deleted or ended."""
        rows = await self._fetchall(
            "SELECT count(*), coalesce(max(key), 0), count(*) FILTER (WHERE status = 'completed') FROM conversations",
            (), "read what changed",
        )
        return tuple(rows[0])

    async def has_other_conversations(self, conversation_id: str) -> bool:
        rows = await self._fetchall(
            "SELECT EXISTS (SELECT 1 FROM conversations WHERE id <> %s)", (conversation_id,), "list conversations"
        )
        return bool(rows[0][0])

    async def expired_conversations(self, now: str, inactive_before: str | None) -> list[str]:
        """Conversations past their own expiry, or (with ``inactive_before``) untouched since then."""
        rows = await self._fetchall(
            "SELECT id FROM conversations WHERE expires_at IS NOT NULL AND expires_at <= %(now)s"
            " UNION SELECT c.id FROM conversations c WHERE %(before)s::text IS NOT NULL"
            " AND greatest(c.created_at, coalesce(c.ended_at, ''),"
            " coalesce((SELECT max(m.created_at) FROM memories m WHERE m.conversation_id = c.id), '')) < %(before)s",
            {"now": now, "before": inactive_before}, "find expired conversations",
        )
        return [row[0] for row in rows]

    async def memory_total(self, conversation_id: str) -> int:
        rows = await self._fetchall(
            "SELECT count(*) FROM memories WHERE conversation_id = %s", (conversation_id,), "count memories"
        )
        return int(rows[0][0])

    async def memory_timeline(self) -> list[tuple[str, str, int]]:
        rows = await self._fetchall(
            "SELECT conversation_id, substr(created_at, 1, 10) AS day, count(*) FROM memories"
            " WHERE kind = 'note' AND superseded_by IS NULL GROUP BY conversation_id, day ORDER BY day",
            (), "count memories by day",
        )
        return [(row[0], row[1], int(row[2])) for row in rows]

    async def delete_conversation(self, conversation_id: str) -> list[int]:
        """Delete a conversation with everything that belongs to it (foreign-key cascades), in one
        transaction. Returns the memory seqs."""
        async with self._transaction("delete the conversation") as conn:
            await lock_conversation(conn, conversation_id)
            cursor = await conn.execute("SELECT seq FROM memories WHERE conversation_id = %s", (conversation_id,))
            seqs = [int(row[0]) for row in await cursor.fetchall()]
            await conn.execute("DELETE FROM conversations WHERE id = %s", (conversation_id,))
        return seqs

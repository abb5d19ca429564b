"""Conversations: create, read, list, end, and delete (retention)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from ollama_mcp.domain import Conversation, ConversationQuery, Memory
from ollama_mcp.errors import ConversationClosedError, ConversationNotFoundError
from ollama_mcp.storage.records import like_escape
from ollama_mcp.storage.sqlite.base import StoreBase
from ollama_mcp.storage.sqlite.rows import (
    CONVERSATION_COLUMNS,
    conversation_from_row,
    conversation_status,
    dump_json,
    enqueue_job_row,
    insert_memory_row,
)


class ConversationStore(StoreBase):
    """Conversations: create, read, list, end, and delete (retention)."""

    async def create_conversation(
        self, conversation_id: str, name: str | None, metadata: dict[str, Any], anonymous: bool, created_at: str,
        expires_at: str | None = None, follows: str | None = None,
    ) -> Conversation:
        async with self._transaction("create the conversation") as conn:
            if follows is not None:
                await conversation_status(conn, follows)  # ConversationNotFoundError when there is none
            cursor = await conn.execute(
                "INSERT INTO conversations (id, name, anonymous, metadata, created_at, expires_at)"
                " VALUES (?, ?, ?, ?, ?, ?)",
                (conversation_id, name, int(anonymous), dump_json(metadata), created_at, expires_at),
            )
            key = cursor.lastrowid
            if follows is not None:
                await conn.execute(
                    "INSERT INTO conversation_relations (conversation_id, related_id, kind, created_at)"
                    " VALUES (?, ?, 'follow_up', ?)",
                    (conversation_id, follows, created_at),
                )
        return Conversation(
            key=int(key or 0), id=conversation_id, name=name, status="active", anonymous=anonymous,
            created_at=created_at, metadata=metadata, expires_at=expires_at,
        )

    async def get_conversation(self, conversation_id: str, *, count_memories: bool = False) -> Conversation:
        """The conversation (``memory_count`` is filled only when asked: it costs a count)."""
        count = (
            "(SELECT count(*) FROM memories m WHERE m.conversation_id = c.id AND m.kind = 'note' AND m.superseded_by"
            " IS NULL)"
            if count_memories
            else "0"
        )
        rows = await self._fetchall(
            f"SELECT {CONVERSATION_COLUMNS}, {count} FROM conversations c WHERE c.id = ?",
            (conversation_id,),
            "read the conversation",
        )
        if not rows:
            raise ConversationNotFoundError(conversation_id)
        return conversation_from_row(rows[0])

    async def list_conversations(self, query: ConversationQuery) -> list[Conversation]:
        """The conversations ``query`` selects, with their counts and last activity. The order is
        found first (the last memory's time is an index lookup on (conversation_id, created_at));
        counts are computed for the chosen page only."""
        where: list[str] = ["1"]
        params: list[Any] = []
        if query.status:
            where.append("c.status = ?")
            params.append(query.status)
        if query.name_contains:
            where.append("c.name LIKE ? ESCAPE '\\'")  # case-insensitive for ASCII, as SQLite's LIKE is
            params.append(f"%{like_escape(query.name_contains)}%")
        for key, value in query.metadata:
            where.append(
                "EXISTS (SELECT 1 FROM json_each(c.metadata) j WHERE j.key = ? AND CASE j.type"
                " WHEN 'true' THEN 'true' WHEN 'false' THEN 'false' ELSE CAST(j.value AS TEXT) END = ?)"
            )
            params += [key, value]
        if query.ids is not None:
            where.append(f"c.id IN ({', '.join('?' * len(query.ids))})" if query.ids else "0")
            params += query.ids
        first = "last_activity" if query.order == "activity" else "created_at"
        rows = await self._fetchall(
            f"SELECT {CONVERSATION_COLUMNS},"
            " (SELECT count(*) FROM memories m WHERE m.conversation_id = c.id AND m.kind = 'note'"
            " AND m.superseded_by IS NULL),"
            " (SELECT count(*) FROM memories m WHERE m.conversation_id = c.id AND m.kind = 'message'),"
            " t.last_activity"
            " FROM (SELECT c.rowid AS r, c.created_at, max(c.created_at, coalesce(c.ended_at, ''),"
            " coalesce((SELECT max(m.created_at) FROM memories m WHERE m.conversation_id = c.id), ''))"
            f" AS last_activity FROM conversations c WHERE {' AND '.join(where)}"
            f" ORDER BY {first} DESC, c.rowid DESC LIMIT ?) t"
            f" JOIN conversations c ON c.rowid = t.r ORDER BY t.{first} DESC, t.r DESC",
            [*params, query.limit],
            "list conversations",
        )
        return [conversation_from_row(row) for row in rows]

    async def end_conversation(
        self, conversation_id: str, ended_at: str, summary_memory: Memory | None, *, queue_summary: bool,
        queue_facts: bool = False,
    ) -> tuple[Conversation, int]:
        """Mark the conversation completed, in one transaction with what becomes of its summary:
        the given one stored (also as a searchable memory), or a summarize job queued when
        ``queue_summary`` and the conversation has anything to summarize."""
        async with self._transaction("end the conversation") as conn:
            status = await conversation_status(conn, conversation_id)
            if status != "active":
                raise ConversationClosedError(conversation_id)
            summary_status = "none"
            if summary_memory is not None:
                await insert_memory_row(conn, summary_memory)
                summary_status = "given"
                await enqueue_job_row(conn, "relate", conversation_id, ended_at)  # link it to ones like it
            elif queue_summary:
                has_content = await (await conn.execute(
                    "SELECT 1 FROM memories WHERE conversation_id = ? AND kind IN ('note', 'message') LIMIT 1",
                    (conversation_id,),
                )).fetchone()
                if has_content:
                    await enqueue_job_row(conn, "summarize", conversation_id, ended_at)
                    summary_status = "pending"
            if queue_facts:
                await enqueue_job_row(conn, "facts", conversation_id, ended_at)
            await conn.execute(
                "UPDATE conversations SET status = 'completed', ended_at = ?, summary = ?, summary_status = ?"
                " WHERE id = ?",
                (ended_at, summary_memory.content if summary_memory else None, summary_status, conversation_id),
            )
            # No client continues an ended conversation (deleting one cascades the same).
            await conn.execute("DELETE FROM current_conversations WHERE conversation_id = ?", (conversation_id,))
            count = await (await conn.execute(
                "SELECT count(*) FROM memories WHERE conversation_id = ? AND kind = 'note' AND superseded_by IS NULL",
                (conversation_id,),
            )).fetchone()
        return await self.get_conversation(conversation_id), int(count[0] if count else 0)

    async def conversation_ids(self) -> list[str]:
        rows = await self._fetchall(
            "SELECT id FROM conversations ORDER BY created_at, rowid", (), "list conversations"
        )
        return [row[0] for row in rows]

    async def change_marks(self, conversation_ids: Sequence[str]) -> dict[str, tuple[Any, ...]]:
        """For each of the conversations that exists, a mark that changes whenever it or its
        memories change, whoever writes: status, summary state, how far it is summarized, its
        memories' count and newest seq (a redaction comes with a new summary), and its links to
        other conversations."""
        rows = await self._fetchall(
            "SELECT c.id, c.status, c.summary_status, c.summarized_through, count(m.seq), max(m.seq),"
            " (SELECT count(*) + coalesce(sum(r.score), 0) FROM conversation_relations r"
            "  WHERE r.conversation_id = c.id OR r.related_id = c.id)"
            " FROM conversations c LEFT JOIN memories m ON m.conversation_id = c.id"
            " WHERE c.id IN (SELECT value FROM json_each(?)) GROUP BY c.id",
            (json.dumps(list(conversation_ids)),), "read what changed",
        )
        return {row[0]: tuple(row[1:]) for row in rows}

    async def conversations_mark(self) -> tuple[Any, ...]:
        """A mark that changes whenever a conversation is created, deleted or ended."""
        rows = await self._fetchall(
            "SELECT count(*), coalesce(max(rowid), 0), coalesce(sum(status = 'completed'), 0) FROM conversations",
            (), "read what changed",
        )
        return tuple(rows[0])

    async def has_other_conversations(self, conversation_id: str) -> bool:
        rows = await self._fetchall(
            "SELECT EXISTS (SELECT 1 FROM conversations WHERE id <> ?)", (conversation_id,), "list conversations"
        )
        return bool(rows[0][0])

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

    async def memory_total(self, conversation_id: str) -> int:
        rows = await self._fetchall(
            "SELECT count(*) FROM memories WHERE conversation_id = ?", (conversation_id,), "count memories"
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
        """Delete a conversation with its memories, messages, tags, vectors, keyword entries and
        jobs in one transaction (foreign-key cascades and triggers). Returns the memory seqs."""
        async with self._transaction("delete the conversation") as conn:
            await conversation_status(conn, conversation_id)
            rows = await (await conn.execute(
                "SELECT seq FROM memories WHERE conversation_id = ?", (conversation_id,)
            )).fetchall()
            await conn.execute("DELETE FROM conversations WHERE id = ?", (conversation_id,))
        return [int(row[0]) for row in rows]

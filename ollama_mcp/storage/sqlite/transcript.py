"""A conversation's transcript and snapshots: messages, its memories in order, export and import."""

from __future__ import annotations

import json
from collections.abc import Sequence

from ollama_mcp.domain import Conversation, Memory, MemoryKind, Participant
from ollama_mcp.errors import ConversationClosedError, ConversationNotFoundError
from ollama_mcp.storage.records import fact_source, is_retry
from ollama_mcp.storage.sqlite.base import StoreBase
from ollama_mcp.storage.sqlite.rows import (
    CONTEXT_NEIGHBOURS,
    CONVERSATION_COLUMNS,
    MEMORY_COLUMNS,
    SOURCE_SEQ,
    compose_context,
    content_hash,
    conversation_from_row,
    conversation_status,
    dump_json,
    earlier_contents,
    insert_memory_row,
    memory_by_seq,
    memory_from_row,
    own_context,
)


class TranscriptStore(StoreBase):
    """A conversation's transcript and snapshots: messages, its memories in order, export and import."""

    async def messages(self, conversation_id: str, limit: int, before_seq: int | None = None) -> list[Memory]:
        """The latest ``limit`` messages before ``before_seq`` (default: all), oldest first."""
        rows = await self._fetchall(
            f"SELECT {MEMORY_COLUMNS} FROM memories m WHERE m.conversation_id = ? AND m.kind = 'message'"
            " AND m.seq < ? ORDER BY m.seq DESC LIMIT ?",
            (conversation_id, before_seq if before_seq is not None else 2**62, limit),
            "read the conversation's messages",
        )
        return [memory_from_row(row) for row in reversed(rows)]

    async def participants(self, conversation_id: str) -> list[Participant]:
        """Who wrote the conversation's messages, in the order they first spoke."""
        rows = await self._fetchall(
            "SELECT coalesce(actor, role), role, count(*), sum(json_extract(metadata, '$.to') IS NOT NULL),"
            " max(created_at) FROM memories WHERE conversation_id = ? AND kind = 'message'"
            " GROUP BY 1, 2 ORDER BY min(seq)", (conversation_id,), "read the conversation's participants",
        )
        return [
            Participant(name, role, int(count), int(addressed), last) for name, role, count, addressed, last in rows
        ]

    async def insert_messages(self, messages: Sequence[Memory], retry_since: str) -> tuple[list[Memory], bool]:
        """Append ``messages`` (of one conversation, which must be active) in order, in one
        transaction; returns (the messages, was_retry). When the conversation's latest messages
        are these same turns, the first stored at or after ``retry_since``, they are a client's
        retry: nothing is added and the stored ones are returned."""
        conversation_id = messages[0].conversation_id
        async with self._transaction("record the messages") as conn:
            if await conversation_status(conn, conversation_id) != "active":
                raise ConversationClosedError(conversation_id)
            latest = await (await conn.execute(
                f"SELECT {MEMORY_COLUMNS} FROM memories m WHERE m.conversation_id = ? AND m.kind = 'message'"
                " ORDER BY m.seq DESC LIMIT ?", (conversation_id, len(messages) + 1),
            )).fetchall()
            recent = [memory_from_row(row) for row in reversed(list(latest))]
            if is_retry(recent, messages, retry_since):
                return recent[-len(messages):], True
            stored = []
            for message in messages:
                seq = await insert_memory_row(conn, message)
                assert seq is not None, "only notes are de-duplicated by the unique index"
                stored.append(await memory_by_seq(conn, seq))
        return stored, False

    async def conversation_memories(
        self, conversation_id: str, *, after_seq: int = 0, limit: int = -1, kinds: Sequence[MemoryKind] = ()
    ) -> list[Memory]:
        """Memories of every version (of ``kinds``, default all) after ``after_seq``, oldest first."""
        kind_sql = "AND m.kind IN (SELECT value FROM json_each(?3))" if kinds else "AND ?3 IS NULL"
        rows = await self._fetchall(
            f"SELECT {MEMORY_COLUMNS} FROM memories m WHERE m.conversation_id = ?1 AND m.seq > ?2 {kind_sql}"
            " ORDER BY m.seq LIMIT ?4",
            (conversation_id, after_seq, json.dumps(list(kinds)) if kinds else None, limit),
            "read the conversation",
        )
        return [memory_from_row(row) for row in rows]

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
                f"SELECT {CONVERSATION_COLUMNS} FROM conversations c WHERE c.id = ?", (conversation_id,)
            )).fetchone()
            if row is None:
                raise ConversationNotFoundError(conversation_id)
            total = await (await conn.execute(
                "SELECT count(*) FROM memories WHERE conversation_id = ?", (conversation_id,)
            )).fetchone()
            rows = await (await conn.execute(
                f"SELECT {MEMORY_COLUMNS} FROM memories m WHERE m.conversation_id = ? ORDER BY m.seq"
                " LIMIT ? OFFSET ?", (conversation_id, limit, offset),
            )).fetchall()
        return conversation_from_row(row), [memory_from_row(r) for r in rows], int(total[0]) if total else 0

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
                 dump_json(conversation.metadata), conversation.summary, conversation.summary_status,
                 conversation.rolling_summary, conversation.created_at, conversation.ended_at,
                 conversation.expires_at),
            )
            new_conversation = cursor.rowcount > 0
            recent = await earlier_contents(conn, conversation.id)
            rows = []
            for m in memories:
                context = m.content
                if not own_context(m):
                    context = compose_context(recent, m.content)
                    recent = [*recent, m.content][-CONTEXT_NEIGHBOURS:]
                rows.append((
                    m.id, conversation.id, m.kind, m.role, m.actor,
                    json.dumps(list(m.tool_calls)) if m.tool_calls else None, m.tool_call_id, m.content,
                    content_hash(m.content), context, json.dumps(list(m.tags)), dump_json(m.metadata), m.created_at,
                    m.superseded_by, m.occurred_at, fact_source(m),
                ))
            count_sql = "SELECT count(*) FROM memories WHERE conversation_id = ?"
            before = (await (await conn.execute(count_sql, (conversation.id,))).fetchone() or (0,))[0]
            await conn.executemany(
                "INSERT OR IGNORE INTO memories (id, conversation_id, kind, role, actor, tool_calls, tool_call_id,"
                " content, content_hash, context, tags, metadata, created_at, superseded_by, occurred_at, source_seq)"
                f" VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, {SOURCE_SEQ})",
                rows,
            )
            after = (await (await conn.execute(count_sql, (conversation.id,))).fetchone() or (0,))[0]
            await conn.execute(
                "INSERT OR IGNORE INTO memory_tags (memory_seq, tag) SELECT m.seq, t.value FROM memories m,"
                " json_each(m.tags) t WHERE m.conversation_id = ?",
                (conversation.id,),
            )
            # Facts were extracted at least through the last memory one came from.
            await conn.execute(
                "UPDATE conversations SET facts_through = max(facts_through, (SELECT coalesce(max(source_seq), 0)"
                " FROM memories WHERE conversation_id = ?1 AND kind = 'fact')) WHERE id = ?1", (conversation.id,),
            )
            if summarized_through_id is not None:
                await conn.execute(
                    "UPDATE conversations SET summarized_through = (SELECT seq FROM memories WHERE id = ?)"
                    " WHERE id = ? AND summarized_through = 0 AND EXISTS (SELECT 1 FROM memories WHERE id = ?)",
                    (summarized_through_id, conversation.id, summarized_through_id),
                )
        return new_conversation, int(after) - int(before)

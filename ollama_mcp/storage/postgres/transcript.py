"""A conversation's transcript and snapshots: messages, its memories in order, export and import."""

from __future__ import annotations

from collections.abc import Sequence

from psycopg.types.json import Jsonb

from ollama_mcp.domain import Conversation, Memory, MemoryKind, Participant
from ollama_mcp.errors import ConversationClosedError, ConversationNotFoundError
from ollama_mcp.storage.postgres.base import PgStoreBase
from ollama_mcp.storage.postgres.rows import (
    CONVERSATION_COLUMNS,
    MEMORY_COLUMNS,
    SOURCE_SEQ,
    conversation_from_row,
    earlier_contents,
    execute_many,
    insert_memory_row,
    lock_conversation,
    memory_by_seq,
    memory_from_row,
)
from ollama_mcp.storage.records import (
    CONTEXT_NEIGHBOURS,
    compose_context,
    content_hash,
    fact_source,
    is_retry,
    own_context,
)


class TranscriptStore(PgStoreBase):
    """A conversation's transcript and snapshots: messages, its memories in order, export and import."""

    async def messages(self, conversation_id: str, limit: int, before_seq: int | None = None) -> list[Memory]:
        """The latest ``limit`` messages before ``before_seq`` (default: all), oldest first."""
        rows = await self._fetchall(
            f"SELECT {MEMORY_COLUMNS} FROM memories m WHERE m.conversation_id = %s AND m.kind = 'message'"
            " AND m.seq < %s ORDER BY m.seq DESC LIMIT %s",
            (conversation_id, before_seq if before_seq is not None else 2**62, limit),
            "read the conversation's messages",
        )
        return [memory_from_row(row) for row in reversed(rows)]

    async def participants(self, conversation_id: str) -> list[Participant]:
        """Who wrote the conversation's messages, in the order they first spoke."""
        rows = await self._fetchall(
            "SELECT coalesce(actor, role), role, count(*), count(*) FILTER (WHERE metadata ? 'to'), max(created_at)"
            " FROM memories WHERE conversation_id = %s AND kind = 'message' GROUP BY 1, 2 ORDER BY min(seq)",
            (conversation_id,), "read the conversation's participants",
        )
        return [
            Participant(name, role, int(count), int(addressed), last) for name, role, count, addressed, last in rows
        ]

    async def insert_messages(self, messages: Sequence[Memory], retry_since: str) -> tuple[list[Memory], bool]:
        """Append ``messages`` in order, in one transaction; a client's retry adds nothing (as
        the SQLite store's ``insert_messages``). The conversation's row lock orders concurrent
        retries, so the second sees the first's messages."""
        conversation_id = messages[0].conversation_id
        async with self._transaction("record the messages") as conn:
            if await lock_conversation(conn, conversation_id) != "active":
                raise ConversationClosedError(conversation_id)
            cursor = await conn.execute(
                f"SELECT {MEMORY_COLUMNS} FROM memories m WHERE m.conversation_id = %s AND m.kind = 'message'"
                " ORDER BY m.seq DESC LIMIT %s", (conversation_id, len(messages) + 1),
            )
            recent = [memory_from_row(row) for row in reversed(await cursor.fetchall())]
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
        rows = await self._fetchall(
            f"SELECT {MEMORY_COLUMNS} FROM memories m WHERE m.conversation_id = %(conv)s AND m.seq > %(after)s"
            " AND (%(kinds)s::text[] IS NULL OR m.kind = ANY(%(kinds)s)) ORDER BY m.seq LIMIT %(limit)s",
            {"conv": conversation_id, "after": after_seq, "kinds": list(kinds) if kinds else None,
             "limit": None if limit < 0 else limit},
            "read the conversation",
        )
        return [memory_from_row(row) for row in rows]

    async def transcript_size(self, conversation_id: str, after_seq: int) -> tuple[int, int]:
        """(messages, characters) of the conversation's messages after ``after_seq``."""
        rows = await self._fetchall(
            "SELECT count(*), coalesce(sum(length(content)), 0) FROM memories"
            " WHERE conversation_id = %s AND kind = 'message' AND seq > %s",
            (conversation_id, after_seq), "measure the transcript",
        )
        return int(rows[0][0]), int(rows[0][1])

    async def conversation_snapshot(
        self, conversation_id: str, offset: int = 0, limit: int = -1
    ) -> tuple[Conversation, list[Memory], int]:
        """A conversation, its memories in order (from ``offset``, at most ``limit``) and their
        total, read from one snapshot (REPEATABLE READ)."""
        async with self._connection("read the conversation") as conn:
            async with conn.transaction():
                await conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
                cursor = await conn.execute(
                    f"SELECT {CONVERSATION_COLUMNS} FROM conversations c WHERE c.id = %s", (conversation_id,)
                )
                row = await cursor.fetchone()
                if row is None:
                    raise ConversationNotFoundError(conversation_id)
                cursor = await conn.execute(
                    "SELECT count(*) FROM memories WHERE conversation_id = %s", (conversation_id,)
                )
                total = await cursor.fetchone()
                cursor = await conn.execute(
                    f"SELECT {MEMORY_COLUMNS} FROM memories m WHERE m.conversation_id = %s ORDER BY m.seq"
                    " LIMIT %s OFFSET %s", (conversation_id, None if limit < 0 else limit, offset),
                )
                rows = await cursor.fetchall()
        return conversation_from_row(row), [memory_from_row(r) for r in rows], int(total[0]) if total else 0

    async def import_conversation(
        self, conversation: Conversation, memories: Sequence[Memory], summarized_through_id: str | None
    ) -> tuple[bool, int]:
        """Insert an exported conversation and its memories with their ids, in one transaction;
        idempotent (ids present are left alone). Returns (conversation was new, memories added)."""
        async with self._transaction("import the conversation") as conn:
            cursor = await conn.execute(
                "INSERT INTO conversations (id, name, anonymous, status, metadata, summary, summary_status,"
                " rolling_summary, created_at, ended_at, expires_at) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s,"
                " %s)"
                " ON CONFLICT (id) DO NOTHING",
                (
                    conversation.id,
                    conversation.name,
                    conversation.anonymous,
                    conversation.status,
                    Jsonb(conversation.metadata),
                    conversation.summary,
                    conversation.summary_status,
                    conversation.rolling_summary,
                    conversation.created_at,
                    conversation.ended_at,
                    conversation.expires_at,
                ),
            )
            new_conversation = cursor.rowcount > 0
            await conn.execute("SELECT 1 FROM conversations WHERE id = %s FOR UPDATE", (conversation.id,))
            recent = await earlier_contents(conn, conversation.id)
            rows = []
            for m in memories:
                context = m.content
                if not own_context(m):
                    context = compose_context(recent, m.content)
                    recent = [*recent, m.content][-CONTEXT_NEIGHBOURS:]
                rows.append((
                    m.id, conversation.id, m.kind, m.role, m.actor, Jsonb(list(m.tool_calls)) if m.tool_calls else None,
                    m.tool_call_id, m.content, content_hash(m.content), context, list(m.tags), Jsonb(m.metadata),
                    m.created_at, m.superseded_by, m.occurred_at, fact_source(m),
                ))
            added = await execute_many(
                conn,
                "INSERT INTO memories (id, conversation_id, kind, role, actor, tool_calls, tool_call_id,"
                " content, content_hash, context, tags, metadata, created_at, superseded_by, occurred_at, source_seq)"
                f" VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, {SOURCE_SEQ}) ON CONFLICT DO"
                " NOTHING",
                rows,
            )
            # Facts were extracted at least through the last memory one came from.
            await conn.execute(
                "UPDATE conversations SET facts_through = greatest(facts_through, (SELECT coalesce(max(source_seq), 0)"
                " FROM memories WHERE conversation_id = %(id)s AND kind = 'fact')) WHERE id = %(id)s",
                {"id": conversation.id},
            )
            if summarized_through_id is not None:
                await conn.execute(
                    "UPDATE conversations SET summarized_through = m.seq FROM memories m"
                    " WHERE conversations.id = %s AND conversations.summarized_through = 0 AND m.id = %s",
                    (conversation.id, summarized_through_id),
                )
        return new_conversation, added

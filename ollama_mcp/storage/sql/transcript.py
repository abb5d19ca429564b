"""A conversation's transcript and snapshots: messages, its memories in order, export and import,
on either SQL backend."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import anyio

from ollama_mcp.domain import CompactAt, Conversation, Memory, MemoryKind, Participant
from ollama_mcp.errors import ConversationClosedError, ConversationNotFoundError
from ollama_mcp.storage.fact_rules import fact_source
from ollama_mcp.storage.memory_rules import CONTEXT_NEIGHBOURS, compose_context, is_retry, note_digest, own_context
from ollama_mcp.storage.sql.parts import SqlParts
from ollama_mcp.storage.sql.placing import claims_to_keep
from ollama_mcp.storage.sql.rows import (
    SOURCE_SEQ,
    compact_if_due,
    context_column,
    conversation_columns,
    conversation_from_row,
    earlier_contents,
    enqueue_job_row,
    execute,
    fetchall,
    fetchone,
    insert_memory_row,
    lock_conversation,
    memory_by_seq,
    memory_columns,
    memory_from_row,
    transcript_size_sql,
)

ROWS_ON_THE_LOOP = 2_000  # more rows than this are turned into memories in a worker thread


class TranscriptStore(SqlParts):
    """A conversation's transcript and snapshots: messages, its memories in order, export and import."""

    async def messages(self, conversation_id: str, limit: int, before_seq: int | None = None) -> list[Memory]:
        """The latest ``limit`` messages before ``before_seq`` (default: all), oldest first."""
        rows = await self._fetchall(
            self._dialect.sql(
                f"SELECT {memory_columns(self._dialect)} FROM memories m"
                f" WHERE {self._dialect.of_conversation('m')} AND m.kind = 'message' AND m.seq < ?"
                " ORDER BY m.seq DESC LIMIT ?"
            ),
            (conversation_id, before_seq if before_seq is not None else 2**62, limit),
            "read the conversation's messages",
        )
        return [memory_from_row(self._dialect, row) for row in reversed(rows)]

    async def participants(self, conversation_id: str) -> list[Participant]:
        """Who wrote the conversation's messages, in the order they first spoke."""
        rows = await self._fetchall(
            self._dialect.sql(
                "SELECT coalesce(actor, role), role, count(*),"
                f" count(*) FILTER (WHERE {self._dialect.json_has('metadata', 'to')}), max(created_at)"
                f" FROM memories WHERE {self._dialect.of_conversation('')} AND kind = 'message'"
                " GROUP BY 1, 2 ORDER BY min(seq)"
            ),
            (conversation_id,), "read the conversation's participants",
        )
        return [
            Participant(name, role, int(count), int(addressed), last) for name, role, count, addressed, last in rows
        ]

    async def insert_messages(
        self, messages: Sequence[Memory], retry_since: str | None, *, compact: CompactAt | None = None
    ) -> tuple[list[Memory], bool, bool]:
        """Append ``messages`` (of one conversation, which must be active) in order, in one
        transaction; returns (the messages, was_retry, compaction_queued). When the conversation's
        latest messages are these same turns, the first stored at or after ``retry_since`` (None:
        never), they are a client's retry: nothing is added and the stored ones are returned.
        (Where rows are locked, the conversation's lock orders concurrent retries, so the second
        sees the first's messages.) With ``compact``, a transcript that crossed it is queued for
        compaction in the same transaction."""
        d = self._dialect
        conversation_id = messages[0].conversation_id
        async with self._transaction("record the messages") as conn:
            if await lock_conversation(conn, d, conversation_id) != "active":
                raise ConversationClosedError(conversation_id)
            latest = await fetchall(
                conn, d,
                f"SELECT {memory_columns(d)} FROM memories m WHERE {d.of_conversation('m')} AND m.kind = 'message'"
                " ORDER BY m.seq DESC LIMIT ?", (conversation_id, len(messages) + 1),
            )
            recent = [memory_from_row(d, row) for row in reversed(latest)]
            if retry_since is not None and is_retry(recent, messages, retry_since):
                return recent[-len(messages):], True, False
            stored = []
            for message in messages:
                seq = await insert_memory_row(conn, d, message)
                assert seq is not None, "only notes are de-duplicated by the unique index"
                stored.append(await memory_by_seq(conn, d, seq))
            queued = compact is not None and await compact_if_due(
                conn, d, conversation_id, compact, messages[0].created_at
            )
        return stored, False, queued

    async def conversation_memories(
        self, conversation_id: str, *, after_seq: int = 0, limit: int = -1, kinds: Sequence[MemoryKind] = ()
    ) -> list[Memory]:
        """Memories of every version (of ``kinds``, default all) after ``after_seq``, oldest first."""
        d = self._dialect
        where = f"{d.of_conversation('m')} AND m.seq > ?"
        params: list[Any] = [conversation_id, after_seq]
        if kinds:
            where += f" AND {d.in_list('m.kind')}"
            params.append(d.listed(kinds))
        rows = await self._fetchall(
            d.sql(f"SELECT {memory_columns(self._dialect)} FROM memories m WHERE {where} ORDER BY m.seq LIMIT ?"),
            [*params, d.limit(limit)],
            "read the conversation",
        )
        if len(rows) <= ROWS_ON_THE_LOOP:
            return [memory_from_row(d, row) for row in rows]
        # A long conversation's rows are made memories in a worker thread: 100,000 of them held the
        # event loop ~0.6 s (every search and store waited); there they yield the loop its turns.
        return await anyio.to_thread.run_sync(lambda: [memory_from_row(d, row) for row in rows])

    async def transcript_size(self, conversation_id: str, after_seq: int) -> tuple[int, int]:
        """(messages, characters) of the conversation's messages after ``after_seq``."""
        d = self._dialect
        rows = await self._fetchall(
            d.sql(transcript_size_sql(d)), (conversation_id, after_seq), "measure the transcript"
        )
        return int(rows[0][0]), int(rows[0][1])

    async def content_lengths(self, conversation_id: str) -> list[int]:
        """The characters of each memory of a conversation (every kind and version), in order:
        where the pages of its export end."""
        rows = await self._fetchall(
            self._dialect.sql(
                f"SELECT length(content) FROM memories WHERE {self._dialect.of_conversation('')} ORDER BY seq"
            ),
            (conversation_id,), "read the conversation",
        )
        return [int(row[0]) for row in rows]

    async def conversation_snapshot(
        self, conversation_id: str, offset: int = 0, limit: int = -1
    ) -> tuple[Conversation, list[Memory], int]:
        """A conversation, its memories of every kind and version in order (from ``offset``, at
        most ``limit``) and their total, read from one snapshot: a concurrent delete either
        happened before (not found) or not at all."""
        d = self._dialect
        async with self._snapshot("read the conversation") as conn:
            row = await fetchone(
                conn, d, f"SELECT {conversation_columns(d, counted=False)} FROM conversations c WHERE c.id = ?",
                (conversation_id,),
            )
            if row is None:
                raise ConversationNotFoundError(conversation_id)
            total = await fetchone(
                conn, d, f"SELECT count(*) FROM memories WHERE {d.of_conversation('')}", (conversation_id,)
            )
            rows = await fetchall(
                conn, d,
                f"SELECT {memory_columns(d)} FROM memories m WHERE {d.of_conversation('m')} ORDER BY m.seq"
                " LIMIT ? OFFSET ?",
                (conversation_id, d.limit(limit), offset),
            )
        memories = [memory_from_row(d, r) for r in rows]
        return conversation_from_row(d, row), memories, int(total[0]) if total else 0

    async def present(self, conversation_id: str, memory_ids: Sequence[str]) -> tuple[bool, set[str]]:
        d = self._dialect
        known = await self._fetchall(
            d.sql("SELECT 1 FROM conversations WHERE id = ?"), (conversation_id,), "check an import"
        )
        found = await self._fetchall(
            d.sql(f"SELECT id FROM memories WHERE {d.in_list('id')}"), (d.listed(list(memory_ids)),), "check an import"
        ) if memory_ids else []
        return bool(known), {row[0] for row in found}

    async def import_conversation(
        self, conversation: Conversation, memories: Sequence[Memory], summarized_through_id: str | None,
        *, summarize_at: str | None = None,
    ) -> tuple[bool, int, bool]:
        """Insert an exported conversation and its memories with their ids, in one transaction;
        with ``summarize_at`` (now), a summary of a conversation that gained memories is queued in
        it too.

        Idempotent: a conversation or memory whose id exists is left as it is (and a note whose
        text is already current in the conversation is skipped), so importing twice changes
        nothing. Returns (conversation was new, memories added, summary queued).
        """
        d = self._dialect
        c = conversation
        async with self._transaction("import the conversation") as conn:
            new_conversation = await execute(
                conn, d,
                "INSERT INTO conversations (id, name, anonymous, status, metadata, summary, summary_status,"
                " rolling_summary, created_at, ended_at, expires_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
                " ON CONFLICT (id) DO NOTHING",
                (c.id, c.name, c.anonymous, c.status, d.json(c.metadata), c.summary, c.summary_status,
                 c.rolling_summary, c.created_at, c.ended_at, c.expires_at),
            ) > 0
            await lock_conversation(conn, d, c.id)
            recent = await earlier_contents(conn, d, c.id) if d.stores_context else []
            rows = []
            for m in memories:
                context = None  # (SQLite computes it: sqlite/migrations/0019_context_view.sql)
                if d.stores_context:
                    context = m.content
                    if not own_context(m):
                        context = compose_context(recent, m.content)
                        recent = [*recent, m.content][-CONTEXT_NEIGHBOURS:]
                rows.append((
                    m.id, c.id, m.kind, m.role, m.actor, d.json(list(m.tool_calls)) if m.tool_calls else None,
                    m.tool_call_id, m.content, note_digest(m), context,
                    d.tags(m.tags), d.json(m.metadata),
                    m.created_at, m.superseded_by, m.occurred_at, await claims_to_keep(conn, d, m),
                    fact_source(m),
                ))
            added = await d.execute_many(
                conn,
                d.sql(
                    f"INSERT INTO memories (id, conversation_id{d.KEY_COLUMN}, kind, role, actor, tool_calls,"
                    f" tool_call_id, content, note_digest, {context_column(d)}, tags, metadata, created_at,"
                    f" superseded_by, occurred_at, claims, source_seq)"
                    f" VALUES (?, ?{d.KEY_VALUE}, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, {SOURCE_SEQ})"
                    " ON CONFLICT DO NOTHING"
                ),
                rows,
            )
            await d.keep_conversation_tags(conn, c.id)
            # Facts were extracted at least through the last memory one came from.
            await execute(
                conn, d,
                f"UPDATE conversations SET facts_through = {d.greatest}(facts_through,"
                f" (SELECT coalesce(max(source_seq), 0) FROM memories WHERE {d.of_conversation('')} AND kind = 'fact'))"
                " WHERE id = ?",
                (c.id, c.id),
            )
            if summarized_through_id is not None:
                await execute(
                    conn, d,
                    "UPDATE conversations SET summarized_through = (SELECT seq FROM memories WHERE id = ?)"
                    " WHERE id = ? AND summarized_through = 0 AND EXISTS (SELECT 1 FROM memories WHERE id = ?)",
                    (summarized_through_id, c.id, summarized_through_id),
                )
            queued = summarize_at is not None and added > 0 and await enqueue_job_row(
                conn, d, "summarize", c.id, summarize_at
            )
        return new_conversation, added, queued

"""Conversations: create, read, list, end, and delete (retention), on either SQL backend."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ollama_mcp.domain import Conversation, ConversationQuery, Memory, utc_now
from ollama_mcp.errors import ConversationClosedError, ConversationNotFoundError
from ollama_mcp.storage.memory_rules import SOURCE_ID
from ollama_mcp.storage.sql.dialect import Dialect
from ollama_mcp.storage.sql.fragments import like_escape
from ollama_mcp.storage.sql.parts import SqlParts
from ollama_mcp.storage.sql.rows import (
    conversation_columns,
    conversation_from_row,
    enqueue_job_row,
    execute,
    fetchall,
    fetchone,
    insert_memory_row,
    lock_conversation,
    text_kept,
)


def opening(d: Dialect) -> str:
    """The start of a conversation's (``c``) first current note or user turn: what an unnamed
    conversation is called by (``Conversation.title``)."""
    return (
        f"(SELECT substr(o.content, 1, 200) FROM memories o WHERE {d.of_c('o')}"
        f" AND (o.kind = 'note' OR o.role = 'user') AND o.superseded_by IS NULL AND {text_kept(d, 'o.')}"
        " ORDER BY o.seq LIMIT 1)"
    )


def in_project(d: Dialect, project: str) -> tuple[str, list[Any]]:
    """A condition on a conversation ``c`` and its parameters: it is filed under ``project``
    (``inputs.fields.project``): its ``metadata.project`` is that text, or, for a bare folder name,
    a path ending in that folder (either separator; case as the name search, ``name_like``)."""
    filed = d.json_text("c.metadata", "project")
    if "/" in project or "\\" in project:
        return f"{filed} = ?", [project]
    folder = like_escape(project)
    return (
        f"({filed} = ? OR {d.name_like(filed)} OR {d.name_like(filed)})",
        [project, f"%/{folder}", f"%{like_escape(chr(92))}{folder}"],
    )


class ConversationStore(SqlParts):
    """Conversations: create, read, list, end, and delete (retention)."""

    async def create_conversation(
        self, conversation_id: str, name: str | None, metadata: dict[str, Any], anonymous: bool, created_at: str,
        expires_at: str | None = None, follows: str | None = None,
    ) -> Conversation:
        d = self._dialect
        async with self._transaction("create the conversation") as conn:
            if follows is not None and not await fetchone(
                conn, d, f"SELECT 1 FROM conversations WHERE id = ?{d.for_key_share}", (follows,)
            ):
                raise ConversationNotFoundError(follows)
            rows = await fetchall(
                conn, d,
                "INSERT INTO conversations (id, name, anonymous, metadata, created_at, expires_at)"
                " VALUES (?, ?, ?, ?, ?, ?) RETURNING key",
                (conversation_id, name, anonymous, d.json(metadata), created_at, expires_at),
            )
            if follows is not None:
                await execute(
                    conn, d,
                    "INSERT INTO conversation_relations (conversation_id, related_id, kind, created_at)"
                    " VALUES (?, ?, 'follow_up', ?)",
                    (conversation_id, follows, created_at),
                )
        return Conversation(
            key=int(rows[0][0]), id=conversation_id, name=name, status="active", anonymous=anonymous,
            created_at=created_at, metadata=metadata, expires_at=expires_at,
        )

    async def get_conversation(self, conversation_id: str, *, count_memories: bool = False) -> Conversation:
        """The conversation (``memory_count`` may be 0 unless asked for: on SQLite it costs a count)."""
        rows = await self._fetchall(
            self._dialect.sql(
                f"SELECT {conversation_columns(self._dialect, counted=count_memories)} FROM conversations c"
                " WHERE c.id = ?"
            ),
            (conversation_id,),
            "read the conversation",
        )
        if not rows:
            raise ConversationNotFoundError(conversation_id)
        return conversation_from_row(self._dialect, rows[0])

    async def list_conversations(self, query: ConversationQuery) -> list[Conversation]:
        """The conversations ``query`` selects, with their counts and last activity. The order is
        found first (the last memory's time is an index lookup on (conversation_id, created_at));
        counts are read for the chosen page only."""
        d = self._dialect
        where: list[str] = ["1 = 1"]
        params: list[Any] = []
        if query.status:
            where.append("c.status = ?")
            params.append(query.status)
        if query.name_contains:
            where.append(d.name_like("c.name"))
            params.append(f"%{like_escape(query.name_contains)}%")
        for key, value in query.metadata:
            where.append(d.json_pair("c.metadata"))
            params += [key, value]
        if query.ids is not None:
            where.append(d.in_list("c.id"))
            params.append(d.listed(query.ids))
        if query.project is not None:
            condition, values = in_project(d, query.project)
            where.append(condition)
            params += values
        first = "last_activity" if query.order == "activity" else "created_at"
        rows = await self._fetchall(
            self._dialect.sql(
                f"SELECT {conversation_columns(d)}, {d.message_count()}, t.last_activity, {opening(d)}"
                f" FROM (SELECT c.key AS k, c.created_at, {d.greatest}(c.created_at, coalesce(c.ended_at, ''),"
                f" coalesce({d.LAST_MEMORY_OF_C}, ''))"
                f" AS last_activity FROM conversations c WHERE {' AND '.join(where)}"
                f" ORDER BY {first} DESC, c.key DESC LIMIT ? OFFSET ?) t"
                f" JOIN conversations c ON c.key = t.k ORDER BY t.{first} DESC, t.k DESC"
            ),
            [*params, query.limit, query.offset],
            "list conversations",
        )
        return [conversation_from_row(d, row) for row in rows]

    async def end_conversation(
        self, conversation_id: str, ended_at: str, summary_memory: Memory | None, *, queue_summary: bool,
        queue_facts: bool = False,
    ) -> tuple[Conversation, int]:
        """Mark the conversation completed, in one transaction with what becomes of its summary:
        the given one stored (also as a searchable memory), or a summarize job queued when
        ``queue_summary`` and the conversation has anything to summarize. Returns it with its count
        of current notes."""
        d = self._dialect
        async with self._transaction("end the conversation") as conn:
            if await lock_conversation(conn, d, conversation_id) != "active":
                raise ConversationClosedError(conversation_id)
            summary_status = "none"
            if summary_memory is not None:
                await insert_memory_row(conn, d, summary_memory)
                summary_status = "given"
                await enqueue_job_row(conn, d, "relate", conversation_id, ended_at)  # link it to ones like it
            elif queue_summary:
                if await fetchone(
                    conn, d,
                    f"SELECT 1 FROM memories WHERE {d.of_conversation('')} AND kind IN ('note', 'message') LIMIT 1",
                    (conversation_id,),
                ):
                    await enqueue_job_row(conn, d, "summarize", conversation_id, ended_at)
                    summary_status = "pending"
            if queue_facts:
                await enqueue_job_row(conn, d, "facts", conversation_id, ended_at)
            await execute(
                conn, d,
                "UPDATE conversations SET status = 'completed', ended_at = ?, summary = ?, summary_status = ?"
                " WHERE id = ?",
                (ended_at, summary_memory.content if summary_memory else None, summary_status, conversation_id),
            )
            # No client continues an ended conversation (deleting one cascades the same).
            await execute(conn, d, "DELETE FROM current_conversations WHERE conversation_id = ?", (conversation_id,))
            # A turn still being streamed is settled: aborted, kept with its text so far (GET
            # /turns/{id} reads it), so it takes no more chunks and no view waits for it forever.
            await execute(
                conn, d, "UPDATE open_turns SET state = 'aborted', updated_at = ? WHERE conversation_id = ?"
                " AND state = 'open'", (ended_at, conversation_id),
            )
            row = await fetchone(
                conn, d, f"SELECT {conversation_columns(d)} FROM conversations c WHERE c.id = ?", (conversation_id,)
            )
        ended = conversation_from_row(d, row)
        return ended, ended.memory_count

    async def project_conversations(self, project: str) -> list[str]:
        """The ids of the conversations filed under ``project`` (``in_project``)."""
        condition, values = in_project(self._dialect, project)
        rows = await self._fetchall(
            self._dialect.sql(f"SELECT c.id FROM conversations c WHERE {condition}"), values, "find the project",
        )
        return [row[0] for row in rows]

    async def projects_of(self, conversation_ids: Sequence[str]) -> dict[str, str]:
        """The project of each of these conversations that has one (``metadata.project``)."""
        if not conversation_ids:
            return {}
        d = self._dialect
        filed = d.json_text("c.metadata", "project")
        rows = await self._fetchall(
            d.sql(f"SELECT c.id, {filed} FROM conversations c WHERE {d.in_list('c.id')} AND {filed} IS NOT NULL"),
            (d.listed(conversation_ids),), "read the conversations' projects",
        )
        return {row[0]: str(row[1]) for row in rows}

    async def conversation_ids(self) -> list[str]:
        rows = await self._fetchall(
            "SELECT id FROM conversations ORDER BY created_at, key", (),
            "list conversations",
        )
        return [row[0] for row in rows]

    async def change_marks(self, conversation_ids: Sequence[str]) -> dict[str, tuple[Any, ...]]:
        """For each of the conversations that exists, a mark that changes whenever it or its
        memories change, whoever writes: status, summary state, how far it is summarized, its
        memories' count and newest seq (a redaction comes with a new summary), its links to
        other conversations, and its turns being streamed (each chunk)."""
        rows = await self._fetchall(
            self._dialect.sql(
                "SELECT c.id, c.status, c.summary_status, c.summarized_through, count(m.seq), max(m.seq),"
                " (SELECT count(*) + coalesce(sum(r.score), 0) FROM conversation_relations r"
                "  WHERE r.conversation_id = c.id OR r.related_id = c.id),"
                " (SELECT max(o.updated_at) FROM open_turns o WHERE o.conversation_id = c.id),"
                " (SELECT coalesce(sum(length(o.content)), 0) FROM open_turns o WHERE o.conversation_id = c.id)"
                f" FROM conversations c LEFT JOIN memories m ON {self._dialect.of_c('m')}"
                f" WHERE {self._dialect.in_list('c.id')} GROUP BY c.id"
            ),
            (self._dialect.listed(conversation_ids),), "read what changed",
        )
        return {row[0]: tuple(row[1:]) for row in rows}

    async def conversations_mark(self) -> tuple[Any, ...]:
        """A mark that changes whenever a conversation is created, deleted or ended."""
        rows = await self._fetchall(
            "SELECT count(*), coalesce(max(key), 0),"
            " count(*) FILTER (WHERE status = 'completed') FROM conversations",
            (), "read what changed",
        )
        return tuple(rows[0])

    async def has_other_conversations(self, conversation_id: str) -> bool:
        rows = await self._fetchall(
            self._dialect.sql("SELECT EXISTS (SELECT 1 FROM conversations WHERE id <> ?)"), (conversation_id,),
            "list conversations",
        )
        return bool(rows[0][0])

    async def expired_conversations(self, now: str, inactive_before: str | None) -> list[str]:
        """Conversations past their own expiry, or (with ``inactive_before``) untouched since then."""
        rows = await self._fetchall(
            self._dialect.sql(
                "SELECT id FROM conversations WHERE expires_at IS NOT NULL AND expires_at <= ?"
                " UNION SELECT c.id FROM conversations c WHERE CAST(? AS TEXT) IS NOT NULL"
                f" AND {self._dialect.greatest}(c.created_at, coalesce(c.ended_at, ''),"
                f" coalesce({self._dialect.LAST_MEMORY_OF_C}, '')) < ?"
            ),
            (now, inactive_before, inactive_before), "find expired conversations",
        )
        return [row[0] for row in rows]

    async def memories_stored_before(self, cutoff: str, conversation_id: str | None = None) -> list[str]:
        """The ids of the memories (current versions, of every kind) older than ``cutoff``, in one
        conversation or in all, oldest first: what forgetting by age deletes. A turn's age is when
        it was said (an imported 2024 turn is two years old, whenever it was imported); any other
        memory's is when it was written down (a note stored today about 1990 is a day old)."""
        age = "CASE WHEN m.kind = 'message' THEN m.occurred_at ELSE m.created_at END"
        where = f"m.superseded_by IS NULL AND ({age}) < ?"
        if conversation_id:
            where += f" AND {self._dialect.of_conversation('m')}"
        rows = await self._fetchall(
            self._dialect.sql(f"SELECT m.id FROM memories m WHERE {where} ORDER BY m.seq"),
            (cutoff, conversation_id) if conversation_id else (cutoff,), "find old memories",
        )
        return [row[0] for row in rows]

    async def conversations_with_setting(self, key: str) -> list[tuple[str, dict[str, Any]]]:
        """The conversations whose metadata holds ``key`` (a setting), with their metadata."""
        d = self._dialect
        rows = await self._fetchall(
            d.sql(f"SELECT c.id, c.metadata FROM conversations c WHERE {d.json_text('c.metadata', key)} IS NOT NULL"),
            (), "find conversations by setting",
        )
        return [(row[0], d.from_json(row[1])) for row in rows]

    async def memory_total(self, conversation_id: str) -> int:
        rows = await self._fetchall(
            self._dialect.sql(f"SELECT count(*) FROM memories WHERE {self._dialect.of_conversation('')}"),
            (conversation_id,),
            "count memories",
        )
        return int(rows[0][0])

    async def memory_timeline(self) -> list[tuple[str, str, int]]:
        rows = await self._fetchall(
            "SELECT conversation_id, substr(occurred_at, 1, 10) AS day, count(*) FROM memories"
            " WHERE kind IN ('note', 'message') AND superseded_by IS NULL GROUP BY conversation_id, day ORDER BY day",
            (), "count memories by day",
        )
        return [(row[0], row[1], int(row[2])) for row in rows]

    async def delete_conversation(self, conversation_id: str) -> list[int]:
        """Delete a conversation with its memories, messages, tags, vectors, keyword entries and
        jobs in one transaction (foreign-key cascades and triggers). Returns the memory seqs."""
        d = self._dialect
        async with self._transaction("delete the conversation") as conn:
            await lock_conversation(conn, d, conversation_id)
            rows = await fetchall(
                conn, d, f"SELECT seq FROM memories WHERE {d.of_conversation('')}", (conversation_id,)
            )
            await execute(  # an imported one stays deleted when its export is imported again
                conn, d,
                "INSERT INTO deleted_imports (id, deleted_at) SELECT id, ? FROM conversations"
                f" WHERE id = ? AND {d.json_text('metadata', SOURCE_ID)} IS NOT NULL ON CONFLICT DO NOTHING",
                (utc_now(), conversation_id),
            )
            await execute(conn, d, "DELETE FROM conversations WHERE id = ?", (conversation_id,))
        return [int(row[0]) for row in rows]

"""SQL fragments and row helpers shared by the PostgreSQL store's parts (private to this package)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import anyio
import numpy as np
import psycopg
from psycopg.types.json import Jsonb

from ollama_mcp.domain import Conversation, EmbeddingRow, JobKind, Memory, MemoryKind, SearchFilters, utc_now
from ollama_mcp.errors import ConversationNotFoundError, MemoryNotFoundError
from ollama_mcp.storage.records import (
    CONTEXT_NEIGHBOURS,
    REDACTED,
    REDACTED_PREFIX,
    compose_context,
    content_hash,
    fact_source,
    own_context,
)
from ollama_mcp.when import times_named

CONVERSATION_COLUMNS = (
    "c.key, c.id, c.name, c.status, c.anonymous, c.created_at, c.ended_at, c.metadata, c.summary,"
    " c.summary_status, c.rolling_summary, c.summarized_through, c.expires_at, c.memory_count"
)
MEMORY_COLUMNS = (
    "m.seq, m.id, m.conversation_id, m.kind, m.content, m.tags, m.metadata, m.created_at, m.context,"
    " m.role, m.actor, m.tool_calls, m.tool_call_id, m.superseded_by, m.occurred_at"
)
MEMORY_WIDTH = 15
# The seq of a fact's source, from the source's id (a parameter; NULL for other kinds).
SOURCE_SEQ = "(SELECT s.seq FROM memories s WHERE s.id = %s)"
# "This memory's text is still there" (not a turn an audit-only retention redacted).
TEXT_KEPT = f"metadata ->> '{REDACTED}' IS NULL"
# "This memory awaits a vector of model %(model)s for the facet": pending embeddings. (A redacted
# turn has none and gets none.)
MISSING_VECTOR = (
    "(NOT EXISTS (SELECT 1 FROM memory_embeddings e WHERE e.memory_seq = m.seq AND e.model = %(model)s"
    f" AND e.facet = '{{}}') AND m.metadata ->> '{REDACTED}' IS NULL)"
)
ALL_KINDS = frozenset({"note", "message", "summary", "fact"})


async def lock_conversation(conn: psycopg.AsyncConnection, conversation_id: str) -> str:
    """Lock the conversation's row for this transaction and return its status.

    Every write that adds, replaces or removes a conversation's memories takes this lock first:
    writes to one conversation queue up (its memories' contexts and counts stay consistent), writes
    to different conversations run side by side, and all take their locks in the same order.
    """
    cursor = await conn.execute("SELECT status FROM conversations WHERE id = %s FOR UPDATE", (conversation_id,))
    row = await cursor.fetchone()
    if row is None:
        raise ConversationNotFoundError(conversation_id)
    return str(row[0])


async def insert_memory_row(
    conn: psycopg.AsyncConnection, memory: Memory, *, context_before: int | None = None
) -> int | None:
    """Insert the row (with its context) and return its seq; None when an identical current note
    exists (the unique index decides, so concurrent retries cannot both insert)."""
    context = memory.content
    if not own_context(memory):
        context = compose_context(await earlier_contents(conn, memory.conversation_id, context_before), memory.content)
    cursor = await conn.execute(
        "INSERT INTO memories (id, conversation_id, kind, role, actor, tool_calls, tool_call_id, content,"
        " content_hash, context, tags, metadata, created_at, superseded_by, occurred_at, spoken_of, source_seq)"
        f" VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, {SOURCE_SEQ})"
        " ON CONFLICT (conversation_id, content_hash) WHERE kind = 'note' AND superseded_by IS NULL DO NOTHING"
        " RETURNING seq",
        (
            memory.id,
            memory.conversation_id,
            memory.kind,
            memory.role,
            memory.actor,
            Jsonb(list(memory.tool_calls)) if memory.tool_calls else None,
            memory.tool_call_id,
            memory.content,
            content_hash(memory.content),
            context,
            list(memory.tags),
            Jsonb(memory.metadata),
            memory.created_at,
            memory.superseded_by,
            memory.occurred_at,
            times_named(memory.content, memory.occurred_at),
            fact_source(memory),
        ),
    )
    row = await cursor.fetchone()
    return None if row is None else int(row[0])


async def earlier_contents(
    conn: psycopg.AsyncConnection, conversation_id: str, before_seq: int | None = None
) -> list[str]:
    """The texts of the CONTEXT_NEIGHBOURS memories before ``before_seq`` (default: the latest),
    oldest first; summaries and redacted turns are not part of anyone's context."""
    cursor = await conn.execute(
        "SELECT content FROM memories WHERE conversation_id = %s AND kind NOT IN ('summary', 'fact') AND seq < %s AND"
        f" {TEXT_KEPT}"
        " ORDER BY seq DESC LIMIT %s",
        (conversation_id, before_seq if before_seq is not None else 2**62, CONTEXT_NEIGHBOURS),
    )
    return [row[0] for row in reversed(await cursor.fetchall())]


async def rewrite_followers(conn: psycopg.AsyncConnection, conversation_id: str, gone: Sequence[int]) -> list[int]:
    """The memories that had one of the memories ``gone`` (just deleted or redacted) among their
    context's neighbours get a context without it, and lose their context vectors (the backfill
    computes new ones). Returns their seqs."""
    changed: list[int] = []
    for seq in sorted(gone):
        cursor = await conn.execute(
            "SELECT seq, content, context FROM memories WHERE conversation_id = %s AND kind NOT IN ('summary',"
            " 'fact') AND seq > %s"
            f" AND {TEXT_KEPT} ORDER BY seq LIMIT %s",
            (conversation_id, seq, CONTEXT_NEIGHBOURS),
        )
        for follower, content, old in await cursor.fetchall():
            if follower in changed:
                continue
            context = compose_context(await earlier_contents(conn, conversation_id, follower), content)
            if context == old:
                continue
            await conn.execute("UPDATE memories SET context = %s WHERE seq = %s", (context, follower))
            await conn.execute("DELETE FROM memory_embeddings WHERE memory_seq = %s AND facet = 'context'", (follower,))
            changed.append(int(follower))
    return changed


async def facts_from(conn: psycopg.AsyncConnection, seqs: Sequence[int]) -> list[int]:
    """The seqs of the facts extracted from the memories ``seqs``: deleting those deletes them (cascade)."""
    cursor = await conn.execute("SELECT seq FROM memories WHERE source_seq = ANY(%s)", (list(seqs),))
    return [int(row[0]) for row in await cursor.fetchall()]


async def retire_turns(
    conn: psycopg.AsyncConnection, conversation_id: str, retention: str, through: int
) -> tuple[list[int], list[int]]:
    """Apply an ``audit-only`` or ``ephemeral`` retention to the conversation's turns up to seq
    ``through`` (those a summary covers now): see the SQLite store's ``retire_turns``. The caller
    holds the conversation's lock. Returns (the seqs redacted or deleted, the seqs whose context
    was rewritten)."""
    cursor = await conn.execute(
        f"SELECT seq, metadata ? 'to' FROM memories WHERE conversation_id = %s AND kind = 'message' AND seq <= %s"
        f" AND {TEXT_KEPT} ORDER BY seq",
        (conversation_id, through),
    )
    rows = await cursor.fetchall()
    seqs = [int(row[0]) for row in rows]
    if not seqs:
        return [], []
    facts: list[int] = []
    if retention == "ephemeral":
        facts = await facts_from(conn, seqs)  # deleted with their sources
        await conn.execute("DELETE FROM memories WHERE seq = ANY(%s)", (seqs,))
        if any(row[1] for row in rows):
            await conn.execute(
                "UPDATE conversations SET metadata = metadata || '{\"private_turns\": true}' WHERE id = %s",
                (conversation_id,),
            )
    else:
        await conn.execute(
            f"UPDATE memories SET content = '{REDACTED_PREFIX}' || content_hash, context = '{REDACTED_PREFIX}' ||"
            " content_hash,"
            f" spoken_of = '', tool_calls = NULL, metadata = metadata || jsonb_build_object('{REDACTED}', %s::text)"
            " WHERE seq = ANY(%s)",
            (retention, seqs),
        )
        await conn.execute("DELETE FROM memory_embeddings WHERE memory_seq = ANY(%s)", (seqs,))
    return seqs + facts, await rewrite_followers(conn, conversation_id, seqs)


async def latest_version(conn: psycopg.AsyncConnection, memory_id: str) -> str:
    cursor = await conn.execute(
        "WITH RECURSIVE chain(id, next) AS (SELECT id, superseded_by FROM memories WHERE id = %s"
        " UNION ALL SELECT m.id, m.superseded_by FROM memories m JOIN chain ON m.id = chain.next)"
        " SELECT id FROM chain WHERE next IS NULL",
        (memory_id,),
    )
    row = await cursor.fetchone()
    return str(row[0]) if row else memory_id


async def enqueue_job_row(conn: psycopg.AsyncConnection, kind: JobKind, conversation_id: str, now: str) -> bool:
    cursor = await conn.execute(
        "INSERT INTO jobs (kind, conversation_id, run_after, created_at) VALUES (%s, %s, %s, %s)"
        " ON CONFLICT (kind, conversation_id) WHERE state IN ('queued', 'running') DO NOTHING",
        (kind, conversation_id, now, now),
    )
    return cursor.rowcount > 0


async def memory_where(conn: psycopg.AsyncConnection, condition: str, params: Sequence[Any]) -> Memory | None:
    cursor = await conn.execute(f"SELECT {MEMORY_COLUMNS} FROM memories m WHERE {condition}", params)
    row = await cursor.fetchone()
    return None if row is None else memory_from_row(row)


async def memory_by_id(conn: psycopg.AsyncConnection, memory_id: str) -> Memory:
    found = await memory_where(conn, "m.id = %s", (memory_id,))
    if found is None:
        raise MemoryNotFoundError(memory_id)
    return found


async def memory_by_seq(conn: psycopg.AsyncConnection, seq: int) -> Memory:
    found = await memory_where(conn, "m.seq = %s", (seq,))
    assert found is not None, "a row read inside its own insert transaction"
    return found


async def stored_dimension(conn: psycopg.AsyncConnection, model: str) -> int | None:
    """The dimension the stored vectors of ``model`` use (None: it has none)."""
    cursor = await conn.execute("SELECT dim FROM memory_embeddings WHERE model = %s LIMIT 1", (model,))
    row = await cursor.fetchone()
    return None if row is None else int(row[0])


async def execute_many(conn: psycopg.AsyncConnection, sql: str, rows: Sequence[Sequence[Any]]) -> int:
    """``executemany``, shielded from cancellation; how many rows it changed.

    psycopg runs a batch in pipeline mode, and a cancel in the middle of one (a server shutting
    down while the indexer writes vectors) breaks the connection and leaves a pipeline whose
    cleanup fails when it is garbage-collected. A batch is a few milliseconds: finishing it
    is cheaper than that, and the caller sees its cancellation right after.
    """
    if not rows:
        return 0
    changed = 0
    with anyio.CancelScope(shield=True):
        async with conn.cursor() as cursor:
            await cursor.executemany(sql, rows)
            changed = max(cursor.rowcount, 0)
    return changed


def vector_of(row: EmbeddingRow) -> np.ndarray:
    return np.frombuffer(row.vector, dtype="<f4")


async def insert_embedding_rows(conn: psycopg.AsyncConnection, rows: Sequence[EmbeddingRow]) -> int:
    """Insert vectors; rows of memories deleted meanwhile, or stored already, are skipped."""
    if not rows:
        return 0
    now = utc_now()
    return await execute_many(
        conn,
        "INSERT INTO memory_embeddings (memory_seq, model, facet, chunk_index, dim, vector, created_at)"
        " SELECT %s, %s, %s, %s, %s, %s, %s WHERE EXISTS (SELECT 1 FROM memories WHERE seq = %s)"
        " ON CONFLICT DO NOTHING",
        [(r.memory_seq, r.model, r.facet, r.chunk_index, r.dim, vector_of(r), now, r.memory_seq) for r in rows],
    )


def filter_sql(filters: SearchFilters, params: dict[str, Any]) -> list[str]:
    """WHERE conditions on ``memories m`` for ``filters``; their values are added to ``params``."""
    where: list[str] = []
    if filters.conversation_id is not None:
        where.append("m.conversation_id = %(conversation_id)s")
        params["conversation_id"] = filters.conversation_id
    if filters.conversation_ids is not None:
        where.append("m.conversation_id = ANY(%(conversation_ids)s)")
        params["conversation_ids"] = list(filters.conversation_ids)
    if not filters.include_superseded:
        where.append("m.superseded_by IS NULL")
    if filters.kinds and set(filters.kinds) != ALL_KINDS:
        where.append("m.kind = ANY(%(kinds)s)")
        params["kinds"] = list(filters.kinds)
    if filters.since is not None:
        where.append("m.occurred_at >= %(since)s")
        params["since"] = filters.since
    if filters.until is not None:
        where.append("m.occurred_at <= %(until)s")
        params["until"] = filters.until
    if filters.actors:
        where.append("coalesce(m.actor, m.role) = ANY(%(actors)s)")
        params["actors"] = list(filters.actors)
    if filters.tags:
        where.append("m.tags @> %(tags)s")
        params["tags"] = list(filters.tags)
    return where


def conversation_from_row(row: Sequence[Any]) -> Conversation:
    return Conversation(
        key=int(row[0]), id=row[1], name=row[2], status=row[3], anonymous=bool(row[4]), created_at=row[5],
        ended_at=row[6], metadata=dict(row[7]), summary=row[8], summary_status=row[9],
        rolling_summary=row[10], summarized_through=int(row[11]), expires_at=row[12], memory_count=int(row[13]),
        message_count=int(row[14]) if len(row) > 14 else 0, last_activity=row[15] if len(row) > 15 else None,
    )



def memory_from_row(row: Sequence[Any]) -> Memory:
    kind: MemoryKind = row[3]
    return Memory(
        seq=int(row[0]), id=row[1], conversation_id=row[2], kind=kind, content=row[4], tags=tuple(row[5]),
        metadata=dict(row[6]), created_at=row[7], context=row[8], role=row[9], actor=row[10],
        tool_calls=tuple(row[11]) if row[11] else (), tool_call_id=row[12], superseded_by=row[13],
        occurred_at=row[14],
    )

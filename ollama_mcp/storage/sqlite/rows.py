"""SQL fragments, codes and row helpers shared by the store's parts (private to this package)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import aiosqlite

from ollama_mcp.domain import Conversation, EmbeddingRow, JobKind, Memory, MemoryKind, SearchFilters
from ollama_mcp.errors import ConversationNotFoundError, MemoryNotFoundError

# Re-exported (``as``) for the store's modules, which take every row rule from here.
from ollama_mcp.storage.records import CONTEXT_NEIGHBOURS as CONTEXT_NEIGHBOURS
from ollama_mcp.storage.records import REDACTED, REDACTED_PREFIX, fact_source
from ollama_mcp.storage.records import compose_context as compose_context
from ollama_mcp.storage.records import content_hash as content_hash
from ollama_mcp.storage.records import dump_json as dump_json
from ollama_mcp.storage.records import own_context as own_context
from ollama_mcp.when import times_named

KIND_CODES: dict[str, int] = {"note": 0, "message": 1, "summary": 2, "fact": 3}
FACET_CODES: dict[str, int] = {"content": 0, "context": 1}
# Rows per batch of a vector load from SQLite: a batch is held twice while it is taken in (its
# blobs, then joined), so 4096 rows of 768 dimensions cost a first start 37 MB more at its peak
# than 1024, for no faster a load (100k memories: about 1 s either way).
VECTOR_BATCH_ROWS = 1024
# The keyword indexes' tokenizer (schema/0001_initial.sql): scratch tables that tokenize new
# memories and query words for the in-memory keyword index use the same one.
TOKENIZER = "porter unicode61 remove_diacritics 2"
KEYWORD_TABLES: dict[int, str] = {FACET_CODES["content"]: "memories_fts", FACET_CODES["context"]: "memory_contexts_fts"}
# memory_changes rows older than this many are pruned by the upkeep (a reader further behind
# rebuilds its index).
KEPT_CHANGES = 10_000
# How far the keyword index's inputs have come (KeywordState): the highest memory seq, and the
# AUTOINCREMENT counter of memory_changes (not max(id), which pruning the log would lower).
NEWEST_SEQ = "(SELECT coalesce(max(seq), 0) FROM memories)"
NEWEST_CHANGE = "(SELECT coalesce(max(seq), 0) FROM sqlite_sequence WHERE name = 'memory_changes')"
# "This memory's text is still there" (not a turn an audit-only retention redacted).
TEXT_KEPT = f"json_extract(metadata, '$.{REDACTED}') IS NULL"
# "This memory awaits a vector of model ?1 for the facet": pending embeddings, everywhere. (A
# redacted turn has none and gets none: the second test runs only for memories lacking one.)
MISSING_VECTOR = (
    "(NOT EXISTS (SELECT 1 FROM memory_embeddings e WHERE e.memory_seq = m.seq AND e.model = ?1 AND e.facet = '{}')"
    f" AND json_extract(m.metadata, '$.{REDACTED}') IS NULL)"
)
CONVERSATION_COLUMNS = (
    "c.rowid, c.id, c.name, c.status, c.anonymous, c.created_at, c.ended_at, c.metadata, c.summary,"
    " c.summary_status, c.rolling_summary, c.summarized_through, c.expires_at"
)
MEMORY_COLUMNS = (
    "m.seq, m.id, m.conversation_id, m.kind, m.content, m.tags, m.metadata, m.created_at, m.context,"
    " m.role, m.actor, m.tool_calls, m.tool_call_id, m.superseded_by, m.occurred_at"
)
MEMORY_WIDTH = 15  # columns in MEMORY_COLUMNS: what a query selects after them starts here
# The seq of a fact's source, from the source's id (a parameter; NULL for other kinds).
SOURCE_SEQ = "(SELECT s.seq FROM memories s WHERE s.id = ?)"


async def conversation_status(conn: aiosqlite.Connection, conversation_id: str) -> str:
    row = await (await conn.execute("SELECT status FROM conversations WHERE id = ?", (conversation_id,))).fetchone()
    if row is None:
        raise ConversationNotFoundError(conversation_id)
    return str(row[0])


async def insert_memory_row(
    conn: aiosqlite.Connection, memory: Memory, *, context_before: int | None = None
) -> int | None:
    """Insert the row (with its context: the memories before it, or before seq ``context_before``)
    and its tags; None when an identical current note already exists."""
    context = memory.content
    if not own_context(memory):
        context = await context_of(conn, memory.conversation_id, memory.content, before_seq=context_before)
    cursor = await conn.execute(
        "INSERT INTO memories (id, conversation_id, kind, role, actor, tool_calls, tool_call_id, content,"
        " content_hash, context, tags, metadata, created_at, superseded_by, occurred_at, spoken_of, source_seq)"
        f" VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, {SOURCE_SEQ})"
        " ON CONFLICT (conversation_id, content_hash) WHERE kind = 'note' AND superseded_by IS NULL DO NOTHING",
        (memory.id, memory.conversation_id, memory.kind, memory.role, memory.actor,
         json.dumps(list(memory.tool_calls)) if memory.tool_calls else None, memory.tool_call_id,
         memory.content, content_hash(memory.content), context, json.dumps(list(memory.tags)),
         dump_json(memory.metadata), memory.created_at, memory.superseded_by, memory.occurred_at,
         times_named(memory.content, memory.occurred_at), fact_source(memory)),
    )
    if cursor.rowcount == 0:
        return None
    seq = int(cursor.lastrowid or 0)
    if memory.tags:
        await conn.executemany(
            "INSERT OR IGNORE INTO memory_tags (memory_seq, tag) VALUES (?, ?)", [(seq, tag) for tag in memory.tags]
        )
    return seq


async def latest_version(conn: aiosqlite.Connection, memory_id: str) -> str:
    row = await (await conn.execute(
        "WITH RECURSIVE chain(id, next) AS (SELECT id, superseded_by FROM memories WHERE id = ?"
        " UNION ALL SELECT m.id, m.superseded_by FROM memories m JOIN chain ON m.id = chain.next)"
        " SELECT id FROM chain WHERE next IS NULL",
        (memory_id,),
    )).fetchone()
    return str(row[0]) if row else memory_id


async def enqueue_job_row(conn: aiosqlite.Connection, kind: JobKind, conversation_id: str, now: str) -> bool:
    cursor = await conn.execute(
        "INSERT INTO jobs (kind, conversation_id, run_after, created_at) VALUES (?, ?, ?, ?)"
        " ON CONFLICT (kind, conversation_id) WHERE state IN ('queued', 'running') DO NOTHING",
        (kind, conversation_id, now, now),
    )
    return cursor.rowcount > 0


async def context_of(conn: aiosqlite.Connection, conversation_id: str, content: str, before_seq: int | None) -> str:
    """``content`` preceded by the (clipped) memories just before it in its conversation."""
    return compose_context(await earlier_contents(conn, conversation_id, before_seq), content)


async def earlier_contents(
    conn: aiosqlite.Connection, conversation_id: str, before_seq: int | None = None
) -> list[str]:
    """The texts of the CONTEXT_NEIGHBOURS memories before ``before_seq`` (default: the latest),
    oldest first; summaries and redacted turns are not part of anyone's context."""
    rows = await (
        await conn.execute(
            "SELECT content FROM memories WHERE conversation_id = ? AND kind NOT IN ('summary', 'fact') AND seq < ?"
            f" AND {TEXT_KEPT}"
            " ORDER BY seq DESC LIMIT ?",
            (conversation_id, before_seq if before_seq is not None else 2**62, CONTEXT_NEIGHBOURS),
        )
    ).fetchall()
    return [row[0] for row in reversed(list(rows))]


async def rewrite_followers(conn: aiosqlite.Connection, conversation_id: str, gone: Sequence[int]) -> list[int]:
    """The memories that had one of the memories ``gone`` (just deleted or redacted) among their
    context's neighbours get a context without it, and lose their context vectors (the backfill
    computes new ones). Returns their seqs."""
    changed: list[int] = []
    for seq in sorted(gone):
        followers = await (
            await conn.execute(
                "SELECT seq, content, context FROM memories WHERE conversation_id = ? AND kind NOT IN ('summary',"
                " 'fact') AND seq > ?"
                f" AND {TEXT_KEPT} ORDER BY seq LIMIT ?",
                (conversation_id, seq, CONTEXT_NEIGHBOURS),
            )
        ).fetchall()
        for follower, content, old in followers:
            if follower in changed:
                continue
            context = await context_of(conn, conversation_id, content, before_seq=follower)
            if context == old:
                continue
            await conn.execute("UPDATE memories SET context = ? WHERE seq = ?", (context, follower))
            await conn.execute("DELETE FROM memory_embeddings WHERE memory_seq = ? AND facet = 'context'", (follower,))
            changed.append(int(follower))
    return changed


async def facts_from(conn: aiosqlite.Connection, seqs: Sequence[int]) -> list[int]:
    """The seqs of the facts extracted from the memories ``seqs``: deleting those deletes them (cascade)."""
    rows = await (await conn.execute(
        "SELECT seq FROM memories WHERE source_seq IN (SELECT value FROM json_each(?))", (json.dumps(list(seqs)),)
    )).fetchall()
    return [int(row[0]) for row in rows]


async def retire_turns(
    conn: aiosqlite.Connection, conversation_id: str, retention: str, through: int
) -> tuple[list[int], list[int]]:
    """Apply an ``audit-only`` or ``ephemeral`` retention to the conversation's turns up to seq
    ``through`` (those a summary covers now): redact them (REDACTED_PREFIX and their digest, no
    vectors, no tool calls) or delete them. Once a turn addressed to some participants only is
    deleted, the conversation says so (``private_turns``: participants' views stay private).
    Returns (the seqs redacted or deleted, the seqs whose context was rewritten)."""
    rows = await (await conn.execute(
        f"SELECT seq, json_extract(metadata, '$.to') IS NOT NULL FROM memories WHERE conversation_id = ?"
        f" AND kind = 'message' AND seq <= ? AND {TEXT_KEPT} ORDER BY seq",
        (conversation_id, through),
    )).fetchall()
    seqs = [int(row[0]) for row in rows]
    if not seqs:
        return [], []
    chosen = json.dumps(seqs)
    facts: list[int] = []
    if retention == "ephemeral":
        facts = await facts_from(conn, seqs)  # deleted with their sources
        await conn.execute("DELETE FROM memories WHERE seq IN (SELECT value FROM json_each(?))", (chosen,))
        if any(row[1] for row in rows):
            await conn.execute(
                "UPDATE conversations SET metadata = json_set(metadata, '$.private_turns', json('true')) WHERE id = ?",
                (conversation_id,),
            )
    else:
        await conn.execute(
            f"UPDATE memories SET content = '{REDACTED_PREFIX}' || content_hash, context = '{REDACTED_PREFIX}' ||"
            " content_hash,"
            f" spoken_of = '', tool_calls = NULL, metadata = json_set(metadata, '$.{REDACTED}', ?)"
            " WHERE seq IN (SELECT value FROM json_each(?))",
            (retention, chosen),
        )
        await conn.execute(
            "DELETE FROM memory_embeddings WHERE memory_seq IN (SELECT value FROM json_each(?))", (chosen,)
        )
    return seqs + facts, await rewrite_followers(conn, conversation_id, seqs)


async def memory_by_id(conn: aiosqlite.Connection, memory_id: str) -> Memory:
    row = await (await conn.execute(f"SELECT {MEMORY_COLUMNS} FROM memories m WHERE m.id = ?", (memory_id,))).fetchone()
    if row is None:
        raise MemoryNotFoundError(memory_id)
    return memory_from_row(row)


async def memory_by_seq(conn: aiosqlite.Connection, seq: int) -> Memory:
    row = await (await conn.execute(f"SELECT {MEMORY_COLUMNS} FROM memories m WHERE m.seq = ?", (seq,))).fetchone()
    assert row is not None, "a row read inside its own insert transaction"
    return memory_from_row(row)


async def insert_embedding_rows(conn: aiosqlite.Connection, rows: Sequence[EmbeddingRow]) -> int:
    before = conn.total_changes
    await conn.executemany(
        "INSERT OR IGNORE INTO memory_embeddings (memory_seq, model, facet, chunk_index, dim, vector, created_at)"
        " SELECT ?, ?, ?, ?, ?, ?, strftime('%Y-%m-%dT%H:%M:%fZ', 'now')"
        " WHERE EXISTS (SELECT 1 FROM memories WHERE seq = ?)",
        [(r.memory_seq, r.model, r.facet, r.chunk_index, r.dim, r.vector, r.memory_seq) for r in rows],
    )
    return conn.total_changes - before


def filter_sql(filters: SearchFilters) -> tuple[list[str], list[Any]]:
    where: list[str] = []
    params: list[Any] = []
    if filters.conversation_id is not None:
        where.append("m.conversation_id = ?")
        params.append(filters.conversation_id)
    if filters.conversation_ids is not None:
        where.append(f"m.conversation_id IN ({', '.join('?' * len(filters.conversation_ids))})"
                     if filters.conversation_ids else "0")
        params.extend(filters.conversation_ids)
    if not filters.include_superseded:
        where.append("m.superseded_by IS NULL")
    if filters.kinds and set(filters.kinds) != set(KIND_CODES):
        where.append(f"m.kind IN ({', '.join('?' for _ in filters.kinds)})")
        params.extend(filters.kinds)
    if filters.since is not None:
        where.append("m.occurred_at >= ?")
        params.append(filters.since)
    if filters.until is not None:
        where.append("m.occurred_at <= ?")
        params.append(filters.until)
    if filters.actors:
        where.append(f"coalesce(m.actor, m.role) IN ({', '.join('?' for _ in filters.actors)})")
        params.extend(filters.actors)
    if filters.tags:
        where.append(
            "m.seq IN (SELECT memory_seq FROM memory_tags WHERE tag IN (SELECT value FROM json_each(?))"
            " GROUP BY memory_seq HAVING count(*) = ?)"
        )
        params.extend([json.dumps(list(filters.tags)), len(filters.tags)])
    return where, params


def conversation_from_row(row: Sequence[Any]) -> Conversation:
    return Conversation(
        key=int(row[0]), id=row[1], name=row[2], status=row[3], anonymous=bool(row[4]), created_at=row[5],
        ended_at=row[6], metadata=json.loads(row[7]), summary=row[8], summary_status=row[9],
        rolling_summary=row[10], summarized_through=int(row[11]), expires_at=row[12],
        memory_count=int(row[13]) if len(row) > 13 else 0,
        message_count=int(row[14]) if len(row) > 14 else 0,
        last_activity=row[15] if len(row) > 15 else None,
    )



def memory_from_row(row: Sequence[Any]) -> Memory:
    kind: MemoryKind = row[3]
    return Memory(
        seq=int(row[0]), id=row[1], conversation_id=row[2], kind=kind, content=row[4],
        tags=tuple(json.loads(row[5])), metadata=json.loads(row[6]), created_at=row[7], context=row[8],
        role=row[9], actor=row[10], tool_calls=tuple(json.loads(row[11])) if row[11] else (),
        tool_call_id=row[12], superseded_by=row[13], occurred_at=row[14],
    )

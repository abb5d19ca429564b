"""Row helpers both SQL backends share: a memory's row and its context, versions, jobs, retiring
turns, and reading rows back as domain values. Each takes the open connection of the caller's
transaction and the backend's ``Dialect``; SQL is written once, with ``?`` placeholders."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ollama_mcp.domain import CompactAt, Conversation, JobKind, Memory, MemoryKind, SearchFilters
from ollama_mcp.errors import ConversationNotFoundError, MemoryNotFoundError
from ollama_mcp.storage.fact_rules import fact_source
from ollama_mcp.storage.memory_rules import (
    CONTEXT_NEIGHBOURS,
    REDACTED,
    compose_context,
    note_digest,
    own_context,
    redacted_text,
)
from ollama_mcp.storage.sql.dialect import Dialect
from ollama_mcp.storage.sql.placing import claims_to_keep
from ollama_mcp.when import times_named


def memory_columns(d: Dialect) -> str:
    """A memory's (``m``) columns as ``memory_from_row`` reads them."""
    return (
        "m.seq, m.id, m.conversation_id, m.kind, m.content, m.tags, m.metadata, m.created_at,"
        f" {d.context_of('m')}, m.role, m.actor, m.tool_calls, m.tool_call_id, m.superseded_by, m.occurred_at"
    )


MEMORY_WIDTH = 15  # columns in memory_columns: what a query selects after them starts here
# The seq of a fact's source, from the source's id (a parameter; NULL for other kinds).
SOURCE_SEQ = "(SELECT s.seq FROM memories s WHERE s.id = ?)"
ALL_KINDS = frozenset({"note", "message", "summary", "fact"})


def conversation_columns(d: Dialect, *, counted: bool = True) -> str:
    """A conversation's (``c``) columns as ``conversation_from_row`` reads them, its count of
    current notes last (``counted=False``: 0 where counting costs a query)."""
    return (
        "c.key, c.id, c.name, c.status, c.anonymous, c.created_at, c.ended_at, c.metadata,"
        " c.summary, c.summary_status, c.rolling_summary, c.summarized_through, c.expires_at,"
        f" {d.memory_count(counted)}"
    )


def text_kept(d: Dialect, alias: str = "") -> str:
    """"This memory's text is still there" (not a turn an audit-only retention redacted)."""
    return f"{d.json_text(f'{alias}metadata', REDACTED)} IS NULL"


def filter_sql(d: Dialect, filters: SearchFilters, bind: Callable[[Any], str]) -> list[str]:
    """WHERE conditions on ``memories m`` for ``filters``. ``bind`` keeps a value as a parameter and
    returns its placeholder (the backends bind positionally or by name)."""
    where: list[str] = []
    if filters.conversation_id is not None:
        where.append(d.of_conversation("m", bind(filters.conversation_id)))
    if filters.conversation_ids is not None:
        where.append(d.in_conversations("m", bind(d.listed(filters.conversation_ids))))
    if not filters.include_superseded:
        where.append("m.superseded_by IS NULL")
    if filters.kinds and set(filters.kinds) != ALL_KINDS:
        where.append(d.in_list("m.kind", bind(d.listed(filters.kinds))))
    if filters.since is not None:
        where.append(f"m.occurred_at >= {bind(filters.since)}")
    if filters.until is not None:
        where.append(f"m.occurred_at <= {bind(filters.until)}")
    if filters.actors:
        where.append(d.in_list("coalesce(m.actor, m.role)", bind(d.listed(filters.actors))))
    if filters.tags:
        where.append(d.tags_all(filters.tags, bind))
    return where


def filter_conditions(d: Dialect, filters: SearchFilters) -> tuple[list[str], list[Any]]:
    """``filter_sql`` with ``?`` placeholders, and its values in order."""
    params: list[Any] = []

    def bind(value: Any) -> str:
        params.append(value)
        return "?"

    return filter_sql(d, filters, bind), params


async def fetchone(conn: Any, d: Dialect, sql: str, params: Sequence[Any]) -> Any:
    cursor = await conn.execute(d.sql(sql), params)
    return await cursor.fetchone()


async def fetchall(conn: Any, d: Dialect, sql: str, params: Sequence[Any]) -> list[Any]:
    cursor = await conn.execute(d.sql(sql), params)
    return list(await cursor.fetchall())


async def execute(conn: Any, d: Dialect, sql: str, params: Sequence[Any] = ()) -> int:
    """Run one statement; how many rows it changed."""
    cursor = await conn.execute(d.sql(sql), params)
    return int(cursor.rowcount)


async def lock_conversation(conn: Any, d: Dialect, conversation_id: str) -> str:
    """The conversation's status, its row locked for this transaction where the backend locks rows
    (every write that adds, replaces or removes a conversation's memories asks this first)."""
    row = await fetchone(conn, d, f"SELECT status FROM conversations WHERE id = ?{d.for_update}", (conversation_id,))
    if row is None:
        raise ConversationNotFoundError(conversation_id)
    return str(row[0])


async def insert_memory_row(conn: Any, d: Dialect, memory: Memory, *, context_before: int | None = None) -> int | None:
    """Insert the row (with its context: the memories before it, or before seq ``context_before``)
    and its tags; None when an identical current note already exists (the unique index decides,
    so concurrent retries cannot both insert)."""
    context: str | int | None = context_before
    if d.stores_context:
        context = memory.content
        if not own_context(memory):
            earlier = await earlier_contents(conn, d, memory.conversation_id, context_before)
            context = compose_context(earlier, memory.content)
    rows = await fetchall(
        conn, d,
        f"INSERT INTO memories (id, conversation_id{d.KEY_COLUMN}, kind, role, actor, tool_calls, tool_call_id,"
        f" content, note_digest, {context_column(d)}, tags, metadata, created_at, superseded_by, occurred_at,"
        f" spoken_of, claims, source_seq)"
        f" VALUES (?, ?{d.KEY_VALUE}, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, {SOURCE_SEQ})"
        f" ON CONFLICT ({d.NOTE_ONCE}) WHERE kind = 'note' AND superseded_by IS NULL DO NOTHING"
        " RETURNING seq",
        memory_params(d, memory, context, await claims_to_keep(conn, d, memory)),
    )
    if not rows:
        return None
    seq = int(rows[0][0])
    await d.keep_tags(conn, [(seq, tag) for tag in memory.tags])
    return seq


def context_column(d: Dialect) -> str:
    """The column an INSERT gives a memory's context in: PostgreSQL's ``context``, the text;
    SQLite's ``context_before``, the place a new version of a note takes (NULL for any other
    memory: the view ``memory_contexts`` computes the text)."""
    return "context" if d.stores_context else "context_before"


def context_assignment(d: Dialect, context: str) -> tuple[str, tuple[str, ...]]:
    """``, context = ?`` and its value for an UPDATE that rewrites a memory's context, where the
    backend stores it (PostgreSQL); nothing where it computes it (SQLite)."""
    return (", context = ?", (context,)) if d.stores_context else ("", ())


def memory_params(d: Dialect, memory: Memory, context: str | int | None, claims: str) -> tuple[Any, ...]:
    """A memory's values in the order of the INSERT above (``context``: ``context_column``'s)."""
    return (
        memory.id, memory.conversation_id, memory.kind, memory.role, memory.actor,
        d.json(list(memory.tool_calls)) if memory.tool_calls else None, memory.tool_call_id,
        memory.content, note_digest(memory), context, d.tags(memory.tags), d.json(memory.metadata),
        memory.created_at, memory.superseded_by, memory.occurred_at, times_named(memory.content, memory.occurred_at),
        claims, fact_source(memory),
    )


async def latest_version(conn: Any, d: Dialect, memory_id: str) -> str:
    row = await fetchone(
        conn, d,
        "WITH RECURSIVE chain(id, next) AS (SELECT id, superseded_by FROM memories WHERE id = ?"
        " UNION ALL SELECT m.id, m.superseded_by FROM memories m JOIN chain ON m.id = chain.next)"
        " SELECT id FROM chain WHERE next IS NULL",
        (memory_id,),
    )
    return str(row[0]) if row else memory_id


def transcript_size_sql(d: Dialect) -> str:
    """(messages, characters) of a conversation's messages after a seq; parameters (conversation
    id, seq). The store's ``transcript_size`` and the compaction check in a write both ask it."""
    return (f"SELECT count(*), coalesce(sum(length(content)), 0) FROM memories WHERE {d.of_conversation('')}"
            " AND kind = 'message' AND seq > ?")


async def compact_if_due(conn: Any, d: Dialect, conversation_id: str, rule: CompactAt, now: str) -> bool:
    """Queue the conversation's compaction, in the caller's transaction, when its transcript past
    what the rolling summary covers has crossed ``rule``; whether it was queued (and not already)."""
    row = await fetchone(conn, d, "SELECT summarized_through FROM conversations WHERE id = ?", (conversation_id,))
    if row is None:
        return False
    size = await fetchone(conn, d, transcript_size_sql(d), (conversation_id, int(row[0])))
    assert size is not None, "an aggregate has a row"
    return rule.crossed(int(size[0]), int(size[1])) and await enqueue_job_row(conn, d, "compact", conversation_id, now)


async def enqueue_job_row(
    conn: Any, d: Dialect, kind: JobKind, conversation_id: str, now: str, options: str | None = None
) -> bool:
    """Queue a job unless one of that kind is already open for the conversation; ``options``:
    the jobs.options JSON text, if any."""
    changed = await execute(
        conn, d,
        "INSERT INTO jobs (kind, conversation_id, run_after, created_at, options) VALUES (?, ?, ?, ?, ?)"
        " ON CONFLICT (kind, conversation_id) WHERE state IN ('queued', 'running') DO NOTHING",
        (kind, conversation_id, now, now, options),
    )
    return changed > 0


async def earlier_contents(conn: Any, d: Dialect, conversation_id: str, before_seq: int | None = None) -> list[str]:
    """The texts of the CONTEXT_NEIGHBOURS memories before ``before_seq`` (default: the latest),
    oldest first; summaries and redacted turns are not part of anyone's context."""
    rows = await fetchall(
        conn, d,
        f"SELECT content FROM memories WHERE {d.of_conversation('')} AND kind NOT IN ('summary', 'fact') AND seq < ?"
        f" AND {text_kept(d)} ORDER BY seq DESC LIMIT ?",
        (conversation_id, before_seq if before_seq is not None else 2**62, CONTEXT_NEIGHBOURS),
    )
    return [row[0] for row in reversed(rows)]


async def context_followers(conn: Any, d: Dialect, conversation_id: str, seqs: Sequence[int]) -> dict[int, str]:
    """The memories that have one of ``seqs`` (about to be deleted, redacted or rewritten) among
    their context's neighbours, with that context as it is now: what ``rewrite_followers``
    compares with once the change is made. (``seqs`` themselves are the caller's to rewrite.)"""
    if not d.stores_context:
        rows = await fetchall(
            conn, d,
            "SELECT f.follower, v.context FROM memory_context_followers f JOIN memory_contexts v ON v.seq = f.follower"
            f" WHERE {d.in_list('f.seq')} AND NOT {d.in_list('f.follower')}",
            (d.listed(seqs), d.listed(seqs)),
        )
        return {int(seq): str(context) for seq, context in rows}
    found: dict[int, str] = {}
    for seq in sorted(seqs):
        rows = await fetchall(
            conn, d,
            "SELECT seq, context FROM memories WHERE conversation_id = ? AND kind NOT IN ('summary', 'fact')"
            f" AND seq > ? AND {text_kept(d)} ORDER BY seq LIMIT ?",
            (conversation_id, seq, CONTEXT_NEIGHBOURS),
        )
        found.update((int(follower), str(context)) for follower, context in rows if follower not in seqs)
    return found


async def rewrite_followers(conn: Any, d: Dialect, before: dict[int, str]) -> list[int]:
    """The memories ``context_followers`` found before a change whose context the change changed
    lose their context vectors (the backfill computes new ones); PostgreSQL, which stores
    contexts, gets the new text (SQLite's view gives it already). Returns their seqs."""
    changed: list[int] = []
    for seq, old in sorted(before.items()):
        row = await fetchone(
            conn, d, f"SELECT m.conversation_id, m.content, {d.context_of('m')} FROM memories m WHERE m.seq = ?", (seq,)
        )
        if row is None:
            continue  # deleted by the same change
        conversation_id, content, context = row
        if d.stores_context:
            context = compose_context(await earlier_contents(conn, d, conversation_id, seq), content)
        if context == old:
            continue
        if d.stores_context:
            await execute(conn, d, "UPDATE memories SET context = ? WHERE seq = ?", (context, seq))
        await execute(conn, d, "DELETE FROM memory_embeddings WHERE memory_seq = ? AND facet = 'context'", (seq,))
        changed.append(seq)
    return changed


async def facts_from(conn: Any, d: Dialect, seqs: Sequence[int]) -> list[int]:
    """The seqs of the facts extracted from the memories ``seqs``: deleting those deletes them (cascade)."""
    rows = await fetchall(conn, d, f"SELECT seq FROM memories WHERE {d.in_list('source_seq')}", (d.listed(seqs),))
    return [int(row[0]) for row in rows]


async def retire_turns(
    conn: Any, d: Dialect, conversation_id: str, retention: str, through: int
) -> tuple[list[int], list[int]]:
    """Apply an ``audit-only`` or ``ephemeral`` retention to the conversation's turns up to seq
    ``through`` (those a summary covers now): redact them (``redacted_text``: the digest of their text, no
    vectors, no tool calls) or delete them. Once a turn addressed to some participants only is
    deleted, the conversation says so (``private_turns``: participants' views stay private). The
    caller holds the conversation's lock.
    Returns (the seqs redacted or deleted, the seqs whose context was rewritten)."""
    rows = await fetchall(
        conn, d,
        f"SELECT seq, {d.json_has('metadata', 'to')}, content FROM memories WHERE {d.of_conversation('')}"
        f" AND kind = 'message' AND seq <= ? AND {text_kept(d)} ORDER BY seq",
        (conversation_id, through),
    )
    seqs = [int(row[0]) for row in rows]
    if not seqs:
        return [], []
    chosen = d.listed(seqs)
    followers = await context_followers(conn, d, conversation_id, seqs)
    facts: list[int] = []
    if retention == "ephemeral":
        facts = await facts_from(conn, d, seqs)  # deleted with their sources
        await execute(conn, d, f"DELETE FROM memories WHERE {d.in_list('seq')}", (chosen,))
        if any(row[1] for row in rows):
            await execute(
                conn, d,
                f"UPDATE conversations SET metadata = {d.json_with_true('metadata', 'private_turns')} WHERE id = ?",
                (conversation_id,),
            )
    else:
        # The digest is of the text the turn had, computed here: the row keeps none (schema 24).
        set_context = ", context = ?" if d.stores_context else ""
        await d.execute_many(
            conn,
            d.sql(f"UPDATE memories SET content = ?{set_context}, spoken_of = '', claims = '', tool_calls = NULL,"
                  f" metadata = {d.json_with('metadata', REDACTED)} WHERE seq = ?"),
            [(text, *((text,) if d.stores_context else ()), retention, int(row[0]))
             for row in rows for text in [redacted_text(row[2])]],
        )
        await execute(conn, d, f"DELETE FROM memory_embeddings WHERE {d.in_list('memory_seq')}", (chosen,))
    return seqs + facts, await rewrite_followers(conn, d, followers)


async def memory_where(conn: Any, d: Dialect, condition: str, params: Sequence[Any]) -> Memory | None:
    row = await fetchone(conn, d, f"SELECT {memory_columns(d)} FROM memories m WHERE {condition}", params)
    return None if row is None else memory_from_row(d, row)


async def memory_by_id(conn: Any, d: Dialect, memory_id: str) -> Memory:
    found = await memory_where(conn, d, "m.id = ?", (memory_id,))
    if found is None:
        raise MemoryNotFoundError(memory_id)
    return found


async def memory_by_seq(conn: Any, d: Dialect, seq: int) -> Memory:
    found = await memory_where(conn, d, "m.seq = ?", (seq,))
    assert found is not None, "a row read inside its own insert transaction"
    return found


def conversation_from_row(d: Dialect, row: Sequence[Any]) -> Conversation:
    """A row of ``conversation_columns``, perhaps followed by its turns' count, last activity and
    opening (``list_conversations``)."""
    return Conversation(
        key=int(row[0]), id=row[1], name=row[2], status=row[3], anonymous=bool(row[4]), created_at=row[5],
        ended_at=row[6], metadata=d.from_json(row[7]), summary=row[8], summary_status=row[9],
        rolling_summary=row[10], summarized_through=int(row[11]), expires_at=row[12], memory_count=int(row[13]),
        message_count=int(row[14]) if len(row) > 14 else 0, last_activity=row[15] if len(row) > 15 else None,
        opening=row[16] if len(row) > 16 else None,
    )


def memory_from_row(d: Dialect, row: Sequence[Any]) -> Memory:
    kind: MemoryKind = row[3]
    return Memory(
        seq=int(row[0]), id=row[1], conversation_id=row[2], kind=kind, content=row[4], tags=d.from_tags(row[5]),
        metadata=d.from_json(row[6]), created_at=row[7], context=row[8], role=row[9], actor=row[10],
        tool_calls=tuple(d.from_json(row[11])) if row[11] else (), tool_call_id=row[12], superseded_by=row[13],
        occurred_at=row[14],
    )

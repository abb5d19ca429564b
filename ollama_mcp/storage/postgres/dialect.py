"""PostgreSQL's spelling of the shared SQL (``storage/sql/dialect.py``): jsonb operators, arrays
as list parameters, a conversation's row locked before its memories change, counts kept in
columns by triggers."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import anyio
import numpy as np
import psycopg
from psycopg.types.json import Jsonb

from ollama_mcp.storage.sql.dialect import Dialect
from ollama_mcp.storage.sql.parts import pyformat

FACT_LOCKS = 0x66616374  # the advisory lock space of fact keys ("fact")


class PostgresDialect(Dialect):
    greatest = "greatest"
    # Every write that adds, replaces or removes a conversation's memories locks its row first:
    # writes to one conversation queue up (contexts and counts stay consistent), writes to
    # different ones run side by side, all in one lock order.
    for_update = " FOR UPDATE"
    for_key_share = " FOR KEY SHARE"
    serialize_chat_calls = "SELECT pg_advisory_xact_lock(31362935161708802)"  # 0x6F6C6C616D6102: "ollama" + 2

    JSON_TEXT = "{column} ->> '{key}'"
    JSON_TRUE = "{column} ->> '{key}' = 'true'"
    JSON_WITH = "{column} || jsonb_build_object('{key}', CAST(? AS text))"
    JSON_WITH_TRUE = "{column} || jsonb_build_object('{key}', true)"
    JSON_PAIR = "{column} ->> ? = ?"
    IN_LIST = "{column} = ANY({value})"
    NAME_LIKE = "{column} ILIKE ?"  # backslash is LIKE's escape character by default
    # Kept in columns by triggers (postgres/migrations/0004).
    NOTES_OF_C = "c.memory_count"
    MESSAGES_OF_C = "c.message_count"
    OF_CONVERSATION = "{alias}conversation_id = {value}"
    IN_CONVERSATIONS = "{alias}.conversation_id = ANY({value})"
    SAME_CONVERSATION = "{a}.conversation_id = {b}.conversation_id"
    OF_C = "{alias}.conversation_id = c.id"
    NOTE_ONCE = "conversation_id, note_digest"
    KEY_COLUMN = ""
    KEY_VALUE = ""
    LAST_MEMORY_OF_C = "(SELECT max(m.occurred_at) FROM memories m WHERE m.conversation_id = c.id)"  # 0014's index
    notes_cost = False
    stores_context = True
    CONTEXT_OF = "{alias}.context"

    def tags_all(self, tags: Sequence[str], bind: Callable[[Any], str]) -> str:
        return f"m.tags @> {bind(list(tags))}"  # the GIN index on tags serves it

    def sql(self, text: str) -> str:
        return pyformat(text)

    def listed(self, values: Sequence[Any]) -> list[Any]:
        return list(values)

    def json(self, value: Any) -> Jsonb:
        return Jsonb(value)

    def tags(self, tags: Sequence[str]) -> list[str]:
        return list(tags)

    def from_json(self, cell: Any) -> Any:
        return cell

    def from_tags(self, cell: Any) -> tuple[str, ...]:
        return tuple(cell)

    def vector_bytes(self, cell: Any) -> bytes:
        return np.asarray(cell.to_numpy(), dtype="<f4").tobytes()  # a pgvector Vector

    def limit(self, count: int) -> int | None:
        return None if count < 0 else count

    async def execute_many(self, conn: psycopg.AsyncConnection, sql: str, rows: Sequence[Sequence[Any]]) -> int:
        """``executemany``, shielded from cancellation.

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

    async def keep_tags(self, conn: psycopg.AsyncConnection, pairs: Sequence[tuple[int, str]]) -> None:
        """Nothing: the ``tags`` array column is all (a GIN index serves tag filters)."""

    async def keep_conversation_tags(self, conn: psycopg.AsyncConnection, conversation_id: str) -> None:
        """Nothing: the ``tags`` array column is all."""

    async def keep_times(self, conn: psycopg.AsyncConnection, named: Sequence[tuple[int, str]]) -> None:
        await conn.execute(  # one statement: the row counts' trigger runs per statement
            "UPDATE memories m SET spoken_of = n.spoken FROM unnest(%s::bigint[], %s::text[]) AS n(seq, spoken)"
            " WHERE m.seq = n.seq AND m.spoken_of IS NULL",
            ([seq for seq, _ in named], [times for _, times in named]),
        )

    async def lock_fact_keys(self, conn: psycopg.AsyncConnection, keys: Sequence[str]) -> None:
        """An advisory lock per key, in the given (sorted) order: no deadlock between instances."""
        for key in keys:
            await conn.execute("SELECT pg_advisory_xact_lock(%s, hashtext(%s))", (FACT_LOCKS, key))


POSTGRES = PostgresDialect()

"""PostgreSQL's spelling of the shared SQL (``storage/sql/dialect.py``): jsonb operators, arrays
as list parameters, a conversation's row locked before its memories change, counts kept in
columns by triggers."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import anyio
import numpy as np
import psycopg
from psycopg.types.json import Jsonb

from ollama_mcp.storage.sql.dialect import Dialect
from ollama_mcp.storage.sql.parts import pyformat

FACT_LOCKS = 0x66616374  # the advisory lock space of fact keys ("fact")


class PostgresDialect(Dialect):
    conversation_key = "key"
    greatest = "greatest"
    # Every write that adds, replaces or removes a conversation's memories locks its row first:
    # writes to one conversation queue up (contexts and counts stay consistent), writes to
    # different ones run side by side, all in one lock order.
    for_update = " FOR UPDATE"
    for_key_share = " FOR KEY SHARE"

    def sql(self, text: str) -> str:
        return pyformat(text)

    def json_text(self, column: str, key: str) -> str:
        return f"{column} ->> '{key}'"

    def json_true(self, column: str, key: str) -> str:
        return f"{column} ->> '{key}' = 'true'"

    def json_has(self, column: str, key: str) -> str:
        return f"{column} ->> '{key}' IS NOT NULL"

    def json_with(self, column: str, key: str) -> str:
        return f"{column} || jsonb_build_object('{key}', CAST(? AS text))"

    def json_with_true(self, column: str, key: str) -> str:
        return f"{column} || '{{\"{key}\": true}}'"

    def json_pair(self, column: str) -> str:
        return f"{column} ->> ? = ?"

    def in_list(self, column: str) -> str:
        return f"{column} = ANY(?)"

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

    def name_like(self, column: str) -> str:
        return f"{column} ILIKE ?"  # backslash is LIKE's escape character by default

    def memory_count(self, counted: bool) -> str:
        return "c.memory_count"

    def message_count(self) -> str:
        return "c.message_count"

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

    async def lock_fact_keys(self, conn: psycopg.AsyncConnection, keys: Sequence[str]) -> None:
        """An advisory lock per key, in the given (sorted) order: no deadlock between instances."""
        for key in keys:
            await conn.execute("SELECT pg_advisory_xact_lock(%s, hashtext(%s))", (FACT_LOCKS, key))


POSTGRES = PostgresDialect()

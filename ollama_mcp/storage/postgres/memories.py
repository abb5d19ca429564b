"""Memories, PostgreSQL's part: moments under search filters, and the times memories name (the
rest: ``storage/sql/memories.py``)."""

from __future__ import annotations

from typing import Any

import psycopg

from ollama_mcp.domain import SearchFilters
from ollama_mcp.storage.postgres.base import PgStoreBase
from ollama_mcp.storage.postgres.rows import filter_sql
from ollama_mcp.storage.records import MOMENT_COLUMNS, moment_from_row
from ollama_mcp.storage.sql import memories
from ollama_mcp.when import times_named


class MemoryStore(memories.MemoryStore, PgStoreBase):
    """Memories: insert (one or in bulk, de-duplicated), read, revise, delete."""

    async def moments_between(
        self, filters: SearchFilters, start: str, end: str, limit: int
    ) -> dict[int, tuple[str, str]]:
        async with self._connection("read what happened after a time") as conn:
            return await moments_between(conn, filters, start, end, limit)

    async def name_times(self, limit: int) -> int:
        rows = await self._fetchall(
            "SELECT seq, content, occurred_at FROM memories WHERE spoken_of IS NULL ORDER BY seq LIMIT %s",
            (limit,), "read the memories whose times are not kept yet",
        )
        if rows:  # parsed outside the write transaction; a memory redacted meanwhile keeps its ""
            seqs = [int(seq) for seq, _, _ in rows]
            named = [times_named(content, occurred_at) for _, content, occurred_at in rows]
            async with self._transaction("keep the times memories name") as conn:
                await conn.execute(  # one statement: the row counts' trigger runs per statement
                    "UPDATE memories m SET spoken_of = n.spoken FROM unnest(%s::bigint[], %s::text[]) AS n(seq, spoken)"
                    " WHERE m.seq = n.seq AND m.spoken_of IS NULL",
                    (seqs, named),
                )
        return len(rows)


async def moments_between(
    conn: psycopg.AsyncConnection, filters: SearchFilters, start: str, end: str, limit: int
) -> dict[int, tuple[str, str]]:
    """``Storage.moments_between`` on ``conn`` (the ranker reads it beside its other lists)."""
    params: dict[str, Any] = {"start": start, "end": end, "limit": limit}
    where = [*filter_sql(filters, params), "m.occurred_at >= %(start)s", "m.occurred_at < %(end)s"]
    cursor = await conn.execute(
        f"SELECT {MOMENT_COLUMNS} FROM memories m WHERE {' AND '.join(where)}"
        " ORDER BY m.occurred_at, m.seq LIMIT %(limit)s",
        params,
    )
    return dict(moment_from_row(row) for row in await cursor.fetchall())

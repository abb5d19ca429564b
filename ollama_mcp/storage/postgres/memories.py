"""Memories, PostgreSQL's part: moments under search filters, and the times memories name (the
rest: ``storage/sql/memories.py``)."""

from __future__ import annotations

from typing import Any

import psycopg

from ollama_mcp.domain import SearchFilters
from ollama_mcp.storage.postgres.base import PgStoreBase
from ollama_mcp.storage.postgres.rows import filter_sql
from ollama_mcp.storage.sql import memories
from ollama_mcp.storage.sql.fragments import MOMENT_COLUMNS, moment_from_row


class MemoryStore(memories.MemoryStore, PgStoreBase):
    """Memories (``storage/sql/memories.py``), with PostgreSQL's reading of moments under filters."""

    async def moments_between(
        self, filters: SearchFilters, start: str, end: str, limit: int
    ) -> dict[int, tuple[str, str]]:
        async with self._connection("read what happened after a time") as conn:
            return await moments_between(conn, filters, start, end, limit)


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

"""Memories, SQLite's part: moments under search filters, and the times memories name (the rest:
``storage/sql/memories.py``)."""

from __future__ import annotations

from ollama_mcp.domain import SearchFilters
from ollama_mcp.storage.sql import memories
from ollama_mcp.storage.sql.fragments import MOMENT_COLUMNS, moment_from_row
from ollama_mcp.storage.sqlite.base import StoreBase
from ollama_mcp.storage.sqlite.rows import filter_sql


class MemoryStore(memories.MemoryStore, StoreBase):
    """Memories (``storage/sql/memories.py``), with SQLite's reading of moments under filters."""

    async def moments_between(
        self, filters: SearchFilters, start: str, end: str, limit: int
    ) -> dict[int, tuple[str, str]]:
        where, params = filter_sql(filters)
        rows = await self._fetchall(
            f"SELECT {MOMENT_COLUMNS} FROM memories m"
            f" WHERE {' AND '.join([*where, 'm.occurred_at >= ?', 'm.occurred_at < ?'])}"
            " ORDER BY m.occurred_at, m.seq LIMIT ?",
            (*params, start, end, limit),
            "read what happened after a time",
        )
        return dict(moment_from_row(row) for row in rows)

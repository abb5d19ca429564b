"""What only the PostgreSQL store's parts share: vectors' rows and search filters bound by name
(the row helpers both backends share: ``storage/sql/rows.py``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import psycopg

from ollama_mcp.domain import EmbeddingRow, SearchFilters, utc_now
from ollama_mcp.storage.postgres.dialect import POSTGRES
from ollama_mcp.storage.sql import rows


def vector_of(row: EmbeddingRow) -> np.ndarray:
    return np.frombuffer(row.vector, dtype="<f4")


async def insert_embedding_rows(conn: psycopg.AsyncConnection, rows: Sequence[EmbeddingRow]) -> int:
    """Insert vectors; rows of memories deleted meanwhile, or stored already, are skipped."""
    if not rows:
        return 0
    now = utc_now()
    return await POSTGRES.execute_many(
        conn,
        "INSERT INTO memory_embeddings (memory_seq, model, facet, chunk_index, dim, vector, created_at)"
        " SELECT %s, %s, %s, %s, %s, %s, %s WHERE EXISTS (SELECT 1 FROM memories WHERE seq = %s)"
        " ON CONFLICT DO NOTHING",
        [(r.memory_seq, r.model, r.facet, r.chunk_index, r.dim, vector_of(r), now, r.memory_seq) for r in rows],
    )


def filter_sql(filters: SearchFilters, params: dict[str, Any]) -> list[str]:
    """WHERE conditions on ``memories m`` for ``filters`` (``storage/sql/rows.py``); their values are
    added to ``params`` under names of their own."""

    def bind(value: Any) -> str:
        name = f"filter_{len(params)}"
        params[name] = value
        return f"%({name})s"

    return rows.filter_sql(POSTGRES, filters, bind)

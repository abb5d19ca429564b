"""What only the PostgreSQL store's parts share: vectors' rows, search filters and the pending-vector
condition (the row helpers both backends share: ``storage/sql/rows.py``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import psycopg

from ollama_mcp.domain import EmbeddingRow, SearchFilters, utc_now
from ollama_mcp.storage.postgres.dialect import POSTGRES
from ollama_mcp.storage.records import REDACTED
from ollama_mcp.storage.sql.rows import ALL_KINDS

# "This memory awaits a vector of model %(model)s for the facet": pending embeddings. (A redacted
# turn has none and gets none.)
MISSING_VECTOR = (
    "(NOT EXISTS (SELECT 1 FROM memory_embeddings e WHERE e.memory_seq = m.seq AND e.model = %(model)s"
    f" AND e.facet = '{{}}') AND m.metadata ->> '{REDACTED}' IS NULL)"
)


async def stored_dimension(conn: psycopg.AsyncConnection, model: str) -> int | None:
    """The dimension the stored vectors of ``model`` use (None: it has none)."""
    cursor = await conn.execute("SELECT dim FROM memory_embeddings WHERE model = %s LIMIT 1", (model,))
    row = await cursor.fetchone()
    return None if row is None else int(row[0])


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



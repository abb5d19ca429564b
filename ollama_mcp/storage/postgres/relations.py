"""How alike conversations' end summaries are, this backend's way (the rest of the relations:
``storage/sql/relations.py``): pgvector compares."""

from __future__ import annotations

from ollama_mcp.storage.postgres.base import PgStoreBase
from ollama_mcp.storage.postgres.dialect import POSTGRES
from ollama_mcp.storage.sql import relations
from ollama_mcp.storage.sql.relations import end_summary

_SUMMARY_VECTORS = (
    "FROM memories m JOIN memory_embeddings e ON e.memory_seq = m.seq"
    f" WHERE {end_summary(POSTGRES)} AND e.model = %(model)s AND e.facet = 'content' AND e.chunk_index = 0"
)


class RelationStore(relations.RelationStore, PgStoreBase):
    """Relations (``storage/sql/relations.py``); summaries compared by pgvector."""

    async def similar_summaries(self, conversation_id: str, model: str, limit: int) -> list[tuple[str, float]] | None:
        """One scan of the end summaries' vectors (one per ended conversation): no index fits a
        search restricted to summaries, and there are few of them."""
        params = {"model": model, "id": conversation_id, "limit": limit}
        async with self.reading("compare the conversation's summary") as conn:
            mine = await (await conn.execute(
                f"SELECT e.vector, e.dim {_SUMMARY_VECTORS} AND m.conversation_id = %(id)s ORDER BY m.seq DESC LIMIT 1",
                params,
            )).fetchone()
            if mine is None:
                return None
            rows = await (await conn.execute(
                f"SELECT m.conversation_id, max(1 - (e.vector <=> %(vector)s)) AS score {_SUMMARY_VECTORS}"
                " AND m.conversation_id <> %(id)s AND e.dim = %(dim)s"
                " GROUP BY m.conversation_id ORDER BY score DESC, m.conversation_id LIMIT %(limit)s",
                {**params, "vector": mine[0], "dim": mine[1]},
            )).fetchall()
        return [(row[0], float(row[1])) for row in rows]

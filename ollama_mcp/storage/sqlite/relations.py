"""How alike conversations' end summaries are, this backend's way (the rest of the relations:
``storage/sql/relations.py``): numpy over the stored vectors."""

from __future__ import annotations

import numpy as np

from ollama_mcp.storage.sql import relations
from ollama_mcp.storage.sql.relations import end_summary
from ollama_mcp.storage.sqlite.base import StoreBase
from ollama_mcp.storage.sqlite.dialect import SQLITE
from ollama_mcp.storage.sqlite.vectors import vectors_of

_SUMMARY_VECTORS = (
    "SELECT m.conversation_id, e.vector, e.dim, e.block_id, e.slot FROM memories m"
    " JOIN memory_embeddings e ON e.memory_seq = m.seq"
    f" WHERE {end_summary(SQLITE)} AND e.model = ? AND e.facet = 'content' AND e.chunk_index = 0"
)


class RelationStore(relations.RelationStore, StoreBase):
    """Relations (``storage/sql/relations.py``); summaries compared with numpy."""

    async def similar_summaries(self, conversation_id: str, model: str, limit: int) -> list[tuple[str, float]] | None:
        """Compared here in one pass: a conversation has one end summary, so this reads one
        vector per ended conversation (a few thousand in a large store). Stored vectors are unit
        length (``embeddings``), so a dot product is their cosine, as in the vector index."""
        async with self._snapshot("read the summaries' vectors") as conn:
            mine = list(await conn.execute_fetchall(
                f"{_SUMMARY_VECTORS} AND {SQLITE.of_conversation('m')} ORDER BY m.seq DESC LIMIT 1",
                (model, conversation_id),
            ))
            if not mine:
                return None
            dim = int(mine[0][2])
            rows = list(await conn.execute_fetchall(
                f"{_SUMMARY_VECTORS} AND m.conversation_id != ? AND e.dim = ?", (model, conversation_id, dim),
            ))
            vectors = await vectors_of(conn, [(row[1], row[3], row[4]) for row in [*mine, *rows]])
        if not rows:
            return []
        query = np.frombuffer(vectors[0], dtype="<f4")
        scores = np.frombuffer(b"".join(vectors[1:]), dtype="<f4").reshape(len(rows), dim) @ query
        best: dict[str, float] = {}
        for row, score in zip(rows, scores.tolist(), strict=True):
            best[row[0]] = max(score, best.get(row[0], -1.0))
        return sorted(best.items(), key=lambda pair: -pair[1])[:limit]

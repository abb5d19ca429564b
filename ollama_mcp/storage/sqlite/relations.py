"""Relations between conversations (the conversation_relations table) and what finding them
reads: a conversation's end summary and how alike the end summaries are."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ollama_mcp.domain import Memory, Relation, RelationKind
from ollama_mcp.storage.records import merge_relations
from ollama_mcp.storage.sqlite.base import StoreBase
from ollama_mcp.storage.sqlite.rows import MEMORY_COLUMNS, memory_from_row

# A conversation's end summary: a summary that is neither a rolling one nor a detailed level of
# hierarchical compaction, and not replaced.
END_SUMMARY = (
    "m.kind = 'summary' AND m.superseded_by IS NULL"
    " AND json_extract(m.metadata, '$.rolling') IS NULL AND json_extract(m.metadata, '$.level') IS NULL"
)
_SUMMARY_VECTORS = (
    "SELECT m.conversation_id, e.vector, e.dim FROM memories m JOIN memory_embeddings e ON e.memory_seq = m.seq"
    f" WHERE {END_SUMMARY} AND e.model = ? AND e.facet = 'content' AND e.chunk_index = 0"
)


class RelationStore(StoreBase):
    """Follow-ups, related and duplicate conversations."""

    async def relations(self, conversation_id: str, *, recorded: bool = False) -> list[Relation]:
        rows = await self._fetchall(
            "SELECT c.id, c.name, c.status, r.kind, r.score, r.conversation_id = ?1, r.created_at"
            " FROM conversation_relations r JOIN conversations c"
            " ON c.id = CASE WHEN r.conversation_id = ?1 THEN r.related_id ELSE r.conversation_id END"
            f" WHERE r.conversation_id = ?1{'' if recorded else ' OR r.related_id = ?1'} ORDER BY c.id",
            (conversation_id,), "read the conversation's relations",
        )
        found = [Relation(row[0], row[1], row[2], row[3], row[4], bool(row[5]), row[6]) for row in rows]
        return found if recorded else merge_relations(found)

    async def end_summary(self, conversation_id: str) -> Memory | None:
        rows = await self._fetchall(
            f"SELECT {MEMORY_COLUMNS} FROM memories m WHERE m.conversation_id = ? AND {END_SUMMARY}"
            " ORDER BY m.seq DESC LIMIT 1",
            (conversation_id,), "read the conversation's summary",
        )
        return memory_from_row(rows[0]) if rows else None

    async def similar_summaries(self, conversation_id: str, model: str, limit: int) -> list[tuple[str, float]] | None:
        """Compared here in one pass: a conversation has one end summary, so this reads one
        vector per ended conversation (a few thousand in a large store). Stored vectors are unit
        length (``embeddings``), so a dot product is their cosine, as in the vector index."""
        mine = await self._fetchall(
            f"{_SUMMARY_VECTORS} AND m.conversation_id = ? ORDER BY m.seq DESC LIMIT 1",
            (model, conversation_id), "read the summary's vector",
        )
        if not mine:
            return None
        dim = int(mine[0][2])
        rows = await self._fetchall(
            f"{_SUMMARY_VECTORS} AND m.conversation_id != ? AND e.dim = ?",
            (model, conversation_id, dim), "read the vectors of the other summaries",
        )
        if not rows:
            return []
        query = np.frombuffer(mine[0][1], dtype="<f4")
        scores = np.frombuffer(b"".join(row[1] for row in rows), dtype="<f4").reshape(len(rows), dim) @ query
        best: dict[str, float] = {}
        for row, score in zip(rows, scores.tolist(), strict=True):
            best[row[0]] = max(score, best.get(row[0], -1.0))
        return sorted(best.items(), key=lambda pair: -pair[1])[:limit]

    async def set_similar(
        self, conversation_id: str, similar: Sequence[tuple[str, RelationKind, float]], now: str
    ) -> None:
        async with self._transaction("link related conversations") as conn:
            await conn.execute(
                "DELETE FROM conversation_relations WHERE conversation_id = ? AND kind != 'follow_up'",
                (conversation_id,),
            )
            await conn.execute(
                "UPDATE conversation_relations SET score = NULL WHERE conversation_id = ?", (conversation_id,)
            )
            for other, kind, score in similar:
                await conn.execute(
                    "INSERT INTO conversation_relations (conversation_id, related_id, kind, score, created_at)"
                    " SELECT ?1, ?2, ?3, ?4, ?5 WHERE EXISTS (SELECT 1 FROM conversations WHERE id = ?2)"
                    " ON CONFLICT (conversation_id, related_id) DO UPDATE SET score = excluded.score",
                    (conversation_id, other, kind, score, now),
                )

    async def import_relations(self, conversation_id: str, relations: Sequence[Relation]) -> int:
        added = 0
        async with self._transaction("copy the conversation's relations") as conn:
            for r in relations:
                cursor = await conn.execute(
                    "INSERT INTO conversation_relations (conversation_id, related_id, kind, score, created_at)"
                    " SELECT ?1, ?2, ?3, ?4, ?5 WHERE EXISTS (SELECT 1 FROM conversations WHERE id = ?1)"
                    " AND EXISTS (SELECT 1 FROM conversations WHERE id = ?2) ON CONFLICT DO NOTHING",
                    (conversation_id, r.conversation_id, r.kind, r.score, r.created_at),
                )
                added += max(cursor.rowcount, 0)
        return added

"""Relations between conversations (the conversation_relations table) and what finding them
reads: a conversation's end summary and how alike the end summaries are (pgvector compares)."""

from __future__ import annotations

from collections.abc import Sequence

from ollama_mcp.domain import Memory, Relation, RelationKind
from ollama_mcp.storage.postgres.base import PgStoreBase
from ollama_mcp.storage.postgres.rows import MEMORY_COLUMNS, memory_from_row
from ollama_mcp.storage.records import merge_relations

# A conversation's end summary: a summary that is neither a rolling one nor a detailed level of
# hierarchical compaction, and not replaced.
END_SUMMARY = (
    "m.kind = 'summary' AND m.superseded_by IS NULL AND m.metadata -> 'rolling' IS NULL"
    " AND m.metadata -> 'level' IS NULL"
)
_SUMMARY_VECTORS = (
    "FROM memories m JOIN memory_embeddings e ON e.memory_seq = m.seq"
    f" WHERE {END_SUMMARY} AND e.model = %(model)s AND e.facet = 'content' AND e.chunk_index = 0"
)


class RelationStore(PgStoreBase):
    """Follow-ups, related and duplicate conversations."""

    async def relations(self, conversation_id: str, *, recorded: bool = False) -> list[Relation]:
        rows = await self._fetchall(
            "SELECT c.id, c.name, c.status, r.kind, r.score, r.conversation_id = %(id)s, r.created_at"
            " FROM conversation_relations r JOIN conversations c"
            " ON c.id = CASE WHEN r.conversation_id = %(id)s THEN r.related_id ELSE r.conversation_id END"
            f" WHERE r.conversation_id = %(id)s{'' if recorded else ' OR r.related_id = %(id)s'} ORDER BY c.id",
            {"id": conversation_id}, "read the conversation's relations",
        )
        found = [Relation(*row) for row in rows]
        return found if recorded else merge_relations(found)

    async def end_summary(self, conversation_id: str) -> Memory | None:
        rows = await self._fetchall(
            f"SELECT {MEMORY_COLUMNS} FROM memories m WHERE m.conversation_id = %s AND {END_SUMMARY}"
            " ORDER BY m.seq DESC LIMIT 1",
            (conversation_id,), "read the conversation's summary",
        )
        return memory_from_row(rows[0]) if rows else None

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

    async def set_similar(
        self, conversation_id: str, similar: Sequence[tuple[str, RelationKind, float]], now: str
    ) -> None:
        async with self._transaction("link related conversations") as conn:
            await conn.execute(
                "DELETE FROM conversation_relations WHERE conversation_id = %s AND kind <> 'follow_up'",
                (conversation_id,),
            )
            await conn.execute(
                "UPDATE conversation_relations SET score = NULL WHERE conversation_id = %s", (conversation_id,)
            )
            for other, kind, score in similar:
                # FOR KEY SHARE: a conversation deleted meanwhile is skipped, not a foreign-key error.
                await conn.execute(
                    "INSERT INTO conversation_relations (conversation_id, related_id, kind, score, created_at)"
                    " SELECT %(id)s, c.id, %(kind)s, %(score)s, %(now)s FROM conversations c"
                    " WHERE c.id = %(other)s FOR KEY SHARE"
                    " ON CONFLICT (conversation_id, related_id) DO UPDATE SET score = excluded.score",
                    {"id": conversation_id, "other": other, "kind": kind, "score": score, "now": now},
                )

    async def import_relations(self, conversation_id: str, relations: Sequence[Relation]) -> int:
        added = 0
        async with self._transaction("copy the conversation's relations") as conn:
            for r in relations:
                cursor = await conn.execute(
                    "INSERT INTO conversation_relations (conversation_id, related_id, kind, score, created_at)"
                    " SELECT a.id, b.id, %s, %s, %s FROM conversations a, conversations b"
                    " WHERE a.id = %s AND b.id = %s FOR KEY SHARE ON CONFLICT DO NOTHING",
                    (r.kind, r.score, r.created_at, conversation_id, r.conversation_id),
                )
                added += max(cursor.rowcount, 0)
        return added

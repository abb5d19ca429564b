"""Relations between conversations (the conversation_relations table) and a conversation's end
summary, on either SQL backend. How alike the end summaries are is the backend's own
(``similar_summaries``: numpy over SQLite's blobs, pgvector's distance on PostgreSQL)."""

from __future__ import annotations

from collections.abc import Sequence

from ollama_mcp.domain import Memory, Relation, RelationKind
from ollama_mcp.storage.relation_rules import merge_relations
from ollama_mcp.storage.sql.dialect import Dialect
from ollama_mcp.storage.sql.parts import SqlParts
from ollama_mcp.storage.sql.rows import execute, memory_columns, memory_from_row


def end_summary(d: Dialect) -> str:
    """A condition on ``m``: a conversation's end summary — a summary that is neither a rolling one
    nor a detailed level of hierarchical compaction, and not replaced."""
    return (
        "m.kind = 'summary' AND m.superseded_by IS NULL"
        f" AND {d.json_text('m.metadata', 'rolling')} IS NULL AND {d.json_text('m.metadata', 'level')} IS NULL"
    )


class RelationStore(SqlParts):
    """Follow-ups, related and duplicate conversations."""

    async def relations(self, conversation_id: str, *, recorded: bool = False) -> list[Relation]:
        either = "" if recorded else " OR r.related_id = ?"
        rows = await self._fetchall(
            self._dialect.sql(
                "SELECT c.id, c.name, c.status, r.kind, r.score, r.conversation_id = ?, r.created_at"
                " FROM conversation_relations r JOIN conversations c"
                " ON c.id = CASE WHEN r.conversation_id = ? THEN r.related_id ELSE r.conversation_id END"
                f" WHERE r.conversation_id = ?{either} ORDER BY c.id"
            ),
            (conversation_id,) * (3 if recorded else 4), "read the conversation's relations",
        )
        found = [Relation(row[0], row[1], row[2], row[3], row[4], bool(row[5]), row[6]) for row in rows]
        return found if recorded else merge_relations(found)

    async def end_summary(self, conversation_id: str) -> Memory | None:
        rows = await self._fetchall(
            self._dialect.sql(
                f"SELECT {memory_columns(self._dialect)} FROM memories m"
                f" WHERE {self._dialect.of_conversation('m')} AND {end_summary(self._dialect)}"
                " ORDER BY m.seq DESC LIMIT 1"
            ),
            (conversation_id,), "read the conversation's summary",
        )
        return memory_from_row(self._dialect, rows[0]) if rows else None

    async def set_similar(
        self, conversation_id: str, similar: Sequence[tuple[str, RelationKind, float]], now: str
    ) -> None:
        d = self._dialect
        async with self._transaction("link related conversations") as conn:
            await execute(
                conn, d, "DELETE FROM conversation_relations WHERE conversation_id = ? AND kind <> 'follow_up'",
                (conversation_id,),
            )
            await execute(
                conn, d, "UPDATE conversation_relations SET score = NULL WHERE conversation_id = ?", (conversation_id,)
            )
            for other, kind, score in similar:
                # Locked for key share where rows lock: one deleted meanwhile is skipped, not a foreign-key error.
                await execute(
                    conn, d,
                    "INSERT INTO conversation_relations (conversation_id, related_id, kind, score, created_at)"
                    f" SELECT ?, c.id, ?, ?, ? FROM conversations c WHERE c.id = ?{d.for_key_share}"
                    " ON CONFLICT (conversation_id, related_id) DO UPDATE SET score = excluded.score",
                    (conversation_id, kind, score, now, other),
                )

    async def import_relations(self, conversation_id: str, relations: Sequence[Relation]) -> int:
        d = self._dialect
        added = 0
        async with self._transaction("copy the conversation's relations") as conn:
            for r in relations:
                added += max(await execute(
                    conn, d,
                    "INSERT INTO conversation_relations (conversation_id, related_id, kind, score, created_at)"
                    " SELECT a.id, b.id, ?, ?, ? FROM conversations a, conversations b"
                    f" WHERE a.id = ? AND b.id = ?{d.for_key_share} ON CONFLICT DO NOTHING",
                    (r.kind, r.score, r.created_at, conversation_id, r.conversation_id),
                ), 0)
        return added

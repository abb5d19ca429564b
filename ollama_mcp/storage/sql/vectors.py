"""Vector rows both SQL backends read alike: a model's dimension, what awaits a vector, a
conversation's vectors. Writing vectors, leasing pending memories and indexing them are each
backend's own (``sqlite/vectors.py``, ``postgres/vectors.py``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ollama_mcp.domain import EmbeddingRow, Facet, Memory
from ollama_mcp.storage.sql.dialect import Dialect
from ollama_mcp.storage.sql.parts import SqlParts
from ollama_mcp.storage.sql.rows import MEMORY_WIDTH, memory_from_row, text_kept


def missing_vector(d: Dialect, facet: Facet, model: str = "?") -> str:
    """A condition on ``m``: it awaits a vector of the model for ``facet`` (``model``: the model's
    placeholder, where a query binds by number or name). Pending embeddings, everywhere. (A
    redacted turn has none and gets none: the second test runs only for memories lacking one.)"""
    return (
        f"(NOT EXISTS (SELECT 1 FROM memory_embeddings e WHERE e.memory_seq = m.seq AND e.model = {model}"
        f" AND e.facet = '{facet}') AND {text_kept(d, 'm.')})"
    )


def pending_from_rows(d: Dialect, rows: Sequence[Sequence[Any]]) -> list[tuple[Memory, tuple[Facet, ...]]]:
    """Rows of a memory's columns followed by "lacks content", "lacks context": each memory with
    the facets it lacks."""
    out: list[tuple[Memory, tuple[Facet, ...]]] = []
    for row in rows:
        facets: list[Facet] = []
        if row[MEMORY_WIDTH]:
            facets.append("content")
        if row[MEMORY_WIDTH + 1]:
            facets.append("context")
        out.append((memory_from_row(d, row), tuple(facets)))
    return out


class VectorRows(SqlParts):
    """What both backends read alike of the memory_embeddings table."""

    async def insert_embeddings(self, rows: Sequence[EmbeddingRow]) -> int:
        """Store vectors; rows of memories deleted meanwhile, or stored already, are skipped."""
        if not rows:
            return 0
        async with self._transaction("store embeddings") as conn:
            written = await self._insert_vectors(conn, rows, backfill=True)
        await self._vectors_stored(rows)
        return written

    async def delete_vectors(self, model: str) -> int:
        """Drop every vector of ``model`` (reembed --force); the memories become pending."""
        async with self._transaction("delete vectors") as conn:
            cursor = await conn.execute(self._dialect.sql("DELETE FROM memory_embeddings WHERE model = ?"), (model,))
            await self._vectors_dropped(conn, model)
            return int(cursor.rowcount)

    async def model_dimension(self, model: str, conversation_id: str | None = None) -> int | None:
        """The dimension the stored vectors of ``model`` use (in one conversation, if given)."""
        if conversation_id is None:
            sql, params = "SELECT dim FROM memory_embeddings WHERE model = ? LIMIT 1", [model]
        else:
            sql = (
                "SELECT e.dim FROM memory_embeddings e JOIN memories m ON m.seq = e.memory_seq"
                f" WHERE e.model = ? AND {self._dialect.of_conversation('m')} LIMIT 1"
            )
            params = [model, conversation_id]
        rows = await self._fetchall(self._dialect.sql(sql), params, "read the embedding dimension")
        return int(rows[0][0]) if rows else None

    async def newest_seq(self) -> int:
        """The highest memory seq (0 in an empty store), read in constant time."""
        rows = await self._fetchall("SELECT coalesce(max(seq), 0) FROM memories", (), "read the newest memory")
        return int(rows[0][0])

    async def pending_count(self, model: str) -> int:
        """Memories lacking a vector of ``model`` for some facet."""
        d = self._dialect
        rows = await self._fetchall(
            d.sql(
                f"SELECT count(*) FROM memories m WHERE ({missing_vector(d, 'content')}"
                f" OR {missing_vector(d, 'context')})"
            ),
            (model, model), "count pending memories",
        )
        return int(rows[0][0])

    async def memory_is_pending(self, memory_seq: int, model: str) -> bool:
        d = self._dialect
        rows = await self._fetchall(
            d.sql(f"SELECT {missing_vector(d, 'content')} FROM memories m WHERE m.seq = ?"),
            (model, memory_seq), "read the embedding state",
        )
        return bool(rows and rows[0][0])

    async def chunk_vectors(self, memory_seqs: Sequence[int], model: str) -> dict[int, dict[int, bytes]]:
        """The content vectors of ``model`` of each memory's chunks, by chunk index."""
        if not memory_seqs:
            return {}
        d = self._dialect
        rows = await self._fetchall(
            d.sql(
                "SELECT memory_seq, chunk_index, vector FROM memory_embeddings"
                f" WHERE model = ? AND facet = 'content' AND memory_seq IN ({', '.join('?' * len(memory_seqs))})"
            ),
            (model, *memory_seqs), "read the vectors of a memory's passages",
        )
        found: dict[int, dict[int, bytes]] = {}
        for seq, chunk, vector in rows:
            found.setdefault(int(seq), {})[int(chunk)] = d.vector_bytes(vector)
        return found

    async def conversation_vectors(self, conversation_id: str) -> list[tuple[str, EmbeddingRow]]:
        """Every vector of the conversation's memories, with the id of the memory it belongs to."""
        rows = await self._fetchall(
            self._dialect.sql(
                "SELECT m.id, e.memory_seq, e.facet, e.chunk_index, e.model, e.vector, e.dim FROM memories m"
                f" JOIN memory_embeddings e ON e.memory_seq = m.seq WHERE {self._dialect.of_conversation('m')}"
                " ORDER BY e.id"
            ),
            (conversation_id,), "read the conversation's vectors",
        )
        vector = self._dialect.vector_bytes
        return [(row[0], EmbeddingRow(row[1], row[2], row[3], row[4], vector(row[5]), row[6])) for row in rows]

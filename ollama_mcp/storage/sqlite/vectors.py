"""Vector rows: insert, pending memories per model, and snapshots for the in-memory vector index."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ollama_mcp.domain import Facet, Memory
from ollama_mcp.storage.memory_rules import CONTEXT_NEIGHBOUR_CHARS, CONTEXT_NEIGHBOURS
from ollama_mcp.storage.sql.rows import MEMORY_COLUMNS, text_kept
from ollama_mcp.storage.sql.vectors import VectorRows, missing_vector, pending_from_rows
from ollama_mcp.storage.sqlite.base import StoreBase
from ollama_mcp.storage.sqlite.dialect import SQLITE
from ollama_mcp.storage.sqlite.rows import (
    FACET_CODES,
    KIND_CODES,
    VECTOR_BATCH_ROWS,
)


@dataclass(frozen=True)
class VectorBatch:
    """Rows of ``memory_embeddings`` for one model, as the vector index needs them."""

    ids: list[int]
    memory_seqs: list[int]
    conversation_keys: list[int]
    kinds: list[int]
    facets: list[int]
    dims: list[int]
    vectors: list[bytes]


class VectorStore(VectorRows, StoreBase):
    """Vector rows: insert, pending memories per model, and snapshots for the in-memory vector index."""

    async def pending_memories(
        self, model: str, limit: int, after_seq: int = 0, through_seq: int | None = None
    ) -> list[tuple[Memory, tuple[Facet, ...]]]:
        """Memories after ``after_seq`` (and up to ``through_seq``) lacking a vector of ``model`` for
        some facet, oldest first, with those facets. (A cursor and a bound: a pass over a large
        store stays linear, and no statement of it reads more memories than the range holds.)"""
        content, context = (missing_vector(SQLITE, facet, "?1") for facet in ("content", "context"))
        through = "" if through_seq is None else " AND m.seq <= ?4"  # (a rowid range: "?4 IS NULL OR" would scan on)
        rows = await self._fetchall(
            f"SELECT {MEMORY_COLUMNS}, {content}, {context} FROM memories m"
            f" WHERE m.seq > ?3{through} AND ({content} OR {context}) ORDER BY m.seq LIMIT ?2",
            (model, limit, after_seq) if through_seq is None else (model, limit, after_seq, through_seq),
            "find memories awaiting embeddings",
        )
        return pending_from_rows(SQLITE, rows)

    async def context_parts(self, memory_seqs: Sequence[int]) -> dict[int, list[tuple[int, int]]]:
        """What each of ``memory_seqs``' context is made of, as (seq, characters) of the memories
        whose text it holds, oldest first, itself last: the rule ``earlier_contents`` writes
        contexts by (summaries, facts and redacted turns are their own context and no one
        else's), each earlier text clipped as ``compose_context`` clips it."""
        if not memory_seqs:
            return {}
        rows = await self._fetchall(
            "SELECT u.seq, u.seq, length(u.content), 1 FROM memories u WHERE u.seq IN (SELECT value FROM json_each(?1))"
            " UNION ALL"
            f" SELECT u.seq, p.seq, min(length(p.content), {CONTEXT_NEIGHBOUR_CHARS}), 0"
            " FROM memories u JOIN memories p ON p.seq IN ("
            "  SELECT q.seq FROM memories q WHERE q.conversation_id = u.conversation_id AND q.seq < u.seq"
            f"  AND q.kind NOT IN ('summary', 'fact') AND {text_kept(SQLITE, 'q.')} ORDER BY q.seq DESC LIMIT ?2)"
            " WHERE u.seq IN (SELECT value FROM json_each(?1)) AND u.kind NOT IN ('summary', 'fact')"
            f" AND {text_kept(SQLITE, 'u.')}"
            " ORDER BY 1, 4, 2",
            (json.dumps(list(memory_seqs)), CONTEXT_NEIGHBOURS), "read what contexts are made of",
        )
        parts: dict[int, list[tuple[int, int]]] = {}
        for seq, part, chars, _ in rows:
            parts.setdefault(int(seq), []).append((int(part), int(chars)))
        return parts

    async def vector_samples(
        self, model: str, max_id: int, ids: Sequence[int]
    ) -> tuple[int, dict[int, tuple[int, bytes]]]:
        """How many vectors of ``model`` have id <= ``max_id``, and the (memory seq, vector) of each
        of ``ids`` that exists: what tells whether a vector file is this database's."""
        async with self._transaction("check the vector file", write=False) as conn:
            counted = await (await conn.execute(
                "SELECT count(*) FROM memory_embeddings WHERE model = ? AND id <= ?", (model, max_id)
            )).fetchone()
            found: dict[int, tuple[int, bytes]] = {}
            wanted = sorted(set(ids))
            if wanted:  # one trip, not one per sample: this is on the way to a new process's first search
                marks = ",".join("?" * len(wanted))
                cursor = await conn.execute(
                    f"SELECT id, memory_seq, vector FROM memory_embeddings WHERE model = ? AND id IN ({marks})",
                    (model, *wanted),
                )
                found = {row[0]: (row[1], bytes(row[2])) for row in await cursor.fetchall()}
        return (int(counted[0]) if counted else 0), found

    async def vector_snapshot(
        self, model: str, after_id: int, sink: Callable[[VectorBatch], None], *, count: bool = True
    ) -> int | None:
        """Stream vectors of ``model`` with id > ``after_id`` to ``sink``; return the model's row
        count (with ``count``; else None).

        Everything comes from one read transaction, so comparing the returned count with what the
        caller holds afterwards tells whether rows were deleted meanwhile. The count reads the
        whole model index (6-9 ms at 100k memories).
        """
        async with self._transaction("load vectors", write=False) as conn:
            total = None
            if count:
                counts = await (await conn.execute(
                    "SELECT count(*) FROM memory_embeddings WHERE model = ?", (model,)
                )).fetchone()
                total = int(counts[0]) if counts else 0
            cursor = await conn.execute(
                "SELECT e.id, e.memory_seq, c.rowid, m.kind, e.facet, e.dim, e.vector FROM memory_embeddings e"
                " JOIN memories m ON m.seq = e.memory_seq JOIN conversations c ON c.id = m.conversation_id"
                " WHERE e.model = ? AND e.id > ? ORDER BY e.id",
                (model, after_id),
            )
            while rows := await cursor.fetchmany(VECTOR_BATCH_ROWS):
                sink(VectorBatch(
                    ids=[r[0] for r in rows], memory_seqs=[r[1] for r in rows],
                    conversation_keys=[r[2] for r in rows], kinds=[KIND_CODES[r[3]] for r in rows],
                    facets=[FACET_CODES[r[4]] for r in rows], dims=[r[5] for r in rows], vectors=[r[6] for r in rows],
                ))
        return total

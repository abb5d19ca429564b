"""Vector rows: insert, pending memories per model, and snapshots for the in-memory vector index."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import aiosqlite

from ollama_mcp.domain import EmbeddingRow, Facet, Memory
from ollama_mcp.storage.memory_rules import CONTEXT_NEIGHBOUR_CHARS, CONTEXT_NEIGHBOURS
from ollama_mcp.storage.sql.rows import memory_columns, text_kept
from ollama_mcp.storage.sql.vectors import VectorRows, missing_vector, pending_from_rows
from ollama_mcp.storage.sqlite import vector_blocks
from ollama_mcp.storage.sqlite.base import StoreBase
from ollama_mcp.storage.sqlite.dialect import SQLITE
from ollama_mcp.storage.sqlite.rows import (
    FACET_CODES,
    KIND_CODES,
    VECTOR_BATCH_ROWS,
)
from ollama_mcp.storage.sqlite.vector_blocks import HELD, encode_slots, encode_vectors, slot_vector


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
            f"SELECT {memory_columns(SQLITE)}, {content}, {context} FROM memories m"
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
            f"  SELECT q.seq FROM memories q WHERE {SQLITE.same_conversation('q', 'u')} AND q.seq < u.seq"
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

    async def vector_snapshot(
        self, model: str, after_id: int, sink: Callable[[VectorBatch], None], *, count: bool = True
    ) -> int | None:
        """Stream vectors of ``model`` with id > ``after_id`` to ``sink``; return the model's row
        count (with ``count``; else None).

        Everything comes from one read transaction, so comparing the returned count with what the
        caller holds afterwards tells whether rows were deleted meanwhile. The count reads the
        whole model index (6-9 ms at 100k memories). A row another process folded already has its
        vector read from its block.
        """
        async with self._transaction("load vectors", write=False) as conn:
            total = None
            if count:
                counts = await (await conn.execute(MODEL_ROWS, (model,))).fetchone()
                total = int(counts[0]) if counts else 0
            cursor = await conn.execute(
                "SELECT e.id, e.memory_seq, m.conversation_key, m.kind, e.facet, e.dim, e.vector, e.block_id,"
                " e.slot FROM memory_embeddings e JOIN memories m ON m.seq = e.memory_seq"
                " WHERE e.model = ? AND e.id > ? ORDER BY e.id",
                (model, after_id),
            )
            while rows := await cursor.fetchmany(VECTOR_BATCH_ROWS):
                vectors = await vectors_of(conn, [(r[6], r[7], r[8]) for r in rows])
                sink(VectorBatch(
                    ids=[r[0] for r in rows], memory_seqs=[r[1] for r in rows],
                    conversation_keys=[r[2] for r in rows], kinds=[KIND_CODES[r[3]] for r in rows],
                    facets=[FACET_CODES[r[4]] for r in rows], dims=[r[5] for r in rows], vectors=vectors,
                ))
        return total

    async def chunk_vectors(self, memory_seqs: Sequence[int], model: str) -> dict[int, dict[int, bytes]]:
        """The content vectors of ``model`` of each memory's chunks, by chunk index (a folded one
        as its block holds it)."""
        if not memory_seqs:
            return {}
        async with self._snapshot("read the vectors of a memory's passages") as conn:
            rows = list(await conn.execute_fetchall(
                "SELECT memory_seq, chunk_index, vector, block_id, slot FROM memory_embeddings"
                f" WHERE model = ? AND facet = 'content' AND memory_seq IN ({', '.join('?' * len(memory_seqs))})",
                (model, *memory_seqs),
            ))
            vectors = await vectors_of(conn, [(r[2], r[3], r[4]) for r in rows])
        found: dict[int, dict[int, bytes]] = {}
        for row, vector in zip(rows, vectors, strict=True):
            found.setdefault(int(row[0]), {})[int(row[1])] = vector
        return found

    async def conversation_vectors(self, conversation_id: str) -> list[tuple[str, EmbeddingRow]]:
        """Every vector of the conversation's memories, with the id of the memory it belongs to
        (a folded one as its block holds it: an own vector at float16's precision)."""
        async with self._snapshot("read the conversation's vectors") as conn:
            rows = list(await conn.execute_fetchall(
                "SELECT m.id, e.memory_seq, e.facet, e.chunk_index, e.model, e.vector, e.dim, e.block_id, e.slot"
                " FROM memories m JOIN memory_embeddings e ON e.memory_seq = m.seq"
                f" WHERE {SQLITE.of_conversation('m')} ORDER BY e.id",
                (conversation_id,),
            ))
            vectors = await vectors_of(conn, [(r[5], r[7], r[8]) for r in rows])
        return [
            (row[0], EmbeddingRow(row[1], row[2], row[3], row[4], vector, row[6]))
            for row, vector in zip(rows, vectors, strict=True)
        ]

    async def newest_vector_id(self) -> int:
        """The id the newest vector row was given, of any model (0 for none): it grows whenever a
        vector is stored, and stays when a fold rewrites rows (ids are kept) or rows are deleted
        (AUTOINCREMENT's counter, read in constant time). A vector of another model only makes
        the store seem busy one upkeep longer."""
        rows = await self._fetchall(
            "SELECT coalesce(max(seq), 0) FROM sqlite_sequence WHERE name = 'memory_embeddings'", (),
            "find the newest vector",
        )
        return int(rows[0][0])

    async def fold_vectors(self, model: str, block_rows: int | None = None, *, tail: int = 0) -> int:
        """Fold ``model``'s rows that hold their vector into blocks, ``block_rows`` of one facet and
        dimension to a block, oldest first, while a whole block's worth waits; returns the rows
        folded. Each block is one transaction (the block, and its rows emptied), so a crash or
        another process folding at once leaves every vector exactly once, in a row or a slot.

        With ``tail`` (the upkeep of a store no vector came to since its last), the rows left
        after the whole blocks are folded too, into one partial block, when at least ``tail`` of a
        facet wait. A partial block goes back into its rows first whenever a fold will write a
        block of its facet: it stays the newest block of its facet, and is packed anew with the
        rows that came since."""
        block_rows = block_rows or vector_blocks.BLOCK_ROWS
        waiting = await self._fetchall(
            "SELECT facet, dim, count(*) FROM memory_embeddings WHERE model = ? AND block_id IS NULL"
            " GROUP BY facet, dim", (model,), "count the vectors to fold",
        )
        folded = 0
        for facet, dim, count in waiting:
            partial = await self._fetchall(
                f"SELECT b.id, b.n - {DEAD_SLOTS} FROM vector_blocks b WHERE b.model = ? AND b.facet = ? AND b.dim = ?"
                " AND b.n < ?",
                (model, facet, dim, block_rows), "find the partial blocks",
            )
            total = int(count) + sum(int(live) for _, live in partial)
            whole = total // block_rows
            rest = total - whole * block_rows
            if not whole and not (tail and int(count) >= tail):
                continue
            for block, _ in partial:
                await self._unfold_block(int(block))
            for _ in range(whole):
                done = await self._fold_block(model, facet, int(dim), block_rows, block_rows)
                if not done:
                    break  # another process folded them meanwhile
                folded += done
            if tail and rest >= tail:
                folded += await self._fold_block(model, facet, int(dim), rest, tail)
        return folded

    async def _fold_block(self, model: str, facet: str, dim: int, block_rows: int, least: int) -> int:
        """Fold the oldest ``block_rows`` rows of a facet waiting into one block, if ``least`` wait."""
        dtype = HELD[facet]
        async with self._transaction("fold vectors into a block") as conn:
            rows = list(await conn.execute_fetchall(
                "SELECT e.id, e.memory_seq, m.conversation_key, m.kind, e.vector, e.chunk_index"
                " FROM memory_embeddings e JOIN memories m ON m.seq = e.memory_seq"
                " WHERE e.model = ? AND e.facet = ? AND e.dim = ? AND e.block_id IS NULL ORDER BY e.id LIMIT ?",
                (model, facet, dim, block_rows),
            ))
            if len(rows) < least:
                return 0
            cursor = await conn.execute(
                "INSERT INTO vector_blocks (model, facet, dim, dtype, n, slots, vectors) VALUES (?, ?, ?, ?, ?, ?, ?)",
                (model, facet, dim, dtype, len(rows),
                 encode_slots([r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows],
                              [KIND_CODES[r[3]] for r in rows]),
                 encode_vectors([r[4] for r in rows], dtype)),
            )
            block = cursor.lastrowid
            # Deleted and written again slim, not updated: SQLite merges the pages a delete leaves
            # under-full, never those an update shrinks (the rows' pages would stay, nearly empty).
            # The ids stay; the trigger on deletes ignores rows that were not folded.
            await conn.execute(
                "DELETE FROM memory_embeddings WHERE id IN (SELECT value FROM json_each(?))",
                (json.dumps([row[0] for row in rows]),),
            )
            await conn.executemany(
                "INSERT INTO memory_embeddings (id, memory_seq, model, facet, chunk_index, dim, vector, block_id, slot)"
                " VALUES (?, ?, ?, ?, ?, ?, NULL, ?, ?)",
                [(row[0], row[1], model, facet, row[5], dim, block, slot) for slot, row in enumerate(rows)],
            )
        return len(rows)

    async def compact_vector_blocks(self, model: str) -> int:
        """Empty the blocks of ``model`` that lost more than a quarter of their slots (deleted
        memories, rewritten contexts): their live vectors go back into their rows, at the
        block's precision, for the next fold to pack anew, and the block is dropped; returns
        the blocks emptied. One transaction a block, as a fold."""
        blocks = await self._fetchall(
            f"SELECT b.id FROM vector_blocks b WHERE b.model = ? AND {DEAD_SLOTS} * 4 > b.n ORDER BY b.id", (model,),
            "find blocks to compact",
        )
        for (block,) in blocks:
            await self._unfold_block(int(block))
        return len(blocks)

    async def _unfold_block(self, block: int) -> None:
        """Put a block's live vectors back into their rows, at the block's precision, and drop
        the block, in one transaction (nothing is read or moved when another process did it)."""
        async with self._transaction("put a vector block back into its rows") as conn:
            found = await (await conn.execute("SELECT n, slots FROM vector_blocks WHERE id = ?", (block,))).fetchone()
            if found is None:
                return  # another process did it
            dead = {int(slot) for (slot,) in await conn.execute_fetchall(
                "SELECT slot FROM vector_block_dead WHERE block_id = ?", (block,)
            )}
            ids = vector_blocks.decode_slots(bytes(found[1]), int(found[0]))[0].tolist()
            live = [(row_id, slot) for slot, row_id in enumerate(ids) if slot not in dead]
            vectors = await vectors_of(conn, [(None, block, slot) for _, slot in live])
            await conn.executemany(
                "UPDATE memory_embeddings SET vector = ?, block_id = NULL, slot = NULL WHERE id = ?",
                [(vector, row_id) for (row_id, _), vector in zip(live, vectors, strict=True)],
            )
            await conn.execute("DELETE FROM vector_blocks WHERE id = ?", (block,))


# A block's dead slots (sqlite/migrations/0020_slim_vector_rows.sql), for a statement over ``vector_blocks b``.
DEAD_SLOTS = "(SELECT count(*) FROM vector_block_dead d WHERE d.block_id = b.id)"
# A model's vector rows, counted without reading them: its blocks' live slots, and its rows not folded yet.
MODEL_ROWS = (
    f"SELECT (SELECT coalesce(sum(b.n - {DEAD_SLOTS}), 0) FROM vector_blocks b WHERE b.model = ?1)"
    " + (SELECT count(*) FROM memory_embeddings WHERE model = ?1 AND block_id IS NULL)"
)

Cell = tuple[bytes | None, int | None, int | None]  # a row's (vector, block_id, slot)


async def vectors_of(conn: aiosqlite.Connection, cells: Sequence[Cell]) -> list[bytes]:
    """Each cell's float32 vector: its row's, or its slot's (each block read once, in the caller's
    transaction)."""
    blocks: dict[int, tuple[str, int, bytes]] = {}
    out: list[bytes] = []
    for vector, block, slot in cells:
        if vector is not None:
            out.append(vector)
            continue
        if block is None or slot is None:
            raise sqlite3.DatabaseError("a vector row holds neither a vector nor a slot: the database is damaged")
        if block not in blocks:
            found = await (await conn.execute(
                "SELECT dtype, dim, vectors FROM vector_blocks WHERE id = ?", (block,)
            )).fetchone()
            if found is None:
                raise sqlite3.DatabaseError(f"vector block {block} is missing: the database is damaged")
            blocks[block] = (str(found[0]), int(found[1]), bytes(found[2]))
        dtype, dim, blob = blocks[block]
        out.append(slot_vector(blob, dtype, dim, slot))
    return out

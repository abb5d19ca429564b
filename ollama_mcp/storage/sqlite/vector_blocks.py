"""One copy of the vectors: the block format of ``vector_blocks`` (sqlite/migrations/0018_vector_blocks.sql),
and a model's vectors as arrays, from what ``block_read`` read.

A vector is written as a float32 row of ``memory_embeddings``; the upkeep folds a model's rows of one
facet, ``BLOCK_ROWS`` at a time, into one ``vector_blocks`` row (``VectorStore.fold_vectors``): its
slots (each row's id, memory seq, conversation key and kind) and its vectors at the precision the
index holds them in (``HELD``), and it empties the rows' ``vector``. Reading a few large blobs is as
quick as mapping a file was (bench/README.md, "Would blocks in SQLite load as fast as the file?"),
and the database keeps each vector once.

Imports numpy and ``block_read`` only: a new process's head start imports it in a worker thread.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ollama_mcp.storage.sqlite.block_read import BLOCK_ROWS, FACET_CODES, HELD, KIND_CODES, Found, read

# The fewest rows of a facet a quiet store's upkeep folds into a partial block (fewer wait in
# rows: 32 rows of 384 dimensions are 50 KB). A partial block saves the rows' pages, a 4 KB page
# for two of them, and spares a new process reading the rows one by one.
TAIL_ROWS = 32

__all__ = ["BLOCK_ROWS", "FACET_CODES", "HELD", "KIND_CODES", "FacetRows", "Loaded", "OnDisk", "assemble", "load"]


@dataclass(frozen=True)
class OnDisk:
    """A whole block whose vectors a load left on disk (``block_read.read``'s ``own``): the matrix
    reads them from there (``matrix.DiskBlock``)."""

    block: int  # vector_blocks.id
    n: int
    dtype: np.dtype

    def __len__(self) -> int:
        return self.n


@dataclass(frozen=True)
class FacetRows:
    """One facet's rows: per row its id, memory seq, conversation key and kind, and its vector. The
    vectors come in parts, in the rows' order: each whole block read a view of its blob (read-only:
    the bytes were read once, and are not copied), then the rest."""

    ids: np.ndarray  # int64
    seqs: np.ndarray  # int64
    convs: np.ndarray  # int64
    kinds: np.ndarray  # int8
    vectors: list[np.ndarray | OnDisk]  # (rows, dim) each, as ``HELD`` says


@dataclass(frozen=True)
class Loaded:
    """A model's vectors as of one read transaction."""

    model: str
    dim: int | None  # None: the model has no vector
    max_id: int  # every row of the model with id <= max_id is here (or was skipped)
    skipped: int  # rows of another dimension under the model's name, never ranked
    facets: dict[int, FacetRows]

    @property
    def rows(self) -> int:
        return sum(len(f.ids) for f in self.facets.values()) + self.skipped


def encode_slots(ids: Sequence[int], seqs: Sequence[int], convs: Sequence[int], kinds: Sequence[int]) -> bytes:
    return b"".join((
        np.asarray(ids, dtype="<i8").tobytes(), np.asarray(seqs, dtype="<i8").tobytes(),
        np.asarray(convs, dtype="<i8").tobytes(), np.asarray(kinds, dtype="i1").tobytes(),
    ))


def decode_slots(blob: bytes, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(ids, seqs, convs, kinds) of a block's ``n`` slots."""
    ids = np.frombuffer(blob, dtype="<i8", count=n)
    seqs = np.frombuffer(blob, dtype="<i8", count=n, offset=8 * n)
    convs = np.frombuffer(blob, dtype="<i8", count=n, offset=16 * n)
    kinds = np.frombuffer(blob, dtype="i1", count=n, offset=24 * n)
    return ids, seqs, convs, kinds


def encode_vectors(rows: Sequence[bytes], dtype: str) -> bytes:
    """Float32 rows (``memory_embeddings.vector``), one after another, at ``dtype``."""
    return np.frombuffer(b"".join(rows), dtype="<f4").astype(dtype).tobytes()


def slot_vector(blob: bytes, dtype: str, dim: int, slot: int) -> bytes:
    """Slot ``slot`` of a block's vectors as a float32 row, as ``memory_embeddings.vector`` holds one."""
    width = np.dtype(dtype).itemsize * dim
    return np.frombuffer(blob, dtype=dtype, count=dim, offset=slot * width).astype("<f4").tobytes()


def load(path: Path, model: str, *, own: bool = True) -> Loaded | None:
    """``block_read.read`` and ``assemble`` in one: blocking, for a worker thread."""
    found = read(path, model, own=own)
    return None if found is None else assemble(found)


def assemble(found: Found) -> Loaded:
    """Each facet's rows as arrays: a whole block's vectors stay in the bytes they were read into
    (a view, no copy: at 100k memories a copy was 230 MB more at its peak, and the time to fault it
    in); a block that lost slots gives its live ones, the rows not folded yet theirs, after them."""
    dim = found.dim
    if dim is None:
        return Loaded(found.model, None, 0, 0, {})
    max_id, skipped = 0, 0
    whole: dict[str, list[tuple[Any, ...]]] = {facet: [] for facet in FACET_CODES}
    parts: dict[str, list[tuple[np.ndarray, ...]]] = {facet: [] for facet in FACET_CODES}
    for block, facet, block_dim, dtype, n, dead, slots, vectors in found.blocks:
        ids, seqs, convs, kinds = decode_slots(slots, n)
        max_id = max(max_id, int(ids[-1]))
        if block_dim != dim:
            skipped += n - dead
            continue
        if vectors is None:  # (whole: only those are left on disk)
            whole[facet].append((ids, seqs, convs, kinds, OnDisk(block, n, np.dtype(dtype))))
            continue
        held = np.frombuffer(vectors, dtype=dtype).reshape(n, dim)
        if block in found.live:
            keep = np.array(found.live[block], dtype=np.int64)
            parts[facet].append((ids[keep], seqs[keep], convs[keep], kinds[keep], held[keep]))
        else:
            whole[facet].append((ids, seqs, convs, kinds, held))
    rows = found.rows
    if rows:
        max_id = max(max_id, int(rows[-1][0]))
    for facet in FACET_CODES:
        chosen = [row for row in rows if row[4] == facet and row[5] == dim]
        if chosen:
            parts[facet].append((
                np.array([row[0] for row in chosen], dtype=np.int64),
                np.array([row[1] for row in chosen], dtype=np.int64),
                np.array([row[2] for row in chosen], dtype=np.int64),
                np.array([KIND_CODES[row[3]] for row in chosen], dtype=np.int8),
                np.frombuffer(b"".join(row[6] for row in chosen), dtype="<f4").astype(HELD[facet]).reshape(-1, dim),
            ))
    skipped += sum(1 for row in rows if row[5] != dim)
    taken: dict[int, FacetRows] = {}
    for facet in FACET_CODES:
        every = whole[facet] + parts[facet]
        if every:
            ids, seqs, convs, kinds = (np.concatenate([part[column] for part in every]) for column in range(4))
            taken[FACET_CODES[facet]] = FacetRows(ids, seqs, convs, kinds, [part[4] for part in every])
    return Loaded(found.model, dim, max_id, skipped, taken)

"""The in-memory float32 matrix of one model's vectors: lazy load, incremental refresh, top-k.

The matrix mirrors ``memory_embeddings`` for one model. It is loaded on the first search and
then kept current cheaply: rows this process writes are fetched by id (ids only grow), and
``PRAGMA data_version`` reveals commits by other processes (Claude Desktop often runs two
copies of a server on one file). When the row count disagrees with the database after that
fetch, something was deleted elsewhere and the matrix is rebuilt.

The matrix is kept in fixed-size blocks, so that growing it or compacting it after a delete
never holds two copies of it at once: peak memory stays close to the vectors' own size.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import anyio
import numpy as np

from ollama_mcp.errors import EmbeddingMismatchError
from ollama_mcp.store import FACET_CODES, KIND_CODES, Store, VectorBatch

# How many chunk rows to rank per wanted memory: memories split into several chunks would
# otherwise crowd the top-k with duplicates of themselves.
_OVERFETCH = 4
BLOCK_ROWS = 8192


@dataclass(frozen=True)
class Ranking:
    """Per facet, the best memories as (seq, similarity); ``similarities`` gives any memory's
    content similarity to the query (a memory's similarity is that of its best chunk)."""

    content: list[tuple[int, float]]
    context: list[tuple[int, float]]
    _seqs: np.ndarray
    _content_scores: np.ndarray

    def similarities(self, seqs: Iterable[int]) -> dict[int, float]:
        found = dict(self.content)
        wanted = np.fromiter(set(seqs) - found.keys(), dtype=np.int64)
        if wanted.size:
            for row in np.nonzero(np.isin(self._seqs, wanted, kind="table"))[0]:  # O(rows), not O(rows x wanted)
                seq, score = int(self._seqs[row]), float(self._content_scores[row])
                if score != -np.inf and score > found.get(seq, -np.inf):
                    found[seq] = score
        return found


_EMPTY = Ranking([], [], np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32))


@dataclass(frozen=True)
class Scope:
    """Which rows may be ranked; ``None`` fields do not restrict."""

    conversation_key: int | None = None
    kind_codes: tuple[int, ...] | None = None
    memory_seqs: frozenset[int] | None = None  # from SQL filters (tags, time) when present


class VectorIndex:
    """All vectors of one model, ranked by cosine similarity (the vectors are unit length)."""

    def __init__(self, store: Store, model: str) -> None:
        self._store = store
        self.model = model
        self._lock = anyio.Lock()
        self._loaded = False
        self._dirty = False
        self._data_version: int | None = None
        self.dim: int | None = None
        self._reset()

    @property
    def size(self) -> int:
        return self._n

    def mark_dirty(self) -> None:
        """This process wrote vectors: fetch them (by id) before the next search."""
        self._dirty = True

    async def remove(self, memory_seqs: Iterable[int], facet: str | None = None) -> None:
        """Drop rows of memories this process deleted (or, with ``facet``, only that facet's rows)."""
        async with self._lock:
            self._remove(list(memory_seqs), facet)

    async def rank(self, query: np.ndarray, k: int, scope: Scope) -> Ranking:
        """Rank in a worker thread (numpy releases the GIL, so keyword search runs meanwhile);
        call ``refresh`` first. The lock keeps refreshes and removals out while the thread reads."""
        async with self._lock:
            if self._n == 0:
                return _EMPTY
            self.check_dimension(query)
            return await anyio.to_thread.run_sync(self._rank, query.astype(np.float32, copy=False), k, scope)

    def _remove(self, memory_seqs: list[int], facet: str | None) -> None:
        if not self._loaded or self._n == 0:
            return
        drop = np.isin(self._seqs[: self._n], np.fromiter(memory_seqs, dtype=np.int64), kind="table")
        if facet is not None:
            drop &= self._facets[: self._n] == FACET_CODES[facet]
        if not drop.any():
            return
        keep = np.nonzero(~drop)[0]
        # Compact in place, a block at a time: row keep[j] moves to j <= keep[j], and each
        # block's sources are gathered before that block is written.
        for start in range(0, len(keep), BLOCK_ROWS):
            sources = keep[start:start + BLOCK_ROWS]
            self._blocks[start // BLOCK_ROWS][: len(sources)] = self._gather(sources)
        for name in ("_ids", "_seqs", "_convs", "_kinds", "_facets"):
            array = getattr(self, name)
            array[: len(keep)] = array[keep]
        self._n = len(keep)
        del self._blocks[-(-self._n // BLOCK_ROWS):]  # blocks past the last used row

    async def refresh(self) -> None:
        """Bring the matrix up to date with the database (cheap when nothing changed)."""
        async with self._lock:
            await self._refresh()

    async def _refresh(self) -> None:
        version = await self._store.data_version()
        if self._loaded and not self._dirty and version == self._data_version:
            return
        self._dirty = False
        total = await self._store.vector_snapshot(self.model, self._max_id, self._reserve, self._append)
        if total != self._n + self._skipped:
            # Rows vanished under us (another process deleted memories): rebuild from scratch.
            self._reset()
            await self._store.vector_snapshot(self.model, 0, self._reserve, self._append)
        self._loaded = True
        self._data_version = version

    def check_dimension(self, vector: np.ndarray) -> None:
        if self.dim is not None and vector.size != self.dim:
            raise EmbeddingMismatchError(
                f"Embedding model {self.model!r} now returns {vector.size}-dimensional vectors, but the "
                f"stored vectors of that model have {self.dim}; the model changed under the same name. "
                "Semantic search is off until the memories are embedded again (re-pull the original "
                "model, or set OLLAMA_MCP_EMBED_MODEL to a new name so they are re-embedded)."
            )

    def _rank(self, query: np.ndarray, k: int, scope: Scope) -> Ranking:
        """The ``k`` best memories in ``scope`` by content and by context."""
        scores = self._scores(query)
        mask = self._mask(scope)
        if mask is not None:
            np.copyto(scores, -np.inf, where=~mask)
        is_content = self._facets[: self._n] == FACET_CODES["content"]
        content_scores = np.where(is_content, scores, np.float32(-np.inf))
        np.copyto(scores, -np.inf, where=is_content)  # what is left are the context rows
        return Ranking(self._top(content_scores, k), self._top(scores, k), self._seqs[: self._n].copy(), content_scores)

    def _top(self, scores: np.ndarray, k: int) -> list[tuple[int, float]]:
        want = min(self._n, k * _OVERFETCH)
        top = np.argpartition(-scores, want - 1)[:want] if want < self._n else np.arange(self._n)
        top = top[np.argsort(-scores[top], kind="stable")]
        ranked: list[tuple[int, float]] = []
        seen: set[int] = set()
        for row in top:
            score = float(scores[row])
            if score == -np.inf or len(ranked) == k:
                break
            seq = int(self._seqs[row])
            if seq not in seen:
                seen.add(seq)
                ranked.append((seq, score))
        return ranked

    def _mask(self, scope: Scope) -> np.ndarray | None:
        mask: np.ndarray | None = None

        def both(m: np.ndarray) -> np.ndarray:
            return m if mask is None else mask & m

        if scope.conversation_key is not None:
            mask = both(self._convs[: self._n] == scope.conversation_key)
        if scope.kind_codes is not None:
            allowed = np.zeros(max(KIND_CODES.values()) + 1, dtype=bool)
            allowed[list(scope.kind_codes)] = True
            mask = both(allowed[self._kinds[: self._n]])
        if scope.memory_seqs is not None:
            mask = both(np.isin(self._seqs[: self._n], np.fromiter(scope.memory_seqs, dtype=np.int64), kind="table"))
        return mask

    def _scores(self, query: np.ndarray) -> np.ndarray:
        scores = np.empty(self._n, dtype=np.float32)
        for i, block in enumerate(self._blocks):
            start = i * BLOCK_ROWS
            rows = min(BLOCK_ROWS, self._n - start)
            if rows <= 0:
                break
            np.matmul(block[:rows], query, out=scores[start:start + rows])
        return scores

    def _gather(self, rows: np.ndarray) -> np.ndarray:
        out = np.empty((len(rows), self.dim or 0), dtype=np.float32)
        owners = rows // BLOCK_ROWS
        for block in np.unique(owners):
            chosen = owners == block
            out[chosen] = self._blocks[int(block)][rows[chosen] % BLOCK_ROWS]
        return out

    def _reset(self) -> None:
        self._n = 0
        self._skipped = 0
        self._max_id = 0
        self._capacity = 0
        self.dim = None
        self._blocks: list[np.ndarray] = []
        self._ids = np.zeros(0, dtype=np.int64)
        self._seqs = np.zeros(0, dtype=np.int64)
        self._convs = np.zeros(0, dtype=np.int64)
        self._kinds = np.zeros(0, dtype=np.int8)
        self._facets = np.zeros(0, dtype=np.int8)

    def _reserve(self, extra: int) -> None:
        """Size the (small) per-row arrays; vector blocks are added as rows arrive."""
        needed = self._n + extra
        if needed <= self._capacity:
            return
        self._capacity = max(needed, self._capacity + self._capacity // 4, 64)
        self._ids = _grow(self._ids, self._capacity)
        self._seqs = _grow(self._seqs, self._capacity)
        self._convs = _grow(self._convs, self._capacity)
        self._kinds = _grow(self._kinds, self._capacity)
        self._facets = _grow(self._facets, self._capacity)

    def _append(self, batch: VectorBatch) -> None:
        if self.dim is None and batch.dims:
            self.dim = batch.dims[0]
        self._reserve(len(batch.ids))
        for row_id, seq, conv, kind, facet, dim, blob in zip(
            batch.ids, batch.memory_seqs, batch.conversation_keys, batch.kinds, batch.facets, batch.dims,
            batch.vectors, strict=True,
        ):
            self._max_id = max(self._max_id, row_id)
            if dim != self.dim:
                self._skipped += 1  # another size under the same model name is never ranked with these
                continue
            i = self._n
            block, offset = divmod(i, BLOCK_ROWS)
            if block == len(self._blocks):
                self._blocks.append(np.empty((BLOCK_ROWS, dim), dtype=np.float32))
            self._blocks[block][offset] = np.frombuffer(blob, dtype="<f4")
            self._ids[i], self._seqs[i], self._convs[i], self._kinds[i], self._facets[i] = row_id, seq, conv, kind, facet
            self._n += 1


def _grow(array: np.ndarray, capacity: int) -> np.ndarray:
    grown = np.zeros((capacity, *array.shape[1:]), dtype=array.dtype)
    grown[: len(array)] = array
    return grown

"""The in-memory matrices of one model's vectors: lazy load, incremental refresh, top-k.

The matrices mirror ``memory_embeddings`` for one model, one matrix per facet (a memory's own
text, and its context). A search multiplies the query with the context matrix only, plus the
own vectors of the few memories that have no context vector yet; own (content) vectors are
looked up per candidate, for the similarity a hit reports and for re-ranking the candidates, and
are held as float16 (``_HELD``): half the memory, similarities within 1e-4.
Ranking by context alone is what bench/locomo.py measured as good as ranking by both (and it
halves the work of every search: bench/README.md). The matrices are loaded on the first search
and then kept current cheaply:
rows this process writes are fetched by id (ids only grow; the rows it deletes it removes
itself), and ``PRAGMA data_version`` reveals commits by other processes (Claude Desktop often
runs two copies of a server on one file). After another process committed, the row count is
compared with the database's: when it disagrees, something was deleted elsewhere and the
matrices are rebuilt.

Each matrix is kept in fixed-size blocks, so that growing it or compacting it after a delete
never holds two copies of it at once: peak memory stays close to the vectors' own size.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

import anyio
import numpy as np

from ollama_mcp.domain import Scope
from ollama_mcp.errors import EmbeddingMismatchError
from ollama_mcp.storage.sqlite import vector_file
from ollama_mcp.storage.sqlite.store import FACET_CODES, KIND_CODES, Store, VectorBatch

# How many chunk rows to rank per wanted memory: memories split into several chunks would
# otherwise crowd the top-k with duplicates of themselves.
_OVERFETCH = 4
BLOCK_ROWS = 8192
# Up to this many rows a search ranks on the event loop (about 1.5 ms of numpy at 768
# dimensions); beyond it, in a worker thread.
INLINE_ROWS = 25_000
_CONTENT, _CONTEXT = FACET_CODES["content"], FACET_CODES["context"]
# How each facet's vectors are held. Every search multiplies the in-context vectors whole: float32,
# for BLAS. The own vectors are only looked up per candidate (a few hundred rows a search), so
# they are held at half the size: float16 moves a similarity by at most ~5e-5 (bench/README.md),
# and halves what a large store holds of them (100k x 768: 293 MB -> 147 MB).
_HELD: dict[int, np.dtype] = {_CONTENT: np.dtype(np.float16), _CONTEXT: np.dtype(np.float32)}
_FILE_SAMPLES = 8  # rows per facet a vector file must share with the database (as held: ``_matches``)

log = logging.getLogger(__name__)

# A vector file already read (checked, and its scanned facets mapped in) for a path and model, or
# None: what a new process read while it was importing the app (``head_start.HeadStart``).
EarlyFile = Callable[[Path, str], Awaitable["vector_file.VectorFile | None"]]


@dataclass(frozen=True)
class Ranking:
    """The best memories by meaning, as (seq, score), and the content similarity to the query of
    those and of every other candidate asked for (a memory's similarity is its best chunk's)."""

    ranked: list[tuple[int, float]]
    similarity: dict[int, float]


_EMPTY = Ranking([], {})


_MISSING, _SEVERAL = -1, -2


class _RowIndex:
    """Memory seq -> its rows in one facet's matrix (one per chunk). A store's seqs are small,
    dense integers, so a memory with one row (most) has it in an int32 array indexed by seq: 4
    bytes a memory where a dict of ints took ~100 (10 MB per facet at 100k memories), built from
    a whole load in a few numpy calls. The few with several rows keep a list."""

    def __init__(self) -> None:
        self._row = np.full(0, _MISSING, dtype=np.int32)  # seq -> its row, or _MISSING / _SEVERAL
        self._more: dict[int, list[int]] = {}

    def __contains__(self, seq: int) -> bool:
        return 0 <= seq < len(self._row) and self._row[seq] != _MISSING

    def lookup(self, seqs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The rows of ``seqs`` (distinct), and whose each is."""
        seqs = seqs[(seqs >= 0) & (seqs < len(self._row))]
        rows = self._row[seqs]
        one = rows >= 0
        several = seqs[rows == _SEVERAL].tolist()
        if not several:
            return rows[one].astype(np.int64), seqs[one]
        more = [(row, seq) for seq in several for row in self._more[seq]]
        return (np.concatenate([rows[one], np.array([row for row, _ in more], dtype=np.int32)]).astype(np.int64),
                np.concatenate([seqs[one], np.array([seq for _, seq in more], dtype=np.int64)]))

    def holds(self, seqs: np.ndarray) -> np.ndarray:
        """Per seq of ``seqs``, whether it has rows."""
        inside = (seqs >= 0) & (seqs < len(self._row))
        held = np.zeros(len(seqs), dtype=bool)
        held[inside] = self._row[seqs[inside]] != _MISSING
        return held

    def seqs(self) -> set[int]:
        return set(np.flatnonzero(self._row != _MISSING).tolist())

    def add(self, seqs: list[int], start: int) -> None:
        """Rows ``start``, ``start + 1``, ... belong to ``seqs``, in order."""
        if not seqs:
            return
        wanted = np.asarray(seqs, dtype=np.int64)
        if (top := int(wanted.max()) + 1) > len(self._row):
            self._row = _grow(self._row, max(top, len(self._row) + len(self._row) // 4), fill=_MISSING)
        if (self._row[wanted] == _MISSING).all():  # the common case: new memories, one row each
            rows = np.arange(start, start + len(seqs), dtype=np.int32)
            self._row[wanted] = rows
            if (self._row[wanted] == rows).all():  # (a seq given twice kept only its last row)
                return
            self._row[wanted] = _MISSING  # (not np.unique: its first call imports numpy.ma, 16 ms)
        for row, seq in enumerate(seqs, start):
            held = int(self._row[seq])
            if held == _MISSING:
                self._row[seq] = row
            elif held == _SEVERAL:
                self._more[seq].append(row)
            else:
                self._more[seq] = [held, row]
                self._row[seq] = _SEVERAL


class _Matrix:
    """The rows of one facet: vectors in blocks, and per row its id, memory, conversation, kind."""

    def __init__(self, dim: int, dtype: np.dtype) -> None:
        self.dim = dim
        self.dtype = dtype  # of the vectors held; dot products are float32 either way
        self.n = 0
        self.blocks: list[np.ndarray] = []
        self.ids = np.zeros(0, dtype=np.int64)
        self.seqs = np.zeros(0, dtype=np.int64)
        self.convs = np.zeros(0, dtype=np.int64)
        self.kinds = np.zeros(0, dtype=np.int8)
        # Row counts per conversation and per kind: a scope that covers every row needs no mask.
        self.per_conversation: Counter[int] = Counter()
        self.per_kind: Counter[int] = Counter()
        self.rows_of = _RowIndex()  # memory seq -> its rows (one per chunk)

    @classmethod
    def adopt(cls, dim: int, rows: vector_file.FacetRows) -> _Matrix:
        """A matrix holding ``rows`` (from a vector file): its full blocks stay memory-mapped."""
        assert isinstance(rows.vectors, np.ndarray)
        matrix, n = cls(dim, rows.vectors.dtype), len(rows.ids)
        full = n // BLOCK_ROWS * BLOCK_ROWS
        matrix.blocks = [rows.vectors[start:start + BLOCK_ROWS] for start in range(0, full, BLOCK_ROWS)]
        matrix._place(full, rows.vectors[full:])  # the last, partly filled block takes new rows: a copy
        matrix._add_rows(rows.ids, rows.seqs, rows.convs, rows.kinds)  # copies too
        for copied, first in ((rows.vectors, full), (rows.ids, 0), (rows.seqs, 0), (rows.convs, 0), (rows.kinds, 0)):
            vector_file.release_rows(copied, first)  # (so that they are not held twice)
        return matrix

    def extend(self, ids: np.ndarray, seqs: np.ndarray, convs: np.ndarray, kinds: np.ndarray, vectors: np.ndarray) -> None:
        """Append many rows at once (``vectors``: one row each), as loading a store does."""
        self._place(self.n, vectors)
        self._add_rows(ids, seqs, convs, kinds)

    def _place(self, start: int, vectors: np.ndarray) -> None:
        """Copy ``vectors`` into the blocks from row ``start`` on, adding blocks as needed."""
        done = 0
        while done < len(vectors):
            block, offset = divmod(start + done, BLOCK_ROWS)
            if block == len(self.blocks):
                self.blocks.append(np.empty((BLOCK_ROWS, self.dim), dtype=self.dtype))
            take = min(BLOCK_ROWS - offset, len(vectors) - done)
            self.blocks[block][offset:offset + take] = vectors[done:done + take]
            done += take

    def _add_rows(self, ids: np.ndarray, seqs: np.ndarray, convs: np.ndarray, kinds: np.ndarray) -> None:
        """Count in the rows whose vectors were just placed after row ``n``."""
        start, end = self.n, self.n + len(ids)
        if end > len(self.ids):
            capacity = max(64, end + end // 4)
            for name in ("ids", "seqs", "convs", "kinds"):
                setattr(self, name, _grow(getattr(self, name), capacity))
        self.ids[start:end], self.seqs[start:end], self.convs[start:end], self.kinds[start:end] = ids, seqs, convs, kinds
        self.per_conversation.update(convs.tolist())
        self.per_kind.update(kinds.tolist())
        self.rows_of.add(seqs.tolist(), start)
        self.n = end

    def remove(self, memory_seqs: np.ndarray) -> None:
        if not self.n or not memory_seqs.size:
            return
        drop = np.isin(self.seqs[: self.n], memory_seqs, kind="table")
        if not drop.any():
            return
        self.per_conversation.subtract(Counter(self.convs[: self.n][drop].tolist()))
        self.per_kind.subtract(Counter(self.kinds[: self.n][drop].tolist()))
        keep = np.nonzero(~drop)[0]
        # Compact in place, a block at a time: row keep[j] moves to j <= keep[j], and each
        # block's sources are gathered before that block is written.
        for start in range(0, len(keep), BLOCK_ROWS):
            sources = keep[start:start + BLOCK_ROWS]
            self.blocks[start // BLOCK_ROWS][: len(sources)] = self.gather(sources)
        for name in ("ids", "seqs", "convs", "kinds"):
            array = getattr(self, name)
            array[: len(keep)] = array[keep]
        self.n = len(keep)
        del self.blocks[-(-self.n // BLOCK_ROWS):]  # blocks past the last used row
        self.rows_of = _RowIndex()
        self.rows_of.add(self.seqs[: self.n].tolist(), 0)

    def scores(self, query: np.ndarray, scope: Scope) -> np.ndarray:
        """Cosine similarity of every row to ``query``; -inf outside ``scope``."""
        scores = np.empty(self.n, dtype=np.float32)
        for i, block in enumerate(self.blocks):
            start = i * BLOCK_ROWS
            rows = min(BLOCK_ROWS, self.n - start)
            if rows <= 0:
                break
            np.matmul(block[:rows], query, out=scores[start:start + rows])
        mask = self._mask(scope)
        if mask is not None:
            np.copyto(scores, -np.inf, where=~mask)
        return scores

    def similarities(self, query: np.ndarray, seqs: Iterable[int]) -> dict[int, float]:
        """The similarity of each of ``seqs`` that has rows here, by its best row."""
        rows, owners = self.rows_of.lookup(np.fromiter(set(seqs), dtype=np.int64))
        if not rows.size:
            return {}
        scores = self._dot_rows(rows, query).tolist()
        found: dict[int, float] = {}
        for seq, score in zip(owners.tolist(), scores, strict=True):
            if score > found.get(seq, -np.inf):
                found[seq] = score
        return found

    def _mask(self, scope: Scope) -> np.ndarray | None:
        """Which rows are in ``scope``; None when all are."""
        seqs, convs, kinds = self.seqs[: self.n], self.convs[: self.n], self.kinds[: self.n]
        masks = []
        if scope.conversation_key is not None and self.per_conversation[scope.conversation_key] != self.n:
            masks.append(convs == scope.conversation_key)
        if scope.kind_codes is not None and sum(self.per_kind[k] for k in set(scope.kind_codes)) != self.n:
            allowed = np.zeros(max(KIND_CODES.values()) + 1, dtype=bool)
            allowed[list(scope.kind_codes)] = True
            masks.append(allowed[kinds])
        if scope.memory_seqs is not None:
            wanted = np.fromiter(scope.memory_seqs, dtype=np.int64)
            masks.append(np.isin(seqs, wanted, kind="table") if wanted.size else np.zeros(len(seqs), bool))
        if scope.excluded_seqs:
            unwanted = np.fromiter(scope.excluded_seqs, dtype=np.int64)
            masks.append(~np.isin(seqs, unwanted, kind="table"))
        if not masks:
            return None
        mask = masks[0]
        for more in masks[1:]:
            mask &= more
        return mask

    def gather(self, rows: np.ndarray) -> np.ndarray:
        out = np.empty((len(rows), self.dim), dtype=self.dtype)
        owners = rows // BLOCK_ROWS
        for block in _distinct(owners):
            chosen = owners == block
            out[chosen] = self.blocks[block][rows[chosen] % BLOCK_ROWS]
        return out

    def _dot_rows(self, rows: np.ndarray, query: np.ndarray) -> np.ndarray:
        """``query``'s dot product with each of ``rows``, block by block, without first gathering
        the rows into one array as ``gather`` does (0.04 ms for 200 rows instead of 0.35)."""
        out = np.empty(len(rows), dtype=np.float32)
        owners = rows // BLOCK_ROWS
        for block in _distinct(owners):
            chosen = np.nonzero(owners == block)[0]
            out[chosen] = self.blocks[block][rows[chosen] % BLOCK_ROWS].astype(np.float32, copy=False) @ query
        return out


class VectorIndex:
    """All vectors of one model, ranked by cosine similarity (the vectors are unit length)."""

    def __init__(self, store: Store, model: str, file: Path | None = None, early: EarlyFile | None = None) -> None:
        self._store = store
        self.model = model
        self._file = file  # the vector file a new process starts from (vector_file.py); None: none
        self._early = early  # where the first load may find that file already read (head_start.py)
        self._lock = anyio.Lock()
        self._loaded = False
        self._dirty = False
        self._data_version: int | None = None
        self._generation = 0  # moves whenever rows are removed or the matrices rebuilt
        self.loaded_from: str | None = None  # "file" or "database": where the last full load read from
        self._saved_rows: int = 0  # rows in the vector file as last read or written (0: none usable)
        self._reset()

    @property
    def size(self) -> int:
        """Rows held, over both facets."""
        return sum(m.n for m in self._matrices.values())

    @property
    def ranked_rows(self) -> int:
        """Rows a search multiplies the query with: the context vectors, and the own vectors of
        memories that have no context vector yet (counted once each, however many chunks)."""
        return self._matrices.get(_CONTEXT, _NO_ROWS).n + len(self._uncovered)

    def mark_dirty(self) -> None:
        """This process wrote vectors: fetch them (by id) before the next search."""
        self._dirty = True

    def invalidate(self) -> None:
        """This process deleted vectors without saying which: rebuild before the next search."""
        self._loaded = False
        self._forget_file()

    async def remove(self, memory_seqs: Iterable[int], facet: str | None = None) -> None:
        """Drop rows of memories this process deleted (or, with ``facet``, only that facet's rows)."""
        async with self._lock:
            seqs = np.fromiter(memory_seqs, dtype=np.int64)
            if seqs.size:
                self._forget_file()  # it holds the deleted memories' vectors: written anew later
                for code, matrix in self._matrices.items():
                    if facet is None or code == FACET_CODES[facet]:
                        matrix.remove(seqs)
                content = self._matrices.get(_CONTENT)
                for seq in seqs.tolist():
                    if facet == "context" and content is not None and seq in content.rows_of:
                        self._uncovered.add(seq)  # ranked by its own vector until the new context's arrives
                    else:
                        self._uncovered.discard(seq)

    async def refresh(self, data_version: int | None = None) -> None:
        """Bring the matrices up to date with the database (cheap when nothing changed).

        ``data_version``: the database's data version if the caller just read it.
        """
        async with self._lock:
            version = await self._store.data_version() if data_version is None else data_version
            if self._loaded and not self._dirty and version == self._data_version:
                return
            self._dirty = False
            if not self._loaded:
                self._reset()
                if await self._load_file():
                    self.loaded_from = "file"
                else:
                    self.loaded_from = "database"
                    await self._store.vector_snapshot(self.model, 0, self._append, count=False)
            elif version == self._data_version:
                # Only this process wrote since the last look, and its deletes went through
                # ``remove``: new rows are all there is to fetch (no count of every row, which
                # costs 6-9 ms at 100k on every search after a store).
                await self._store.vector_snapshot(self.model, self._max_id, self._append, count=False)
            elif await self._store.vector_snapshot(self.model, self._max_id, self._append) != self.size + self._skipped:
                # Rows vanished under us (another process deleted memories): rebuild from scratch.
                self._reset()
                self.loaded_from = "database"
                await self._store.vector_snapshot(self.model, 0, self._append)
            self._loaded = True
            self._data_version = version

    async def save(self) -> bool:
        """Write the matrices to the vector file when there is none yet or they grew by a tenth
        since it was written; returns whether it wrote. The rows are written outside the lock
        (a search does not wait for the disk); rows removed meanwhile void the file."""
        rows = self.size + self._skipped
        if self._file is None or not self._loaded or self.dim is None or rows < vector_file.MIN_ROWS:
            return False
        if self._saved_rows and rows - self._saved_rows < max(1024, self._saved_rows // 10):
            return False
        async with self._lock:
            generation, rows = self._generation, self.size + self._skipped
            snapshot = vector_file.VectorFile(self.model, self.dim, self._max_id, self._skipped, {
                code: vector_file.FacetRows(
                    m.ids[: m.n].copy(), m.seqs[: m.n].copy(), m.convs[: m.n].copy(), m.kinds[: m.n].copy(),
                    list(m.blocks),
                ) for code, m in self._matrices.items()
            }, scanned=(_CONTEXT,))
        try:
            await anyio.to_thread.run_sync(vector_file.write, self._file, snapshot)
        except OSError as exc:
            log.warning("could not write the vector file %s: %s", self._file, exc)
            return False
        if generation != self._generation:  # rows were compacted while it was written
            self._forget_file()
            return False
        self._saved_rows = rows
        return True

    async def rank(self, query: np.ndarray, k: int, scope: Scope, candidates: Iterable[int] = ()) -> Ranking:
        """The ``k`` best memories in ``scope`` by meaning, with the content similarity of those and
        of ``candidates`` (found otherwise, e.g. by keywords); call ``refresh`` first.

        Large matrices are ranked in a worker thread (numpy releases the GIL, so the event loop
        keeps serving other requests); the lock keeps refreshes and removals out while it reads.
        Small ones are ranked on the event loop: the hand-off to a thread and back costs more
        than the product itself (0.4 ms of a 10k-memory search, bench/README.md).
        """
        async with self._lock:
            if self.size == 0:
                return _EMPTY
            self.check_dimension(query)
            args = (query.astype(np.float32, copy=False), k, scope, list(candidates))
            if self.ranked_rows <= INLINE_ROWS:
                return self._rank(*args)
            return await anyio.to_thread.run_sync(self._rank, *args)

    def check_dimension(self, vector: np.ndarray) -> None:
        if self.dim is not None and vector.size != self.dim:
            raise EmbeddingMismatchError.model_changed(self.model, vector.size, self.dim)

    def _rank(self, query: np.ndarray, k: int, scope: Scope, candidates: list[int]) -> Ranking:
        content = self._matrices.get(_CONTENT)
        context = self._matrices.get(_CONTEXT)
        seqs: list[np.ndarray] = []
        scores: list[np.ndarray] = []
        if context is not None:
            seqs.append(context.seqs[: context.n])
            scores.append(context.scores(query, scope))
        if content is not None and self._uncovered:
            bare = self._bare_rows(content)
            seqs.append(bare.seqs[: bare.n])
            scores.append(bare.scores(query, scope))
        ranked = _top(np.concatenate(seqs), np.concatenate(scores), k) if len(seqs) > 1 else _top(seqs[0], scores[0], k)
        similarity = content.similarities(query, [*candidates, *(seq for seq, _ in ranked)]) if content else {}
        return Ranking(ranked, similarity)

    def _reset(self) -> None:
        self._generation += 1
        self._saved_rows = 0
        self.dim: int | None = None
        self._matrices: dict[int, _Matrix] = {}
        self._skipped: int = 0
        self._max_id: int = 0
        self._uncovered: set[int] = set()  # memories with an own vector but no context vector yet
        # ... and their own rows again, as float32, as of the last search (``_bare_rows``).
        self._bare = _Matrix(0, _HELD[_CONTEXT])
        self._bare_held: set[int] = set()

    async def _load_file(self) -> bool:
        """Start from the vector file if it is whole and this database's, then fetch the rows
        written after it; False when there is no usable file (it is then removed)."""
        if self._file is None:
            return False
        early, self._early = self._early, None  # a read begun before the index existed serves the first load only
        found = await early(self._file, self.model) if early is not None else None
        if found is None:
            found = await anyio.to_thread.run_sync(vector_file.read, self._file, self.model)
        if found is None:
            return False
        if any(len(rows.ids) and _held_as(rows) != _HELD.get(code) for code, rows in found.facets.items()):
            log.info("the vector file %s holds its vectors in another form; loading from the database", self._file)
            self._forget_file()
            return False
        if not await self._matches(found):
            log.info("the vector file %s is not this database's current state; loading from the database", self._file)
            self._forget_file()
            return False
        self.dim, self._skipped, self._max_id = found.dim, found.skipped, found.max_id
        for code, rows in found.facets.items():
            if len(rows.ids):
                self._matrices[code] = _Matrix.adopt(found.dim, rows)
        content, context = self._matrices.get(_CONTENT), self._matrices.get(_CONTEXT, _NO_ROWS)
        if content is not None:
            self._uncovered = content.rows_of.seqs() - context.rows_of.seqs()
        self._saved_rows = found.rows
        await self._store.vector_snapshot(self.model, found.max_id, self._append, count=False)
        return True

    async def _matches(self, found: vector_file.VectorFile) -> bool:
        """Whether the database holds exactly the file's rows up to its last id, judged by their
        count and a sample of rows per facet that must equal the database's, as held here."""
        samples = {
            int(rows.ids[i]): (int(rows.seqs[i]), rows.vectors[i])
            for rows in found.facets.values() if len(rows.ids)
            for i in np.linspace(0, len(rows.ids) - 1, _FILE_SAMPLES).astype(int).tolist()
        }
        count, stored = await self._store.vector_samples(self.model, found.max_id, list(samples))
        if count != found.rows or stored.keys() != samples.keys():
            return False
        for row_id, (seq, held) in samples.items():
            assert isinstance(held, np.ndarray)
            stored_seq, blob = stored[row_id]
            if stored_seq != seq or len(blob) != held.size * 4:
                return False
            if np.frombuffer(blob, dtype="<f4").astype(held.dtype).tobytes() != held.tobytes():
                return False
        return True

    def _bare_rows(self, content: _Matrix) -> _Matrix:
        """The own rows of the memories with no context vector yet, as float32, brought up to date
        with ``_uncovered``: every search ranks them with the context vectors, and converting
        their held float16 rows anew cost each search ~1 µs a row (2,000 while a burst of stores
        waits for the backfill: 2.5 ms a search). Only what changed since the last search is
        converted; a whole load never holds them twice (they are copied here at a search)."""
        if self._bare.dim != content.dim:
            self._bare, self._bare_held = _Matrix(content.dim, _HELD[_CONTEXT]), set()
        bare, held = self._bare, self._bare_held
        if held != self._uncovered:
            bare.remove(np.fromiter(held - self._uncovered, dtype=np.int64))
            rows, _ = content.rows_of.lookup(np.fromiter(self._uncovered - held, dtype=np.int64))
            if rows.size:
                bare.extend(content.ids[rows], content.seqs[rows], content.convs[rows], content.kinds[rows],
                            content.gather(rows))
            self._bare_held = set(self._uncovered)
        return bare

    def _forget_file(self) -> None:
        if self._file is not None:
            vector_file.remove(self._file)
        self._saved_rows = 0
        self._generation += 1

    def _append(self, batch: VectorBatch) -> None:
        """Take in a batch of rows, a facet at a time (a load of 10k memories: 20 ms, not 200)."""
        if not batch.ids:
            return
        self._max_id = max(self._max_id, max(batch.ids))
        if self.dim is None:
            self.dim = batch.dims[0]
        usable = np.asarray(batch.dims) == self.dim
        self._skipped += int(np.count_nonzero(~usable))  # another size under the same model name is never ranked
        facets = np.asarray(batch.facets, dtype=np.int8)
        ids, seqs = np.asarray(batch.ids, dtype=np.int64), np.asarray(batch.memory_seqs, dtype=np.int64)
        convs, kinds = np.asarray(batch.conversation_keys, dtype=np.int64), np.asarray(batch.kinds, dtype=np.int8)
        for facet in (_CONTENT, _CONTEXT):  # own vectors first: a context row then covers its memory
            pick = np.nonzero(usable & (facets == facet))[0]
            if not pick.size:
                continue
            matrix = self._matrices.get(facet)
            if matrix is None:
                matrix = self._matrices[facet] = _Matrix(self.dim, _HELD[facet])
            vectors = np.frombuffer(b"".join([batch.vectors[i] for i in pick.tolist()]), dtype="<f4")
            matrix.extend(ids[pick], seqs[pick], convs[pick], kinds[pick], vectors.reshape(pick.size, self.dim))
            if facet == _CONTEXT:
                self._uncovered.difference_update(seqs[pick].tolist())
            else:
                added = seqs[pick]
                self._uncovered.update(added[~self._matrices.get(_CONTEXT, _NO_ROWS).rows_of.holds(added)].tolist())


def _top(seqs: np.ndarray, scores: np.ndarray, k: int) -> list[tuple[int, float]]:
    """The ``k`` best memories (each once, by its best row) as (seq, score); -inf rows never."""
    n = len(seqs)
    if n == 0:
        return []
    want = min(n, k * _OVERFETCH)
    top = np.argpartition(-scores, want - 1)[:want] if want < n else np.arange(n)
    top = top[np.argsort(-scores[top], kind="stable")]
    ranked: list[tuple[int, float]] = []
    seen: set[int] = set()
    for seq, score in zip(seqs[top].tolist(), scores[top].tolist(), strict=True):
        if score == -np.inf or len(ranked) == k:
            break
        if seq not in seen:
            seen.add(seq)
            ranked.append((seq, score))
    return ranked


_NO_ROWS = _Matrix(0, _HELD[_CONTEXT])


def _held_as(rows: vector_file.FacetRows) -> np.dtype | None:
    return rows.vectors.dtype if isinstance(rows.vectors, np.ndarray) else None


def _distinct(blocks: np.ndarray) -> list[int]:
    """The distinct block numbers in ``blocks``, ascending. Not ``np.unique``: its first call
    imports ``numpy.ma`` (16 ms, paid by a new process's first search)."""
    return np.flatnonzero(np.bincount(blocks)).tolist() if blocks.size else []


def _grow(array: np.ndarray, capacity: int, fill: int = 0) -> np.ndarray:
    grown = np.full((capacity, *array.shape[1:]), fill, dtype=array.dtype)
    grown[: len(array)] = array
    return grown

"""The in-memory matrices of one model's vectors: lazy load, incremental refresh, top-k.

The matrices mirror a model's vectors (``memory_embeddings``' rows and the blocks they are folded
into, ``vector_blocks``), one matrix per facet (a memory's own text, and its context). A search
multiplies the query with the context matrix only, plus the stand-ins of the few memories that have
no context vector yet (``_guess_contexts``); own vectors are looked up per candidate, for the
similarity a hit reports and for re-ranking the candidates, and are held as float16 (``_HELD``):
half the memory, similarities within 1e-4. Ranking by context alone is what bench/locomo.py measured
as good as ranking by both (and it halves the work of every search: bench/README.md). The matrices
are loaded on the first search, from the blocks (``vector_blocks.load``: a few large blobs, in a
worker thread). A load leaves the own vectors of whole blocks on disk (a third of the bytes: the
first search after a restart need not wait for them): a search reads its candidates' own vectors
there by their slots (``matrix.DiskBlock``) until the warm-up reads those blocks whole
(``read_own_vectors``); a block changed meanwhile by another process is noticed by its slots
(``StaleBlock``), and the vectors are loaded anew, whole.

The matrices are then kept current cheaply: rows this process writes are fetched by id (ids only
grow; the rows it deletes it removes itself), and ``PRAGMA data_version`` reveals commits by other
processes (Claude Desktop often runs two copies of a server on one file). After another process
committed, the row count is compared with the database's: when it disagrees, something was deleted
elsewhere and the matrices are rebuilt.

Each matrix is kept in fixed-size blocks, so that growing it or compacting it after a delete
never holds two copies of it at once: peak memory stays close to the vectors' own size.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

import anyio
import numpy as np

from ollama_mcp.domain import Scope
from ollama_mcp.errors import EmbeddingMismatchError
from ollama_mcp.storage.sqlite import vector_blocks
from ollama_mcp.storage.sqlite.block_read import StaleBlock
from ollama_mcp.storage.sqlite.matrix import INLINE_ROWS, Matrix, distinct, top
from ollama_mcp.storage.sqlite.store import FACET_CODES, Store, VectorBatch

_CONTENT, _CONTEXT = FACET_CODES["content"], FACET_CODES["context"]
# How each facet's vectors are held (``vector_blocks.HELD``: float32 in context, float16 own).
_HELD: dict[int, np.dtype] = {FACET_CODES[facet]: np.dtype(held) for facet, held in vector_blocks.HELD.items()}

log = logging.getLogger(__name__)

# A search learns the contexts of at most this many memories waiting for their in-context vector
# and builds their stand-ins (``_guess_contexts``); more (a restart right after an import) are
# left to the background (``prepare_stand_ins``) and rank by their own vectors meanwhile: the
# first search after a restart on 10,000 of them took 180-330 ms with them, 100 is its target.
STAND_INS_AT_ONCE = 2_000
STAND_INS_A_STEP = 1_000  # the background's, between which searches go on

# A model's vectors already read from a database's blocks, or None: what a new process read while
# it was importing the app (``head_start.HeadStart``).
EarlyLoad = Callable[[Path, str], Awaitable["vector_blocks.Loaded | None"]]


@dataclass(frozen=True)
class Ranking:
    """The best memories by meaning, as (seq, score), and the content similarity to the query of
    those and of every other candidate asked for (a memory's similarity is its best chunk's)."""

    ranked: list[tuple[int, float]]
    similarity: dict[int, float]


_EMPTY = Ranking([], {})


class VectorIndex:
    """All vectors of one model, ranked by cosine similarity (the vectors are unit length)."""

    def __init__(self, store: Store, model: str, early: EarlyLoad | None = None) -> None:
        self._store = store
        self.model = model
        self._early = early  # where the first load may find the blocks already read (head_start.py)
        self._lock = anyio.Lock()
        self._loaded = False
        self._dirty = False
        self._data_version: int | None = None
        self.loaded_from: str | None = None  # "blocks" or "rows": how the last full load read
        # Whether a load may leave the own vectors of whole blocks on disk (read per candidate
        # until ``read_own_vectors``): not after a block changed under this process (``StaleBlock``).
        self._own_on_disk = True
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

    async def remove(self, memory_seqs: Iterable[int], facet: str | None = None) -> None:
        """Drop rows of memories this process deleted (or, with ``facet``, only that facet's rows)."""
        async with self._lock:
            seqs = np.fromiter(memory_seqs, dtype=np.int64)
            if seqs.size:
                for code, matrix in self._matrices.items():
                    if facet is None or code == FACET_CODES[facet]:
                        try:
                            matrix.remove(seqs)
                        except StaleBlock as exc:
                            self._stale(exc)
                            return
                content = self._matrices.get(_CONTENT)
                for seq in seqs.tolist():
                    if facet == "context" and content is not None and seq in content.rows_of:
                        self._uncovered.add(seq)  # ranked by its own vector until the new context's arrives
                    else:
                        self._uncovered.discard(seq)

    async def refresh(self, data_version: int | None = None) -> None:
        """Bring the matrices up to date with the database (cheap when nothing changed), learning
        the contexts of the memories waiting for theirs when at most ``STAND_INS_AT_ONCE`` wait.

        ``data_version``: the database's data version if the caller just read it.
        """
        async with self._lock:
            version = await self._store.data_version() if data_version is None else data_version
            if self._loaded and not self._dirty and version == self._data_version:
                return
            self._dirty = False
            if not self._loaded:
                self._reset()
                if not await self._load_blocks():
                    self.loaded_from = "rows"
                    await self._store.vector_snapshot(self.model, 0, self._append, count=False)
            elif version == self._data_version:
                # Only this process wrote since the last look, and its deletes went through
                # ``remove``: new rows are all there is to fetch (no count of every row, which
                # costs 6-9 ms at 100k on every search after a store).
                await self._store.vector_snapshot(self.model, self._max_id, self._append, count=False)
            elif await self._store.vector_snapshot(self.model, self._max_id, self._append) != self.size + self._skipped:
                # Rows vanished under us (another process deleted memories): rebuild from scratch.
                self._reset()
                if not await self._load_blocks():
                    self.loaded_from = "rows"
                    await self._store.vector_snapshot(self.model, 0, self._append)
            await self._learn_context_parts(STAND_INS_AT_ONCE)
            self._loaded = True
            self._data_version = version

    async def prepare_stand_ins(self) -> None:
        """Build every stand-in a search would (the background's: after a load or a burst of
        stores leaves more than ``STAND_INS_AT_ONCE`` memories waiting for their context), a
        step of ``STAND_INS_A_STEP`` at a time: a search meanwhile waits for one step at most."""
        await self.refresh()
        left = 1
        while left:
            async with self._lock:
                if not self._loaded:
                    return  # (removed or invalidated meanwhile: the next search loads anew)
                left = await self._learn_context_parts(None, STAND_INS_A_STEP)
                content = self._matrices.get(_CONTENT)
                if content is not None and self._bare_held != self._uncovered:  # (after every store: mostly not)
                    await anyio.to_thread.run_sync(self._bare_rows, content)

    async def _learn_context_parts(self, at_most: int | None, step: int | None = None) -> int:
        """Read what the contexts of the memories still waiting for a context vector are made of
        (``_guess_contexts``), once each, ``step`` of them (all: None); a stand-in built before
        that is built again. More than ``at_most`` are left to ``prepare_stand_ins``: they rank by
        their own vector meanwhile. Returns how many are left to read."""
        for seq in self._parts.keys() - self._uncovered:
            del self._parts[seq]
        missing = self._uncovered - self._parts.keys()
        if not missing or (at_most is not None and len(missing) > at_most):
            return len(missing)
        now = set(sorted(missing)[:step]) if step is not None else missing
        found = await self._store.context_parts(sorted(now))
        for seq in now:
            self._parts[seq] = found.get(seq, [])
        stale = now & self._bare_held
        if stale:
            self._bare.remove(np.fromiter(stale, dtype=np.int64))
            self._bare_held -= stale
        return len(missing) - len(now)

    async def rank(self, query: np.ndarray, k: int, scope: Scope, candidates: Iterable[int] = ()) -> Ranking:
        """The ``k`` best memories in ``scope`` by meaning, with the content similarity of those and
        of ``candidates`` (found otherwise, e.g. by keywords); call ``refresh`` first.

        Large matrices are ranked in a worker thread (numpy releases the GIL, so the event loop
        keeps serving other requests); the lock keeps refreshes and removals out while it reads.
        Small ones are ranked on the event loop: the hand-off to a thread and back costs more
        than the product itself (0.4 ms of a 10k-memory search, bench/README.md).
        """
        args = (query.astype(np.float32, copy=False), k, scope, list(candidates))
        async with self._lock:
            if self.size == 0:
                return _EMPTY
            self.check_dimension(query)
            try:
                return await self._ranked(args)
            except StaleBlock as exc:
                self._stale(exc)
        await self.refresh()  # loaded anew, the own vectors read whole: nothing is read from disk now
        async with self._lock:
            return await self._ranked(args) if self.size else _EMPTY

    async def _ranked(self, args: tuple[np.ndarray, int, Scope, list[int]]) -> Ranking:
        if self.ranked_rows <= INLINE_ROWS:
            return self._rank(*args)
        return await anyio.to_thread.run_sync(self._rank, *args)

    async def read_own_vectors(self) -> int:
        """Read whole the blocks of own vectors a load left on disk (a new process's first search
        then need not wait for them: a third of the bytes, 77 MB at 100k memories), one block at
        a time, so that searches meanwhile wait for one block's read at most; returns how many.
        The background's warm-up calls it once the indexes are loaded."""
        read = 0
        while True:
            async with self._lock:
                content = self._matrices.get(_CONTENT)
                if content is None or not (left := content.on_disk()):
                    break
                try:
                    await anyio.to_thread.run_sync(content.read_whole, left[0])
                except StaleBlock as exc:
                    self._stale(exc)
                    break
                read += 1
        self._store.blobs.close()  # (opened again if a later load leaves blocks on disk)
        return read

    def _stale(self, exc: StaleBlock) -> None:
        """A block a load left on disk changed since (another process compacted it, or the file
        cannot be read): load anew at the next refresh, and read own vectors whole from now on."""
        log.info("vectors of %s changed under this process (%s); loading them anew", self.model, exc)
        self._loaded = False
        self._own_on_disk = False

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
        ranked = top(np.concatenate(seqs), np.concatenate(scores), k) if len(seqs) > 1 else top(seqs[0], scores[0], k)
        similarity = content.similarities(query, [*candidates, *(seq for seq, _ in ranked)]) if content else {}
        return Ranking(ranked, similarity)

    def _reset(self) -> None:
        self.dim: int | None = None
        self._matrices: dict[int, Matrix] = {}
        self._skipped: int = 0
        self._max_id: int = 0
        self._uncovered: set[int] = set()  # memories with an own vector but no context vector yet
        # ... what each one's context is made of: (seq, characters) of its texts, itself last ...
        self._parts: dict[int, list[tuple[int, int]]] = {}
        # ... and their stand-in rows, as float32, as of the last search (``_bare_rows``).
        self._bare = Matrix(0, _HELD[_CONTEXT])
        self._bare_held: set[int] = set()

    async def _load_blocks(self) -> bool:
        """Load every vector from the blocks and the rows not folded yet (``vector_blocks.load``,
        one read transaction on a connection of its own), then fetch the rows written since, with
        a count that tells whether rows were deleted since; False when the load could not read
        them so (the caller then reads the rows through the store)."""
        early, self._early = self._early, None  # a read begun before the index existed serves the first load only
        found = await early(self._store.path, self.model) if early is not None else None
        if found is not None and not await self._take(found):
            self._reset()  # rows it read were deleted before this process opened the store: read anew
            found = None
        if found is None:
            found = await anyio.to_thread.run_sync(
                functools.partial(vector_blocks.load, self._store.path, self.model, own=not self._own_on_disk)
            )
            if found is None or not await self._take(found):
                self._reset()
                return False
        self.loaded_from = "blocks"
        return True

    async def _take(self, found: vector_blocks.Loaded) -> bool:
        """Hold what a load read, then fetch the rows written since; False when rows it read were
        deleted since (the count of rows tells), and what it read must not be kept."""
        if found.dim is not None:
            self.dim, self._skipped, self._max_id = found.dim, found.skipped, found.max_id
        for code, rows in found.facets.items():
            self._matrices[code] = Matrix.adopt(self.dim or 0, _HELD[code], rows, self._store.blobs)
        content, context = self._matrices.get(_CONTENT), self._matrices.get(_CONTEXT, _NO_ROWS)
        if content is not None:
            self._uncovered = content.rows_of.without(context.rows_of)
        # Rows written since (the load may have begun before this process opened the store), and
        # whether any it read were deleted since: then nothing of it is kept.
        total = await self._store.vector_snapshot(self.model, self._max_id, self._append)
        return total == self.size + self._skipped

    def _bare_rows(self, content: Matrix) -> Matrix:
        """The own rows of the memories with no context vector yet, as float32, brought up to date
        with ``_uncovered``: every search ranks them with the context vectors, and converting
        their held float16 rows anew cost each search ~1 µs a row (2,000 while a burst of stores
        waits for the backfill: 2.5 ms a search). Only what changed since the last search is
        converted; a whole load never holds them twice (they are copied here at a search)."""
        if self._bare.dim != content.dim:
            self._bare, self._bare_held = Matrix(content.dim, _HELD[_CONTEXT]), set()
        bare, held = self._bare, self._bare_held
        if held != self._uncovered:
            bare.remove(np.fromiter(held - self._uncovered, dtype=np.int64))
            rows, owners = content.rows_of.lookup(np.fromiter(self._uncovered - held, dtype=np.int64))
            if rows.size:
                bare.extend(content.ids[rows], content.seqs[rows], content.convs[rows], content.kinds[rows],
                            self._guess_contexts(content, owners, content.gather(rows).astype(np.float32)))
            self._bare_held = set(self._uncovered)
        return bare

    def _guess_contexts(self, content: Matrix, owners: np.ndarray, own: np.ndarray) -> np.ndarray:
        """Each own row as the stand-in for its memory's context vector (``ranking.stand_in``),
        from the own vectors of the memories its context holds; a part whose own vector is not
        here yet is left out. A few matrix operations for every row at once, one per place in a
        context (a row at a time, the first search after a burst of 10,000 stores took ~900 ms
        in this loop: #80); each into one preallocated array (a fresh 46 MB one per search cost
        ~190 ms of page faults on these machines)."""
        mixed: list[int] = []  # the rows of ``own`` that get a stand-in ...
        weight: list[int] = []  # ... their own text's characters ...
        earlier: list[list[tuple[int, int]]] = []  # ... and the (seq, characters) mixed into each
        for i, seq in enumerate(owners.tolist()):
            held = self._parts.get(seq) or []
            others = [(part, max(1, count)) for part, count in held if part != seq]
            if others:
                mixed.append(i)
                weight.append(max(1, held[-1][1]))  # itself, last
                earlier.append(others)
        if not mixed:
            return own
        width = max(len(parts) for parts in earlier)
        seqs = np.full((len(mixed), width), -1, dtype=np.int64)
        chars = np.zeros((len(mixed), width), dtype=np.float32)
        for row, parts in enumerate(earlier):
            seqs[row, :len(parts)] = [part for part, _ in parts]
            chars[row, :len(parts)] = [count for _, count in parts]
        rows, of = content.rows_of.lookup(np.asarray(distinct(seqs[seqs >= 0]), dtype=np.int64))
        order = np.argsort(of, kind="stable")  # a memory of several chunks: its first row, as listed
        of, rows = of[order], rows[order]
        first = np.ones(len(of), dtype=bool)
        first[1:] = of[1:] != of[:-1]
        of, rows = of[first], rows[first]
        out = own.astype(np.float32, copy=True)
        picked = np.asarray(mixed, dtype=np.int64)
        sums = out[picked]
        sums *= np.asarray(weight, dtype=np.float32)[:, None]
        if len(of):
            vectors = content.gather(rows).astype(np.float32)
            at = np.minimum(np.searchsorted(of, seqs), len(of) - 1)
            chars[of[at] != seqs] = 0.0  # a part not here yet (or no part): left out
            part = np.empty_like(sums)
            for place in range(width):
                np.take(vectors, at[:, place], axis=0, out=part)
                part *= chars[:, place, None]
                sums += part
        norms = np.linalg.norm(sums, axis=1)
        usable = norms > 0
        out[picked[usable]] = sums[usable] / norms[usable, None]
        return out

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
                matrix = self._matrices[facet] = Matrix(self.dim, _HELD[facet])
            vectors = np.frombuffer(b"".join([batch.vectors[i] for i in pick.tolist()]), dtype="<f4")
            matrix.extend(ids[pick], seqs[pick], convs[pick], kinds[pick], vectors.reshape(pick.size, self.dim))
            if facet == _CONTEXT:
                self._uncovered.difference_update(seqs[pick].tolist())
            else:
                added = seqs[pick]
                self._uncovered.update(added[~self._matrices.get(_CONTEXT, _NO_ROWS).rows_of.holds(added)].tolist())


_NO_ROWS = Matrix(0, _HELD[_CONTEXT])

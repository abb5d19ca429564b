"""The data structure under the SQLite backend's vector search (no I/O): one facet's vectors in
fixed-size blocks (``Matrix``), so that growing or compacting it never holds two copies at once,
the rows of each memory (``_RowIndex``), and the top k of a scoring. ``vector_index`` keeps these
in step with the database."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from ollama_mcp.domain import Scope
from ollama_mcp.storage.sqlite import vector_blocks
from ollama_mcp.storage.sqlite.block_read import Blobs
from ollama_mcp.storage.sqlite.rows import KIND_CODES

# How many chunk rows to rank per wanted memory: memories split into several chunks would
# otherwise crowd the top-k with duplicates of themselves.
_OVERFETCH = 4
_MISSING, _SEVERAL = -1, -2  # a memory seq without a row, or with several (one per chunk)
# Rows a block of the matrix holds: a block of ``vector_blocks`` (so that a load holds each block
# it read as it was read, without a copy).
BLOCK_ROWS = vector_blocks.BLOCK_ROWS
# Up to this many rows a search ranks on the event loop (about 1.5 ms of numpy at 768
# dimensions); beyond it, in a worker thread.
INLINE_ROWS = 25_000
# A block left on disk gives up to this many rows a read one by one (a search's candidates: 0.2 ms
# for 60); asked for more (a removal rewriting the matrix), it is read whole.
FEW_ROWS = 256
# A scope holding at most this share of the rows (one conversation of many, a tag, a time window)
# is scored by its own rows alone. Multiplying every row costs 0.13 us a row (13 ms at 100k x 384);
# picking rows out of the blocks costs more a row, and won at a quarter of the rows in a scratch
# probe (9 against 14 ms, rows spread over every block), lost at half (bench/README.md).
SPARSE_SHARE = 0.25
# From this many rows on, the plain product is split in two: the calling thread multiplies one
# half of the blocks, a helper thread the other (numpy lets go of the GIL). The product is bound by
# memory bandwidth, which one core does not fill: 15.5 against 9.8 ms at 100k x 384 on this
# workplace's 2 cores, 0.45 against 0.29 ms at 10k (a scratch probe; bench/README.md). More than two
# parts was not measured (no machine here has more cores).
SPLIT_ROWS = 16 * BLOCK_ROWS
_helper: ThreadPoolExecutor | None = None
_helper_made = threading.Lock()


def _helper_thread() -> ThreadPoolExecutor:
    """The one helper thread every matrix of the process shares, made on first use."""
    global _helper
    with _helper_made:
        if _helper is None:
            _helper = ThreadPoolExecutor(1, thread_name_prefix="ollama-mcp-product")
        return _helper


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

    def without(self, other: _RowIndex) -> set[int]:
        """The seqs with rows here and none in ``other`` (compared as arrays: two sets of every
        seq cost a new process's first search about 1 ms at 10k memories, 10 at 100k)."""
        held = self._row != _MISSING
        shared = min(len(held), len(other._row))
        held[:shared] &= other._row[:shared] == _MISSING
        return set(np.flatnonzero(held).tolist())

    def add(self, seqs: np.ndarray | list[int], start: int) -> None:
        """Rows ``start``, ``start + 1``, ... belong to ``seqs``, in order."""
        if not len(seqs):
            return
        wanted = np.asarray(seqs, dtype=np.int64)
        if (top := int(wanted.max()) + 1) > len(self._row):
            self._row = grow(self._row, max(top, len(self._row) + len(self._row) // 4), fill=_MISSING)
        if (self._row[wanted] == _MISSING).all():  # the common case: new memories, one row each
            rows = np.arange(start, start + len(seqs), dtype=np.int32)
            self._row[wanted] = rows
            if (self._row[wanted] == rows).all():  # (a seq given twice kept only its last row)
                return
            self._row[wanted] = _MISSING  # (not np.unique: its first call imports numpy.ma, 16 ms)
        for row, seq in enumerate(wanted.tolist(), start):
            held = int(self._row[seq])
            if held == _MISSING:
                self._row[seq] = row
            elif held == _SEVERAL:
                self._more[seq].append(row)
            else:
                self._more[seq] = [held, row]
                self._row[seq] = _SEVERAL


def _count_into(counter: Counter[int], values: np.ndarray) -> None:
    """``counter.update(values)`` for small non-negative integers (conversation keys, kind codes),
    counted by ``np.bincount``: a Counter walks every row in Python, which on a whole load was
    about 0.5 ms per 10k rows, four times, on the way to a new process's first search."""
    if not len(values):
        return
    if int(values.min()) < 0:  # (never for keys and codes; counted as a Counter would)
        counter.update(values.tolist())
        return
    counts = np.bincount(values)
    present = np.flatnonzero(counts)
    counter.update(dict(zip(present.tolist(), counts[present].tolist(), strict=True)))


class DiskBlock:
    """A block of the matrix whose vectors are still in the database (a load left the own vectors
    on disk, ``block_read.read``'s ``own``): rows asked for are read from there, a few by their
    slots, more by reading the whole block, which it then keeps. Each read first checks the block
    still holds the rows the load found (``block_read.StaleBlock`` otherwise)."""

    def __init__(self, block: int, ids: np.ndarray, dim: int, dtype: np.dtype, disk: Blobs) -> None:
        self.block, self.dim, self.dtype = block, dim, dtype
        self._ids = np.array(ids, dtype="<i8")  # (a copy: the matrix's own ids move when it is compacted)
        self._disk = disk
        self.held: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self._ids)

    def __getitem__(self, key: np.ndarray | slice) -> np.ndarray:
        if self.held is None and isinstance(key, np.ndarray) and key.size <= FEW_ROWS:
            slots = np.flatnonzero(np.bincount(key, minlength=len(self._ids)))  # distinct, ascending
            width = self.dtype.itemsize * self.dim
            data = self._disk.rows(self.block, slots.tolist(), self._ids[slots].tolist(), width)
            read = np.frombuffer(data, dtype=self.dtype).reshape(len(slots), self.dim)
            return read[np.searchsorted(slots, key)]
        return self.whole()[key]

    def whole(self) -> np.ndarray:
        """Every vector of the block, read once (read-only: the bytes as read, not copied)."""
        if self.held is None:
            data = self._disk.whole(self.block, self._ids.tobytes(), self.dtype.itemsize * self.dim)
            self.held = np.frombuffer(data, dtype=self.dtype).reshape(len(self._ids), self.dim)
        return self.held


class Matrix:
    """The rows of one facet: vectors in blocks, and per row its id, memory, conversation, kind."""

    def __init__(self, dim: int, dtype: np.dtype) -> None:
        self.dim = dim
        self.dtype = dtype  # of the vectors held; dot products are float32 either way
        self.n = 0
        self.blocks: list[np.ndarray | DiskBlock] = []
        self.ids = np.zeros(0, dtype=np.int64)
        self.seqs = np.zeros(0, dtype=np.int64)
        self.convs = np.zeros(0, dtype=np.int64)
        self.kinds = np.zeros(0, dtype=np.int8)
        # Row counts per conversation and per kind: a scope that covers every row needs no mask.
        self.per_conversation: Counter[int] = Counter()
        self.per_kind: Counter[int] = Counter()
        self.rows_of = _RowIndex()  # memory seq -> its rows (one per chunk)

    @classmethod
    def adopt(cls, dim: int, dtype: np.dtype, rows: vector_blocks.FacetRows, disk: Blobs | None = None) -> Matrix:
        """A matrix holding ``rows`` (a load's): a whole block of them becomes a block here as it
        is (read-only, never written: ``remove`` replaces it), a whole block left on disk a
        ``DiskBlock`` read from ``disk``; the others are copied in."""
        matrix, placed = cls(dim, dtype), 0
        for part in rows.vectors:
            whole = len(part) == BLOCK_ROWS and placed % BLOCK_ROWS == 0 and part.dtype == dtype
            if isinstance(part, vector_blocks.OnDisk):
                if disk is None:
                    raise ValueError("a load left vectors on disk, and the matrix was given no way to read them")
                on_disk = DiskBlock(part.block, rows.ids[placed:placed + part.n], dim, part.dtype, disk)
                if whole:
                    matrix.blocks.append(on_disk)
                else:
                    matrix._place(placed, on_disk.whole())
            elif whole:
                matrix.blocks.append(part)
            else:
                matrix._place(placed, part)
            placed += len(part)
        matrix._add_rows(rows.ids, rows.seqs, rows.convs, rows.kinds)
        return matrix

    def extend(
        self, ids: np.ndarray, seqs: np.ndarray, convs: np.ndarray, kinds: np.ndarray, vectors: np.ndarray
    ) -> None:
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
            target = self.blocks[block]
            if not isinstance(target, np.ndarray):  # (never: blocks left on disk are whole, placed past)
                raise TypeError("rows placed into a block left on disk")
            target[offset:offset + take] = vectors[done:done + take]
            done += take

    def _add_rows(self, ids: np.ndarray, seqs: np.ndarray, convs: np.ndarray, kinds: np.ndarray) -> None:
        """Count in the rows whose vectors were just placed after row ``n``."""
        start, end = self.n, self.n + len(ids)
        if end > len(self.ids):
            capacity = max(64, end + end // 4)
            for name in ("ids", "seqs", "convs", "kinds"):
                setattr(self, name, grow(getattr(self, name), capacity))
        self.ids[start:end], self.seqs[start:end], self.convs[start:end], self.kinds[start:end] = (
            ids,
            seqs,
            convs,
            kinds,
        )
        _count_into(self.per_conversation, convs)
        _count_into(self.per_kind, kinds)
        self.rows_of.add(seqs, start)
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
            moved, block = self.gather(sources), self.blocks[start // BLOCK_ROWS]
            if isinstance(block, DiskBlock) or not block.flags.writeable:  # as a load read it: replaced
                block = self.blocks[start // BLOCK_ROWS] = np.empty((BLOCK_ROWS, self.dim), dtype=self.dtype)
            block[: len(sources)] = moved
        for name in ("ids", "seqs", "convs", "kinds"):
            array = getattr(self, name)
            array[: len(keep)] = array[keep]
        self.n = len(keep)
        del self.blocks[-(-self.n // BLOCK_ROWS):]  # blocks past the last used row
        self.rows_of = _RowIndex()
        self.rows_of.add(self.seqs[: self.n], 0)

    def on_disk(self) -> list[int]:
        """The blocks still read from disk (``DiskBlock``), by number."""
        return [i for i, block in enumerate(self.blocks) if isinstance(block, DiskBlock)]

    def read_whole(self, number: int) -> None:
        """Read block ``number``, left on disk, whole: it is then held like any block a load read."""
        block = self.blocks[number]
        if isinstance(block, DiskBlock):
            self.blocks[number] = block.whole()

    def scores(self, query: np.ndarray, scope: Scope) -> np.ndarray:
        """Cosine similarity of every row to ``query``; -inf outside ``scope``. When ``scope`` holds
        few of the rows (``SPARSE_SHARE``), only those are multiplied."""
        mask = self._mask(scope)
        if mask is not None and np.count_nonzero(mask) <= SPARSE_SHARE * self.n:
            chosen = np.flatnonzero(mask)
            scores = np.full(self.n, -np.inf, dtype=np.float32)
            if chosen.size:
                scores[chosen] = self._dot_rows(chosen, query)
            return scores
        scores = np.empty(self.n, dtype=np.float32)
        used = -(-self.n // BLOCK_ROWS)
        if self.n >= SPLIT_ROWS:
            other = _helper_thread().submit(self._product, query, scores, used // 2, used)
            self._product(query, scores, 0, used // 2)
            other.result()
        else:
            self._product(query, scores, 0, used)
        if mask is not None:
            np.copyto(scores, -np.inf, where=~mask)
        return scores

    def _product(self, query: np.ndarray, scores: np.ndarray, first: int, last: int) -> None:
        """``query``'s dot product with every row of blocks ``first`` to ``last`` (excluded), into
        their places in ``scores``."""
        for i in range(first, last):
            start = i * BLOCK_ROWS
            rows = min(BLOCK_ROWS, self.n - start)
            np.matmul(self.blocks[i][:rows], query, out=scores[start:start + rows])

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
        masks: list[np.ndarray] = []
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
        for block in distinct(owners):
            chosen = owners == block
            out[chosen] = self.blocks[block][rows[chosen] % BLOCK_ROWS]
        return out

    def _dot_rows(self, rows: np.ndarray, query: np.ndarray) -> np.ndarray:
        """``query``'s dot product with each of ``rows``, block by block, without first gathering
        the rows into one array as ``gather`` does (0.04 ms for 200 rows instead of 0.35)."""
        out = np.empty(len(rows), dtype=np.float32)
        owners = rows // BLOCK_ROWS
        for block in distinct(owners):
            chosen = np.nonzero(owners == block)[0]
            out[chosen] = self.blocks[block][rows[chosen] % BLOCK_ROWS].astype(np.float32, copy=False) @ query
        return out


def top(seqs: np.ndarray, scores: np.ndarray, k: int) -> list[tuple[int, float]]:
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


def distinct(blocks: np.ndarray) -> list[int]:
    """The distinct block numbers in ``blocks``, ascending. Not ``np.unique``: its first call
    imports ``numpy.ma`` (16 ms, paid by a new process's first search)."""
    return np.flatnonzero(np.bincount(blocks)).tolist() if blocks.size else []


def grow(array: np.ndarray, capacity: int, fill: int = 0) -> np.ndarray:
    grown = np.full((capacity, *array.shape[1:]), fill, dtype=array.dtype)
    grown[: len(array)] = array
    return grown

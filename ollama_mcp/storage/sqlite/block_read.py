"""What a new process reads of a model's vectors (``vector_blocks``' format), before numpy is
imported: the blocks' blobs and the rows not folded yet, in one read transaction on a connection of
its own (``read``); and, later, the own vectors such a read left on disk, a few slots or a whole
block at a time (``Blobs``), each read checked against the rows the first one found.

A new process's head start reads them in a worker thread while the main thread imports the app
(numpy among it), then makes arrays of them (``vector_blocks.assemble``). So this module imports
the standard library only, and the codes a block keeps are defined here (``rows`` and
``vector_blocks`` take them from here). Importing modules of ours in two threads at once could
deadlock on their import locks: nothing of ours is imported here.

(Begun earlier, in ``serve`` before it imports the SDK, the read made the first search at once
sooner, 97 ms instead of 117 at 10k memories and 193 instead of 328 at 100k, but ``initialize``
7-8% later, against #57's 5%: bench/README.md.)
"""

from __future__ import annotations

import logging
import sqlite3
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

KIND_CODES: dict[str, int] = {"note": 0, "message": 1, "summary": 2, "fact": 3}
FACET_CODES: dict[str, int] = {"content": 0, "context": 1}
# How each facet's vectors are held, in memory and in blocks. Every search multiplies the in-context
# vectors whole: float32, for BLAS. The own vectors are only looked up per candidate (a few hundred
# rows a search), so they are held at half the size: float16 moves a similarity by at most ~5e-5
# (bench/README.md), and halves what a large store holds of them (100k x 768: 293 MB -> 147 MB).
HELD: dict[str, str] = {"content": "<f2", "context": "<f4"}
# Rows a block holds: a block is read whole by a load, and written whole by a fold (1,024 rows
# of 384 dimensions: 1.5 MB of float32, one statement of a few milliseconds).
BLOCK_ROWS = 1024
BUSY_TIMEOUT_MS = 10_000  # db.BUSY_TIMEOUT_MS (not imported from there: see above)
# A load reads the blocks' pages through a memory map: a blob's overflow pages are then copied
# out of the OS's cache, not read one system call a page.
MMAP_BYTES = 1 << 34
# But the pages a read touches through the map count in the process's memory until they are
# unmapped, on top of the bytes they were copied into (a whole load at 100k memories: 230 MB of
# each at its peak). A load unmaps them each time it has read this much, at no cost in time
# (bench/README.md, "The own vectors left on disk"), and a block read whole unmaps them at once.
UNMAP_BYTES = 8 << 20


@dataclass
class Found:
    """A model's vectors as one read transaction found them, not yet arrays (``vector_blocks.assemble``)."""

    model: str
    dim: int | None  # of the model's first row; None: the model has no vector
    # (id, facet, dim, dtype, n, dead, slots, vectors) per block, oldest first
    # (the vectors None: an own facet's block left on disk, ``read``'s ``own``)
    blocks: list[tuple[Any, ...]] = field(default_factory=list)
    live: dict[int, list[int]] = field(default_factory=dict)  # live slots of blocks with dead ones
    # (id, memory seq, conversation key, kind, facet, dim, float32 vector) per row not folded yet
    rows: list[tuple[Any, ...]] = field(default_factory=list)


def read(path: Path, model: str, *, own: bool = True) -> Found | None:
    """Every vector of ``model`` in the database at ``path``; None when it cannot be read so (no
    such file, a schema without blocks: the index then reads the rows through the store).
    ``own=False``: the own vectors of whole blocks (no dead slot) are left on disk, their slots
    read (the index reads their vectors per candidate until it reads them whole, ``Blobs``).
    Blocking: call it from a worker thread."""
    conn = _connect(path)
    if conn is None:
        return None
    try:
        conn.execute("BEGIN")
        try:
            return _read(conn, model, own)
        finally:
            conn.execute("COMMIT")
    except sqlite3.Error as exc:
        log.info("could not read the vectors of %s from %s at once (%s); reading them row by row", model, path, exc)
        return None
    finally:
        conn.close()


def _own_vectors_rank(blocks: list[tuple[Any, ...]], dead: dict[int, set[int]]) -> bool:
    """Whether a search ranks many memories by their own vectors (those still without an
    in-context vector, after a burst of stores or an import: a quarter or more of the blocks'
    live rows). Leaving their blocks on disk then only moves the read onto the first search (10k
    memories: 44 ms of it)."""
    live = {"content": 0, "context": 0}
    for block, facet, _, _, n, _ in blocks:
        live[facet] = live.get(facet, 0) + n - len(dead.get(block, ()))
    return live["content"] > 0 and live["context"] < live["content"] * 3 // 4


def _connect(path: Path) -> sqlite3.Connection | None:
    """A connection of its own to an existing database (never creating one), for reads."""
    try:
        conn = sqlite3.connect(
            f"{path.absolute().as_uri()}?mode=rw", uri=True, isolation_level=None, check_same_thread=False
        )
    except sqlite3.Error:
        return None
    try:
        conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        conn.execute(f"PRAGMA mmap_size = {MMAP_BYTES}")
    except sqlite3.Error:
        conn.close()
        return None
    return conn


def _read(conn: sqlite3.Connection, model: str, own: bool) -> Found:
    first = conn.execute("SELECT dim FROM memory_embeddings WHERE model = ? ORDER BY id LIMIT 1", (model,)).fetchone()
    if first is None:
        return Found(model, None)
    found = Found(model, int(first[0]))
    dead: dict[int, set[int]] = {}
    for block, slot in conn.execute(
        "SELECT d.block_id, d.slot FROM vector_block_dead d JOIN vector_blocks b ON b.id = d.block_id"
        " WHERE b.model = ?", (model,),
    ):
        dead.setdefault(int(block), set()).add(int(slot))
    # Each block's vectors by an incremental blob read: it copies the blob's pages into the bytes
    # with the GIL released (a column read copies them twice, holding it), while a new process's
    # main thread is importing the app.
    mapped = 0
    blocks = conn.execute(
        "SELECT id, facet, dim, dtype, n, slots FROM vector_blocks WHERE model = ? ORDER BY id", (model,)
    ).fetchall()
    own = own or _own_vectors_rank(blocks, dead)
    for block, facet, dim, dtype, n, slots in blocks:
        gone = dead.get(block, set())
        if gone:
            found.live[block] = [slot for slot in range(n) if slot not in gone]
        if not own and facet == "content" and not gone:
            found.blocks.append((block, facet, dim, dtype, n, 0, slots, None))
            continue
        with conn.blobopen("vector_blocks", "vectors", block, readonly=True) as blob:
            found.blocks.append((block, facet, dim, dtype, n, len(gone), slots, blob.read()))
        mapped += len(found.blocks[-1][7])
        if mapped >= UNMAP_BYTES:
            _unmap(conn)
            mapped = 0
    found.rows = conn.execute(
        "SELECT e.id, e.memory_seq, m.conversation_key, m.kind, e.facet, e.dim, e.vector FROM memory_embeddings e"
        " JOIN memories m ON m.seq = e.memory_seq"
        " WHERE e.model = ? AND e.block_id IS NULL ORDER BY e.id", (model,),
    ).fetchall()
    return found


def _unmap(conn: sqlite3.Connection) -> None:
    """Drop the pages ``conn`` mapped (SQLite maps them again as it needs them)."""
    conn.execute("PRAGMA mmap_size = 0")
    conn.execute(f"PRAGMA mmap_size = {MMAP_BYTES}")


class StaleBlock(Exception):
    """A block left on disk is no longer as the load read it (compacted, dropped, its id taken by
    a new block, the file unreadable): what was loaded must be loaded anew."""


class Blobs:
    """Reads the vectors of blocks a load left on disk (``read``'s ``own``), on a connection of
    its own: opened at the first read, closed by ``close`` (and opened again if asked again).
    Each call is one read transaction, and checks first that the block still holds the rows the
    load found in those slots (``StaleBlock`` otherwise). Blocking, thread-safe."""

    def __init__(self, path: Path) -> None:
        self._path = path
        self._conn: sqlite3.Connection | None = None
        self._lock = threading.Lock()

    def rows(self, block: int, slots: Sequence[int], ids: Sequence[int], width: int) -> bytes:
        """The vectors (``width`` bytes each) in ``slots`` of ``block``, which hold rows ``ids``."""
        def take(conn: sqlite3.Connection) -> bytes:
            parts: list[bytes] = []
            with conn.blobopen("vector_blocks", "slots", block, readonly=True) as held:
                for slot, expected in zip(slots, ids, strict=True):
                    held.seek(8 * slot)
                    if int.from_bytes(held.read(8), "little", signed=True) != expected:
                        raise StaleBlock(f"block {block} no longer holds row {expected} in slot {slot}")
            with conn.blobopen("vector_blocks", "vectors", block, readonly=True) as vectors:
                for slot in slots:
                    vectors.seek(width * slot)
                    parts.append(vectors.read(width))
            return b"".join(parts)

        return self._in_transaction(take)

    def whole(self, block: int, ids: bytes, width: int) -> bytes:
        """Every vector of ``block``, whose slots hold the rows ``ids`` (int64, little-endian)."""
        def take(conn: sqlite3.Connection) -> bytes:
            with conn.blobopen("vector_blocks", "slots", block, readonly=True) as held:
                if held.read(len(ids)) != ids:
                    raise StaleBlock(f"block {block} no longer holds the rows it held")
            with conn.blobopen("vector_blocks", "vectors", block, readonly=True) as vectors:
                if len(vectors) != width * (len(ids) // 8):
                    raise StaleBlock(f"block {block} no longer holds the rows it held")
                data = vectors.read()
            _unmap(conn)
            return data

        return self._in_transaction(take)

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    def _in_transaction(self, take: Callable[[sqlite3.Connection], bytes]) -> bytes:
        with self._lock:
            if self._conn is None:
                self._conn = _connect(self._path)
                if self._conn is None:
                    raise StaleBlock(f"{self._path} cannot be opened")
            conn = self._conn
            try:
                conn.execute("BEGIN")
                try:
                    return take(conn)
                finally:
                    conn.execute("COMMIT")
            except sqlite3.Error as exc:  # (no such block: it was compacted or dropped)
                raise StaleBlock(str(exc)) from exc

"""What a new process reads of a model's vectors (``vector_blocks``' format), before numpy is
imported: the blocks' blobs and the rows not folded yet, in one read transaction on a connection of
its own.

``serve`` begins this read (``begin``) in a thread of its own before it imports the MCP SDK: the
read then runs while the SDK is imported, half a second before ``initialize``, and the head start
takes it (``take``) and makes arrays of it once numpy is in (``vector_blocks.assemble``). So this
module imports the standard library only, and the codes a block keeps are defined here (``rows``
and ``vector_blocks`` take them from here). Importing modules of ours in two threads at once could
deadlock on their import locks: nothing of ours is imported here.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
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
BUSY_TIMEOUT_MS = 10_000
# A load reads the blocks' pages through a memory map: a blob's overflow pages are then copied
# out of the OS's cache, not read one system call a page.
MMAP_BYTES = 1 << 34


@dataclass
class Found:
    """A model's vectors as one read transaction found them, not yet arrays (``vector_blocks.assemble``)."""

    model: str
    dim: int | None  # of the model's first row; None: the model has no vector
    capacity: dict[str, int] = field(default_factory=dict)  # per facet: rows of ``dim``
    # (id, facet, dim, dtype, n, dead, slots, vectors) per block, oldest first
    blocks: list[tuple[Any, ...]] = field(default_factory=list)
    live: dict[int, list[int]] = field(default_factory=dict)  # live slots of blocks with dead ones
    # (id, memory seq, conversation key, kind, facet, dim, float32 vector) per row not folded yet
    rows: list[tuple[Any, ...]] = field(default_factory=list)


class _Begun:
    """A read running in a thread of its own, and its result once it is done."""

    def __init__(self, path: Path, model: str) -> None:
        self.found: Found | None = None
        self.done = threading.Event()
        threading.Thread(target=self._run, args=(path, model), name="ollama-mcp vectors", daemon=True).start()

    def _run(self, path: Path, model: str) -> None:
        try:
            self.found = read(path, model)
        except Exception:
            log.exception("reading the vectors of %s from %s failed", model, path)
        finally:
            self.done.set()


_BEGUN: dict[tuple[Path, str], _Begun] = {}
_BEGUN_LOCK = threading.Lock()


def begin(path: Path, model: str) -> None:
    """Start reading the vectors of ``model`` at ``path`` now, in a thread of its own, for ``take``
    (a new server process, before its imports). Nothing is created if there is no file there."""
    with _BEGUN_LOCK:
        if (path, model) not in _BEGUN:
            _BEGUN[(path, model)] = _Begun(path, model)


def take(path: Path, model: str) -> Found | None:
    """The read ``begin`` started for ``path`` and ``model`` once it is done (taken once: it is
    what the vectors were at the process's start), or a read made now when none was begun."""
    with _BEGUN_LOCK:
        begun = _BEGUN.pop((path, model), None)
    if begun is None:
        return read(path, model)
    begun.done.wait()
    return begun.found


def read(path: Path, model: str) -> Found | None:
    """Every vector of ``model`` in the database at ``path``; None when it cannot be read so (no
    such file, a schema without blocks: the index then reads the rows through the store).
    Blocking: call it from a worker thread."""
    try:
        conn = sqlite3.connect(f"{path.absolute().as_uri()}?mode=rw", uri=True, isolation_level=None)
    except sqlite3.Error:
        return None
    try:
        conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        conn.execute(f"PRAGMA mmap_size = {MMAP_BYTES}")
        conn.execute("BEGIN")
        try:
            return _read(conn, model)
        finally:
            conn.execute("COMMIT")
    except sqlite3.Error as exc:
        log.info("could not read the vectors of %s from %s at once (%s); reading them row by row", model, path, exc)
        return None
    finally:
        conn.close()


def _read(conn: sqlite3.Connection, model: str) -> Found:
    first = conn.execute("SELECT dim FROM memory_embeddings WHERE model = ? ORDER BY id LIMIT 1", (model,)).fetchone()
    if first is None:
        return Found(model, None)
    found = Found(model, int(first[0]), dict.fromkeys(FACET_CODES, 0))
    for facet, count in conn.execute(
        "SELECT facet, sum(n - dead) FROM vector_blocks WHERE model = ? AND dim = ? GROUP BY facet", (model, found.dim)
    ):
        found.capacity[facet] += int(count)
    for facet, count in conn.execute(
        "SELECT facet, count(*) FROM memory_embeddings WHERE model = ? AND block_id IS NULL AND dim = ?"
        " GROUP BY facet", (model, found.dim),
    ):
        found.capacity[facet] += int(count)
    for (block,) in conn.execute("SELECT id FROM vector_blocks WHERE model = ? AND dead > 0", (model,)).fetchall():
        found.live[int(block)] = [slot for (slot,) in conn.execute(
            "SELECT slot FROM memory_embeddings WHERE block_id = ? ORDER BY slot", (block,)  # (an index range)
        )]
    # Each block's vectors by an incremental blob read: it copies the blob's pages into the bytes
    # with the GIL released (a column read copies them twice, holding it), while a new process's
    # main thread is importing the app.
    for block, facet, dim, dtype, n, dead, slots in conn.execute(
        "SELECT id, facet, dim, dtype, n, dead, slots FROM vector_blocks WHERE model = ? ORDER BY id", (model,)
    ).fetchall():
        with conn.blobopen("vector_blocks", "vectors", block, readonly=True) as blob:
            found.blocks.append((block, facet, dim, dtype, n, dead, slots, blob.read()))
    found.rows = conn.execute(
        "SELECT e.id, e.memory_seq, c.rowid, m.kind, e.facet, e.dim, e.vector FROM memory_embeddings e"
        " JOIN memories m ON m.seq = e.memory_seq JOIN conversations c ON c.id = m.conversation_id"
        " WHERE e.model = ? AND e.block_id IS NULL ORDER BY e.id", (model,),
    ).fetchall()
    return found

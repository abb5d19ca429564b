"""One copy of the vectors (#57 item 1): would blocks of rows inside SQLite load as fast as the
vector file a new process maps today? A layout the product does not use yet, measured before it
is built.

    python bench/vector_layouts.py                          # 10k memories, blocks of 1,024 rows, ~1 min
    python bench/vector_layouts.py --sizes 10000 100000 --blocks 256 1024 4096 --json out.json

Today a SQLite store keeps every vector twice: float32 rows in ``memory_embeddings`` (the truth)
and the vector file (``storage/sqlite/vector_file.py``), the cache a new process maps so that its
first search does not read every vector out of SQLite. The one-copy layout measured here keeps
the vectors in SQLite in blocks: one row per block of ``--blocks`` memories of a facet, its ids
and its vectors each one blob, at the precision search holds them (in-context float32, own
float16), and no file.

For each size both layouts are written with the same synthetic 384-d vectors for both facets
(MiniLM's shape). Then each layout is read the way a restarted server's first search needs it,
each trial in a new Python process (a restarted server has no memory to reuse), the OS cache warm,
the layouts alternated trial by trial:

- ``file``: ``vector_file.read`` as the product calls it (the header, a CRC-32 over every byte,
  the scanned facet's pages mapped in), then one product of a query with the in-context vectors;
- ``blocks into one matrix``: the in-context facet's blocks read in order (``PRAGMA
  mmap_size`` on the reading connection) and copied into one numpy matrix (numpy asks for huge
  pages for it), then the same product. No checksum: SQLite's commits make a block whole;
- ``blocks as they come``: the same blocks kept as one array each, the product taken per block.

The own (content) facet is not scanned by a search, only its candidates' rows: the script times
fetching ``--candidates`` random own vectors by incremental blob reads of their blocks, against
indexing the mapped file, in process.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from ollama_mcp.storage.sqlite import vector_file  # noqa: E402

DIM = 384
MODEL = "all-minilm"
OWN, CONTEXT = 0, 1  # facet codes, as the index numbers them: the context facet is the one scanned


def build(folder: Path, n: int, block: int) -> dict[str, int]:
    """Both layouts of ``n`` memories' vectors in ``folder``; their sizes in bytes."""
    rng = np.random.default_rng(1)
    ids = np.arange(1, n + 1, dtype=np.int64)
    convs, kinds = ids % 200, np.zeros(n, np.int8)
    facets = {
        OWN: vector_file.FacetRows(ids, ids, convs, kinds,
                                   rng.standard_normal((n, DIM), np.float32).astype(np.float16)),
        CONTEXT: vector_file.FacetRows(ids + n, ids, convs, kinds, rng.standard_normal((n, DIM), np.float32)),
    }
    vector_file.write(folder / "file", vector_file.VectorFile(MODEL, DIM, 2 * n, 0, facets, scanned=(CONTEXT,)))
    with sqlite3.connect(folder / "blocks.db") as conn:
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("CREATE TABLE vector_blocks (id INTEGER PRIMARY KEY, model TEXT NOT NULL, facet INTEGER NOT NULL,"
                     " block INTEGER NOT NULL, dtype TEXT NOT NULL, n INTEGER NOT NULL, ids BLOB NOT NULL,"
                     " seqs BLOB NOT NULL, vectors BLOB NOT NULL, UNIQUE (model, facet, block))")
        for code, rows in facets.items():
            vectors = np.asarray(rows.vectors)
            for number, first in enumerate(range(0, n, block)):
                part = slice(first, first + block)
                conn.execute("INSERT INTO vector_blocks (model, facet, block, dtype, n, ids, seqs, vectors)"
                             " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                             (MODEL, code, number, vectors.dtype.str, len(rows.ids[part]), rows.ids[part].tobytes(),
                              rows.seqs[part].tobytes(), np.ascontiguousarray(vectors[part]).tobytes()))
    with sqlite3.connect(folder / "blocks.db") as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return {"file": (folder / "file").stat().st_size, "blocks.db": (folder / "blocks.db").stat().st_size}


def read_file(folder: Path) -> float:
    snapshot = vector_file.read(folder / "file", MODEL)
    assert snapshot is not None
    return float((snapshot.facets[CONTEXT].vectors @ np.ones(DIM, np.float32)).max())


def _blocks(folder: Path) -> tuple[sqlite3.Connection, sqlite3.Cursor]:
    conn = sqlite3.connect(folder / "blocks.db")
    conn.execute("PRAGMA mmap_size = 1073741824")
    rows = conn.execute("SELECT n, ids, vectors, dtype FROM vector_blocks WHERE model = ? AND facet = ?"
                        " ORDER BY block", (MODEL, CONTEXT))
    return conn, rows


def read_blocks_into_one_matrix(folder: Path) -> float:
    conn, rows = _blocks(folder)
    total, dtype = conn.execute("SELECT sum(n), min(dtype) FROM vector_blocks WHERE model = ? AND facet = ?",
                                (MODEL, CONTEXT)).fetchone()
    matrix, ids, at = np.empty((total, DIM), dtype), np.empty(total, np.int64), 0
    for n, id_bytes, vector_bytes, _ in rows:
        matrix[at:at + n] = np.frombuffer(vector_bytes, dtype).reshape(n, DIM)
        ids[at:at + n] = np.frombuffer(id_bytes, np.int64)
        at += n
    conn.close()
    return float((matrix @ np.ones(DIM, np.float32)).max())


def read_blocks_as_they_come(folder: Path) -> float:
    conn, rows = _blocks(folder)
    parts = [(np.frombuffer(i, np.int64), np.frombuffer(v, d).reshape(n, DIM)) for n, i, v, d in rows]
    conn.close()
    return max(float((vectors @ np.ones(DIM, np.float32)).max()) for _, vectors in parts)


def read_blocks_into_one_matrix_small_pages(folder: Path) -> float:
    np._core.multiarray._set_madvise_hugepage(False)  # type: ignore[attr-defined]
    return read_blocks_into_one_matrix(folder)


LAYOUTS = {"file": read_file, "blocks into one matrix": read_blocks_into_one_matrix,
           "same, no huge pages": read_blocks_into_one_matrix_small_pages,
           "blocks as they come": read_blocks_as_they_come}


def in_new_process(folder: Path, layout: str) -> float:
    """Milliseconds ``layout`` took to read in a new interpreter (numpy imported before timing)."""
    out = subprocess.run([sys.executable, __file__, "--child", str(folder), layout],
                         capture_output=True, text=True, check=True)
    return float(out.stdout)


def candidates(folder: Path, n: int, block: int, count: int, trials: int = 200) -> dict[str, float]:
    """p50 ms to fetch ``count`` random own vectors: incremental blob reads against the mapped file."""
    rng = np.random.default_rng(3)
    conn = sqlite3.connect(folder / "blocks.db")
    conn.execute("PRAGMA mmap_size = 1073741824")
    block_rowid = dict(conn.execute("SELECT block, id FROM vector_blocks WHERE model = ? AND facet = ?", (MODEL, OWN)))
    snapshot = vector_file.read(folder / "file", MODEL)
    assert snapshot is not None
    mapped = snapshot.facets[OWN].vectors
    width = DIM * 2

    def from_blocks(rows: np.ndarray) -> np.ndarray:
        out = np.empty((len(rows), DIM), np.float16)
        for j, row in enumerate(rows):
            number, offset = divmod(int(row), block)
            with conn.blobopen("vector_blocks", "vectors", block_rowid[number], readonly=True) as blob:
                blob.seek(offset * width)
                out[j] = np.frombuffer(blob.read(width), np.float16)
        return out

    def from_file(rows: np.ndarray) -> np.ndarray:
        return np.asarray(mapped[np.sort(rows)])

    times: dict[str, list[float]] = {"blocks": [], "file": []}
    for _ in range(trials):
        rows = rng.choice(n, count, replace=False)
        for name, fetch in (("blocks", from_blocks), ("file", from_file)):
            began = time.perf_counter()
            fetch(rows)
            times[name].append((time.perf_counter() - began) * 1e3)
        assert np.array_equal(from_blocks(np.sort(rows)), from_file(rows))
    conn.close()
    return {name: round(statistics.median(values), 3) for name, values in times.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10000])
    parser.add_argument("--blocks", type=int, nargs="+", default=[1024], help="rows per block")
    parser.add_argument("--rounds", type=int, default=7, help="new processes per layout, alternated")
    parser.add_argument("--candidates", type=int, default=50)
    parser.add_argument("--json")
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        folder, layout = Path(args.child[0]), args.child[1]
        began = time.perf_counter()
        LAYOUTS[layout](folder)
        print(f"{(time.perf_counter() - began) * 1e3:.2f}")
        return
    results = []
    for n in args.sizes:
        for block in args.blocks:
            folder = Path(tempfile.mkdtemp(prefix="vector-layouts-"))
            try:
                sizes = build(folder, n, block)
                times: dict[str, list[float]] = {name: [] for name in LAYOUTS}
                for _ in range(args.rounds):
                    for name in LAYOUTS:
                        times[name].append(in_new_process(folder, name))
                fetched = candidates(folder, n, block, args.candidates)
            finally:
                shutil.rmtree(folder)
            row = {"memories": n, "block": block, "file_mb": round(sizes["file"] / 1e6, 1),
                   "blocks_db_mb": round(sizes["blocks.db"] / 1e6, 1),
                   "read_ms_p50": {name: round(statistics.median(v), 1) for name, v in times.items()},
                   "read_ms": {name: [round(x, 1) for x in v] for name, v in times.items()},
                   f"{args.candidates}_own_vectors_ms_p50": fetched}
            results.append(row)
            print(f"{n:,} memories, blocks of {block}: file {row['file_mb']} MB,"
                  f" blocks in SQLite {row['blocks_db_mb']} MB")
            for name, values in times.items():
                print(f"  {name:24s} p50 {statistics.median(values):7.1f} ms  {[round(x, 1) for x in values]}")
            print(f"  {args.candidates} own vectors, p50: blocks {fetched['blocks']} ms, file {fetched['file']} ms")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()

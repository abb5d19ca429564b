"""Where a SQLite store's bytes go, against the bytes it must keep (#57 item 1).

    python bench/disk.py                          # 10k memories in 200 conversations, about 30 s
    python bench/disk.py --sizes 10000 100000 --json out.json
    python bench/disk.py --dim 768                # nomic-embed-text's vectors instead of MiniLM's
    python bench/disk.py --settle 70              # the server left idle past its first upkeep

For each size, a store is built as ``bench/mcp_stdio.py`` builds one (Zipf words, synthetic
vectors for both facets, 384-d by default, the shape of all-MiniLM-L6-v2's), then the real server is started
on it over stdio and given ``--stores`` more memories one by one (as a client stores them), and
the files are measured while it runs (the WAL is at its largest then) and after it exits.

The bytes a store must keep: the memories' text (content, UTF-8), one copy of each vector it
ranks at the precision search holds it in (own vectors float16, in-context vectors float32: 2 and
4 bytes a number), and the keyword index's own pages (``memories_fts`` and
``memory_contexts_fts``, their data and index tables). Everything else (the ``context`` column
before schema 19, ids, hashes, metadata, B-tree indexes, the float32 vectors still in rows until
a block's worth is folded, the WAL) is reported by ``dbstat`` name, with the free pages, so the
ratio says where the rest goes.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sqlite3
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.latency import sentence  # noqa: E402
from bench.mcp_stdio import DIM, Server, build_store  # noqa: E402

MB = 1e6
KEYWORD_TABLES = ("memories_fts", "memory_contexts_fts")


def files(folder: Path) -> dict[str, int]:
    """Every file of the store (the database, its WAL and shared memory; vector files of versions
    before schema 18)."""
    return {p.name: p.stat().st_size for p in sorted(folder.iterdir()) if p.name.startswith("bench.db")}


def by_name(db: str) -> dict[str, int]:
    """Bytes of the database's pages per table or index (``dbstat``), largest first."""
    with sqlite3.connect(db) as conn:
        rows = conn.execute("SELECT name, sum(pgsize) FROM dbstat GROUP BY name ORDER BY 2 DESC").fetchall()
    return {name: int(size) for name, size in rows}


def free_and_folded(db: str) -> dict[str, int]:
    """Bytes of free pages, and vectors in rows and in blocks (how far the fold has come)."""
    with sqlite3.connect(db) as conn:
        page = conn.execute("PRAGMA page_size").fetchone()[0]
        free = conn.execute("PRAGMA freelist_count").fetchone()[0] * page
        rows = conn.execute("SELECT count(*) FROM memory_embeddings WHERE vector IS NOT NULL").fetchone()[0]
        try:
            folded = conn.execute("SELECT coalesce(sum(n - dead), 0) FROM vector_blocks").fetchone()[0]
        except sqlite3.OperationalError:  # a store before schema 18
            folded = 0
    return {"free_pages_bytes": int(free), "vectors_in_rows": int(rows), "vectors_in_blocks": int(folded)}


def must_keep(db: str, pages: dict[str, int]) -> dict[str, int]:
    with sqlite3.connect(db) as conn:
        text = conn.execute("SELECT coalesce(sum(length(CAST(content AS BLOB))), 0) FROM memories").fetchone()[0]
        numbers = dict(conn.execute("SELECT facet, coalesce(sum(dim), 0) FROM memory_embeddings GROUP BY facet"))
    keywords = sum(size for name, size in pages.items() if name.startswith(KEYWORD_TABLES))
    # As search holds them (storage/sqlite/vector_index.py, _HELD): own vectors float16, the
    # in-context ones float32 (every search multiplies them whole, with BLAS).
    vectors = 2 * numbers.get("content", 0) + 4 * numbers.get("context", 0)
    return {"text": int(text), "vectors_as_searched": int(vectors), "keyword_index": keywords}


def measure(n: int, conversations: int, stores: int, rng: random.Random, dim: int, settle: float) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        db = str(folder / "bench.db")
        build_store(db, n, rng, conversations=conversations, dim=dim)
        env = {"PATH": os.environ.get("PATH", ""), "HOME": tmp, "OLLAMA_MCP_DB": db,
               "OLLAMA_HOST": "127.0.0.1:9",  # nothing answers: stores are kept, their vectors pending
               "OLLAMA_MCP_EMBED_MODEL": "all-minilm", "OLLAMA_MCP_LOG_LEVEL": "WARNING"}
        server = Server(env)
        try:
            server.initialize()
            for _ in range(stores):
                server.call("store_memory", content=sentence(rng))
            time.sleep(1.0 + settle)
            running = files(folder)
        finally:
            server.close()
        closed = files(folder)
        pages = by_name(db)
        keep = must_keep(db, pages)
        total = sum(closed.values())
        return {
            "memories": n + stores, "conversations": conversations,
            "files_while_running_mb": {k: round(v / MB, 2) for k, v in running.items()},
            "files_after_exit_mb": {k: round(v / MB, 2) for k, v in closed.items()},
            "total_while_running_mb": round(sum(running.values()) / MB, 2),
            "total_after_exit_mb": round(total / MB, 2),
            "must_keep_mb": {k: round(v / MB, 2) for k, v in keep.items()},
            "ratio_after_exit": round(total / sum(keep.values()), 2),
            "ratio_while_running": round(sum(running.values()) / sum(keep.values()), 2),
            "pages_mb": {k: round(v / MB, 2) for k, v in pages.items() if v >= 0.01 * MB},
            **free_and_folded(db),
        }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000])
    parser.add_argument("--conversations", type=int, default=200)
    parser.add_argument("--stores", type=int, default=200, help="memories stored one by one through the server")
    parser.add_argument("--dim", type=int, default=DIM, help="384: all-minilm; 768: nomic-embed-text; 1024: mxbai")
    parser.add_argument("--settle", type=float, default=0.0,
                        help="seconds the server runs idle after the stores (70: past its first upkeep, which folds"
                             " the rows left after the whole blocks when no vector came since its start)")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    rng = random.Random(11)
    results = [measure(n, args.conversations, args.stores, rng, args.dim, args.settle) for n in args.sizes]
    for result in results:
        print(json.dumps(result, indent=1), flush=True)
    if args.json:
        args.json.write_text(json.dumps({"dim": args.dim, "sizes": results}, indent=2))


if __name__ == "__main__":
    main()

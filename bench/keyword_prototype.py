"""The measurement behind the next step for search at 100k (bench/README.md): how fast BM25 top-k
would be from in-memory postings in numpy, against the FTS5 queries the product runs now.

Not product code. It fills a database the way bench/latency.py does (bulk import of Zipf text,
no vectors needed), reads each keyword index's postings through FTS5's own ``fts5vocab`` table
(so the terms are FTS5's stemmed tokens), and for 200 five-word queries times, per index, FTS5's
``MATCH ... ORDER BY rank LIMIT 50`` against ``scores[docs] += weights`` + ``argpartition``.
It also reports how much of FTS5's top 50 the prototype's top 50 shares, and how far the
prototype's scores (FTS5's bm25() formula) are from FTS5's own for those memories. Query words
are looked up as they are, not stemmed: where FTS5 stems one ("doing" -> "do"), the prototype
misses it, which a real implementation must not.

    python bench/keyword_prototype.py --memories 100000
"""

from __future__ import annotations

import argparse
import random
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.latency import sentence, words  # noqa: E402
from ollama_mcp.search import fts_any, query_terms  # noqa: E402

INDEXES = ("memories_fts", "memory_contexts_fts")


async def fill(path: Path, n: int) -> None:
    from ollama_mcp.app import open_app  # noqa: PLC0415
    from ollama_mcp.config import Settings  # noqa: PLC0415

    rng = random.Random(7)
    env = {"OLLAMA_HOST": "127.0.0.1:9", "OLLAMA_MCP_DB": str(path), "HOME": str(path.parent),
           "OLLAMA_MCP_LOG_LEVEL": "WARNING"}
    async with open_app(Settings.from_env(env), background=False) as app:
        conv = await app.service.init_conversation("prototype")
        for start in range(0, n, 5000):
            await app.service.import_memories(conv.id, [sentence(rng) for _ in range(min(5000, n - start))])
        await app.service.merge_keyword_index()


def postings(db: sqlite3.Connection, table: str) -> tuple[dict[str, tuple[np.ndarray, np.ndarray]], int]:
    """Per term: (memory seqs, BM25 weight of the term in each), from FTS5's own index."""
    db.execute(f"CREATE VIRTUAL TABLE temp.vocab_{table} USING fts5vocab(main, '{table}', 'instance')")
    rows = db.execute(f"SELECT term, doc, count(*) FROM temp.vocab_{table} GROUP BY term, doc").fetchall()
    size = 1 + max(doc for _, doc, _ in rows)
    lengths = np.zeros(size, np.float32)
    by_term: dict[str, tuple[list[int], list[int]]] = {}
    for term, doc, tf in rows:
        docs, tfs = by_term.setdefault(term, ([], []))
        docs.append(doc)
        tfs.append(tf)
        lengths[doc] += tf
    count, average = int((lengths > 0).sum()), float(lengths[lengths > 0].mean())
    k1, b = 1.2, 0.75
    index = {}
    for term, (docs, tfs) in by_term.items():
        d, tf = np.array(docs, np.int64), np.array(tfs, np.float32)
        idf = max(np.log((count - len(d) + 0.5) / (len(d) + 0.5)), 1e-6)  # FTS5's bm25(): no +1, floored
        index[term] = (d, (idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * lengths[d] / average))).astype(np.float32))
    return index, size


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--memories", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=200)
    args = parser.parse_args()
    import anyio  # noqa: PLC0415

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "prototype.db"
        anyio.run(fill, path, args.memories)
        db = sqlite3.connect(path)
        db.execute("PRAGMA cache_size = -32768")  # as the product's connection
        started = time.perf_counter()
        indexes = {table: postings(db, table) for table in INDEXES}
        load_s = time.perf_counter() - started
        rng = random.Random(11)
        fts_ms: list[float] = []
        numpy_ms: list[float] = []
        shared: list[float] = []
        gaps: list[float] = []
        for _ in range(args.queries):
            terms = query_terms(" ".join(words(rng, 5)))
            for table in INDEXES:
                started = time.perf_counter()
                found = db.execute(
                    f"SELECT rowid, rank FROM {table} WHERE {table} MATCH ? ORDER BY rank LIMIT 50", (fts_any(terms),)
                ).fetchall()
                by_fts = [row[0] for row in found]
                fts_ms.append((time.perf_counter() - started) * 1000)
                index, size = indexes[table]
                started = time.perf_counter()
                scores = np.zeros(size, np.float32)
                for term in terms:
                    if term in index:
                        docs, weights = index[term]
                        scores[docs] += weights
                top = np.argpartition(-scores, 50)[:50]
                top = top[np.argsort(-scores[top])]
                numpy_ms.append((time.perf_counter() - started) * 1000)
                shared.append(len(set(by_fts) & set(top.tolist())) / max(1, len(by_fts)))
                # the same memories' scores by both: equal up to float32 rounding when the formula matches
                gaps.extend(abs(-rank - float(scores[doc])) / max(1e-9, -rank) for doc, rank in found)
        print(f"{args.memories} memories: postings loaded in {load_s:.1f} s (prototype, a Python loop); "
              f"per index query p50: FTS5 {statistics.median(fts_ms):.3f} ms, numpy postings "
              f"{statistics.median(numpy_ms):.3f} ms; top-50 shared with FTS5 {statistics.mean(shared):.2f}; "
              f"score of FTS5's top 50 by the prototype: relative difference p50 {statistics.median(gaps):.2e}, "
              f"max {max(gaps):.2e}")


if __name__ == "__main__":
    main()

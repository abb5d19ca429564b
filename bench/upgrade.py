"""What upgrading an existing SQLite store to this version's schema costs: the memories table is
copied into a new one for facts (sqlite/migrations/0010_facts.sql), once, at the first open after the
upgrade. Builds a store as version 9 left it with N memories (each with a content and a context
vector of 384 dimensions and a tag), then times ``Store.open`` and checks that every row, vector
and keyword entry is still there.

    .venv/bin/python bench/upgrade.py --memories 100000
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import statistics
import tempfile
import time
from pathlib import Path

import anyio
import numpy as np

from ollama_mcp.storage.sqlite import db
from ollama_mcp.storage.sqlite.store import Store

DIM = 384


def build(path: Path, memories: int, before: int) -> None:
    """A store at schema version ``before`` holding ``memories`` notes in 100-note conversations."""
    rng = np.random.default_rng(7)
    with sqlite3.connect(path, isolation_level=None) as conn:
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute(
            "CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL)"
        )
        conn.execute("BEGIN")
        for migration in [m for m in db.migrations() if m.version <= before]:
            for statement in db.split_statements(migration.sql):
                conn.execute(statement)
            conn.execute(
                "INSERT INTO schema_migrations VALUES (?, ?, '2026-01-01')", (migration.version, migration.name)
            )
        words = "alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike".split()
        for start in range(0, memories, 1000):
            rows, vectors, tags = [], [], []
            for seq in range(start + 1, min(start + 1000, memories) + 1):
                conv = f"c{(seq - 1) // 100}"
                if seq % 100 == 1 or seq == 1:
                    conn.execute(
                        "INSERT OR IGNORE INTO conversations (id, created_at) VALUES (?, '2026-01-01')", (conv,)
                    )
                text = " ".join(rng.choice(words, 40)) + f" note {seq}"
                rows.append((seq, f"m{seq}", conv, text, f"h{seq}", text + " " + text, '["t"]', "2026-01-01"))
                for facet in ("content", "context"):
                    vectors.append((seq, facet, rng.standard_normal(DIM).astype("<f4").tobytes()))
                tags.append((seq, "t"))
            conn.executemany(
                "INSERT INTO memories (seq, id, conversation_id, kind, content, content_hash, context, tags,"
                " created_at) VALUES (?, ?, ?, 'note', ?, ?, ?, ?, ?)",
                rows,
            )
            conn.executemany(
                "INSERT INTO memory_embeddings (memory_seq, model, facet, chunk_index, dim, vector, created_at)"
                f" VALUES (?, 'all-minilm', ?, 0, {DIM}, ?, '2026-01-01')",
                vectors,
            )
            conn.executemany("INSERT INTO memory_tags VALUES (?, ?)", tags)
        conn.execute("COMMIT")


def check(path: Path, memories: int) -> None:
    with sqlite3.connect(path) as conn:
        counts = conn.execute(
            "SELECT (SELECT count(*) FROM memories), (SELECT count(*) FROM memory_embeddings),"
            " (SELECT count(*) FROM memory_tags), (SELECT count(*) FROM memories_fts WHERE memories_fts MATCH"
            " 'foxtrot')"
        ).fetchone()
    assert counts[:3] == (memories, 2 * memories, memories), counts
    assert counts[3] > memories * 0.9, counts


async def upgrade(path: Path) -> float:
    started = time.perf_counter()
    store = await Store.open(path)
    elapsed = time.perf_counter() - started
    await store.aclose()
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--memories", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    before = max(m.version for m in db.migrations() if m.name != "facts" and m.version < 10)
    times, sizes = [], []
    for _ in range(args.runs):
        with tempfile.TemporaryDirectory() as folder:
            path = Path(folder) / "memory.db"
            build(path, args.memories, before)
            sizes.append(os.path.getsize(path) / 1e6)
            times.append(anyio.run(upgrade, path))
            check(path, args.memories)
            times_again = anyio.run(upgrade, path)  # nothing left to migrate: an ordinary open
    print(f"{args.memories:,} memories ({statistics.median(sizes):,.0f} MB file): upgrade from schema {before} "
          f"took {statistics.median(times):.2f} s (median of {args.runs}: "
          f"{', '.join(f'{t:.2f}' for t in times)}); an open after it {times_again * 1000:.0f} ms")


if __name__ == "__main__":
    main()

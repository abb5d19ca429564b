"""HNSW recall and scan time against pgvector's ``ef_search``, by store size: the measurements
behind ``EF_SEARCH_BY_SIZE`` in ``ollama_mcp/storage/postgres/search.py``.

    python bench/pg_ef_search.py --sizes 10000 20000 40000 100000 --ef 100 160 250

For each size, a private PostgreSQL (pgserver) gets ``bench/postgres_scale.py``'s memories
(Zipf text, clustered vectors of ``--dim`` dimensions, 384 by default). Then two query sets of
200 run against the context facet's index as a search scans it (100 neighbours: a top 10's
depth of 50, over-fetched 2x), each ``ef`` in turn, alternated over two rounds, and are checked
against an exact scan:
- near: a stored vector plus a little noise (``postgres_scale.near_stored``, an easy query);
- far: a stored vector under three times its length of noise (cosine about 0.3 to it), the
  hard case for a graph search, as a question worded unlike anything stored is.
Recall@10 is the share of the exact top 10 the index returns in its first 10; recall@50 the same
for 50 (the depth fusion reads). Scan times are p50s of the statement alone, warm.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.postgres_scale import load, near_stored  # noqa: E402
from ollama_mcp.inputs.conversations import new_conversation  # noqa: E402

NEIGHBOURS = 100
QUERIES = 200


def far_from_stored(context: Any, vectors_rng: Any, queries: int) -> list[Any]:
    """Query vectors far from every stored one: a stored vector under noise three times its length."""
    import numpy as np  # noqa: PLC0415

    picks = context[vectors_rng.integers(0, context.shape[0], queries)]
    noisy = picks + 3.0 * vectors_rng.standard_normal(picks.shape).astype(np.float32) / np.sqrt(picks.shape[1])
    return list((noisy / np.linalg.norm(noisy, axis=1, keepdims=True)).astype(np.float32))


async def nearest(conn: Any, q: Any, *, exact: bool) -> list[int]:
    dim = q.shape[0]
    distance = f"vector::vector({dim}) <=> %s"
    cursor = await conn.execute(
        f"SELECT memory_seq FROM memory_embeddings WHERE model = 'all-minilm' AND dim = {dim} AND facet = 'context'"
        f" ORDER BY {f'({distance}) + 0' if exact else distance} LIMIT {NEIGHBOURS}", (q,))
    return [int(row[0]) for row in await cursor.fetchall()]


async def measure(n: int, efs: list[int], dim: int) -> dict[str, Any]:
    import numpy as np  # noqa: PLC0415
    import pgserver  # noqa: PLC0415

    from bench.embed_server import EmbedServer, Synthetic  # noqa: PLC0415
    from ollama_mcp.app import open_app  # noqa: PLC0415
    from ollama_mcp.config import Settings  # noqa: PLC0415
    from ollama_mcp.storage.postgres.search import ef_search  # noqa: PLC0415

    server = EmbedServer(Synthetic(dim)).start()
    result: dict[str, Any] = {"memories": n, "dim": dim, "shipped_ef_search": ef_search(n, NEIGHBOURS)}
    with tempfile.TemporaryDirectory() as tmp:
        pg = pgserver.get_server(Path(tmp) / "pg", cleanup_mode="stop")
        env = {"OLLAMA_HOST": server.url, "OLLAMA_MCP_DB": pg.get_uri(), "OLLAMA_MCP_EMBED_MODEL": "all-minilm",
               "HOME": tmp, "OLLAMA_MCP_LOG_LEVEL": "WARNING"}
        try:
            async with open_app(Settings.from_env(env), background=False) as app:
                pg.psql("ALTER SYSTEM SET maintenance_work_mem = '2GB'; SELECT pg_reload_conf();")
                conv = await app.conversations.start(new_conversation("ef_search"))
                rng, vectors_rng = random.Random(7), np.random.default_rng(1)
                _, context, _ = await load(app, app.store, conv.id, n, dim, rng, vectors_rng)
                pg.psql("VACUUM ANALYZE;")
                sets = {"near": [near_stored(context, rng, vectors_rng) for _ in range(QUERIES)],
                        "far": far_from_stored(context, vectors_rng, QUERIES)}
                async with app.store.reading("bench") as conn:  # type: ignore[attr-defined]
                    exact = {name: [await nearest(conn, q, exact=True) for q in qs] for name, qs in sets.items()}
                    times: dict[tuple[str, int], list[float]] = {}
                    hits: dict[tuple[str, int], tuple[int, int]] = {}
                    for rnd in range(2):
                        for ef in efs if rnd == 0 else efs[::-1]:
                            await conn.execute(f"SET LOCAL hnsw.ef_search = {ef}")
                            for name, qs in sets.items():
                                h10 = h50 = 0
                                for q, truth in zip(qs, exact[name], strict=True):
                                    started = time.perf_counter()
                                    got = await nearest(conn, q, exact=False)
                                    times.setdefault((name, ef), []).append((time.perf_counter() - started) * 1000)
                                    h10 += len(set(got[:10]) & set(truth[:10]))
                                    h50 += len(set(got[:50]) & set(truth[:50]))
                                hits[(name, ef)] = (h10, h50)  # the same both rounds: the scan is deterministic
                for (name, ef), (h10, h50) in sorted(hits.items()):
                    result[f"{name}_ef{ef}"] = {"recall_at_10": round(h10 / (10 * QUERIES), 4),
                                                "recall_at_50": round(h50 / (50 * QUERIES), 4),
                                                "scan_ms_p50": round(statistics.median(times[(name, ef)]), 2)}
        finally:
            server.stop()
            pg.cleanup()
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description="HNSW recall and scan time against ef_search, by store size")
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 20_000, 40_000, 100_000])
    parser.add_argument("--ef", type=int, nargs="+", default=[100, 160, 250])
    parser.add_argument("--dim", type=int, default=384, help="384: all-minilm; 768: nomic-embed-text, all-mpnet")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    import anyio  # noqa: PLC0415

    results = []
    for n in args.sizes:
        results.append(anyio.run(measure, n, args.ef, args.dim))
        print(json.dumps(results[-1]), flush=True)
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()

"""The PostgreSQL backend at 1M memories, on a store built once and kept (a build takes about
35 minutes on two CPUs, too long to repeat per measurement as bench/postgres_scale.py does).

    python bench/postgres_1m.py build /var/tmp/pg1m             # load 1M memories as postgres_scale.py does
    python bench/postgres_1m.py recall /var/tmp/pg1m --ef 200,250 --queries 240 --seed 9
    python bench/postgres_1m.py latency /var/tmp/pg1m --ef 200,250 --rounds 10
    python bench/postgres_1m.py mcp /var/tmp/pg1m --queries 200

``build`` loads inside ``Storage.bulk_load()`` (the HNSW indexes built once at the end with the
shipped parameters), with ``shared_buffers`` 6 GB and ``maintenance_work_mem`` 4 GB, and keeps the
context vectors in ``DIR/context.npy`` for the queries. ``recall`` compares the context facet's
HNSW scan with an exact scan at each ``ef_search``; ``latency`` times ``PgRanker.search`` (5 Zipf
words and a vector near a stored one, no filters; the embedding call excluded) in alternated
blocks of 40 per ``ef_search`` after 100 warm-up searches; ``mcp`` runs bench/latency.py's
``through_mcp`` (the real server over stdio, a synthetic embedder) against the store.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.latency import percentile, through_mcp, words  # noqa: E402
from bench.postgres_scale import load, near_stored, nearest_context  # noqa: E402

DIM = 384
MODEL = "all-minilm"


def server(directory: Path) -> Any:
    import pgserver  # noqa: PLC0415

    return pgserver.get_server(directory / "pg", cleanup_mode=None)  # left running for the next command


def environment(directory: Path, pg: Any, host: str) -> dict[str, str]:
    return {"OLLAMA_HOST": host, "OLLAMA_MCP_DB": pg.get_uri(), "OLLAMA_MCP_EMBED_MODEL": MODEL,
            "HOME": str(directory), "OLLAMA_MCP_LOG_LEVEL": "WARNING", "PATH": "/usr/bin:/bin"}


async def build(directory: Path, n: int) -> None:
    import numpy as np  # noqa: PLC0415
    from pgserver.postgres_server import pg_ctl  # noqa: PLC0415

    from bench.embed_server import EmbedServer, Synthetic  # noqa: PLC0415
    from ollama_mcp.app import open_app  # noqa: PLC0415
    from ollama_mcp.config import Settings  # noqa: PLC0415
    from ollama_mcp.inputs.conversations import new_conversation  # noqa: PLC0415

    directory.mkdir(parents=True, exist_ok=True)
    pg = server(directory)
    pg.psql("ALTER SYSTEM SET shared_buffers = '6GB'; ALTER SYSTEM SET maintenance_work_mem = '4GB';"
            " ALTER SYSTEM SET max_parallel_maintenance_workers = 1;")
    pg_ctl(["-w", "-m", "fast", "restart"], pgdata=pg.pgdata, user=pg.system_user)  # shared_buffers needs it
    rng, vectors_rng = random.Random(7), np.random.default_rng(1)
    embedder = EmbedServer(Synthetic(DIM)).start()
    try:
        async with open_app(Settings.from_env(environment(directory, pg, embedder.url)), background=False) as app:
            svc, store = app, app.store
            conv = await svc.conversations.start(new_conversation("scale"))
            _content, context, timings = await load(svc, store, conv.id, n, DIM, rng, vectors_rng)
            np.save(directory / "context.npy", context.astype(np.float32))
    finally:
        embedder.stop()
    pg.psql("VACUUM ANALYZE;")
    print(json.dumps({"memories": n, **{step: round(s) for step, s in timings.items()},
                      "memories_per_s": round(n / timings["total_s"])}))


def queries(directory: Path, seed: int) -> Any:
    """Query vectors near stored context vectors, as bench/postgres_scale.py makes them."""
    import numpy as np  # noqa: PLC0415

    context = np.load(directory / "context.npy", mmap_mode="r")
    rng, vectors_rng = random.Random(seed), np.random.default_rng(seed)
    while True:
        yield near_stored(context, rng, vectors_rng), " ".join(words(rng, 5))


async def measure(directory: Path, args: argparse.Namespace) -> None:
    from bench.embed_server import EmbedServer, Synthetic  # noqa: PLC0415
    from ollama_mcp.app import open_app  # noqa: PLC0415
    from ollama_mcp.config import Settings  # noqa: PLC0415
    from ollama_mcp.domain import SearchFilters  # noqa: PLC0415
    from ollama_mcp.storage.postgres import search as pg_search  # noqa: PLC0415

    pg = server(directory)
    efs = [int(value) for value in args.ef.split(",")]
    asked = queries(directory, args.seed)
    embedder = EmbedServer(Synthetic(DIM)).start()
    try:
        async with open_app(Settings.from_env(environment(directory, pg, embedder.url)), background=False) as app:
            if args.command == "recall":
                found = dict.fromkeys(efs, 0)
                async with app.store.reading("bench") as conn:  # type: ignore[attr-defined]
                    for _ in range(args.queries):
                        q, _text = next(asked)
                        exact = set(await nearest_context(conn, q, exact=True))
                        for ef in efs:
                            await conn.execute(f"SET hnsw.ef_search = {ef}")
                            found[ef] += len(exact & set(await nearest_context(conn, q, exact=False)))
                print(json.dumps({"queries": args.queries, "seed": args.seed,
                                  "recall_at_10": {ef: round(found[ef] / (10 * args.queries), 3) for ef in efs}}))
                return
            for _ in range(100):  # warm-up: the index's pages into the cache
                q, text = next(asked)
                await app.ranker.search(text, q, SearchFilters(), None, 10, None)
            timings: dict[int, list[float]] = {ef: [] for ef in efs}
            for _ in range(args.rounds):
                for ef in efs:
                    pg_search.MIN_EF_SEARCH = ef
                    for _ in range(40):
                        q, text = next(asked)
                        started = time.perf_counter()
                        await app.ranker.search(text, q, SearchFilters(), None, 10, None)
                        timings[ef].append((time.perf_counter() - started) * 1000)
            print(
                json.dumps(
                    {
                        ef: {
                            "search_ms_p50": round(statistics.median(ms), 1),
                            "search_ms_p95": round(percentile(ms, 0.95), 1),
                            "searches": len(ms),
                        }
                        for ef, ms in timings.items()
                    }
                )
            )
    finally:
        embedder.stop()


async def mcp(directory: Path, count: int) -> None:
    from bench.embed_server import EmbedServer, Synthetic  # noqa: PLC0415

    pg = server(directory)
    conversation = pg.psql("SELECT id FROM conversations ORDER BY created_at LIMIT 1").split("\n")[2].strip()
    embedder = EmbedServer(Synthetic(DIM)).start()
    try:
        print(
            json.dumps(
                await through_mcp(environment(directory, pg, embedder.url), conversation, count, random.Random(3))
            )
        )
    finally:
        embedder.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("command", choices=["build", "recall", "latency", "mcp"])
    parser.add_argument("directory", type=Path)
    parser.add_argument("--memories", type=int, default=1_000_000)
    parser.add_argument("--ef", default="250", help="ef_search values, comma-separated")
    parser.add_argument("--queries", type=int, default=240)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--seed", type=int, default=9)
    args = parser.parse_args()
    if args.command == "build":
        asyncio.run(build(args.directory, args.memories))
    elif args.command == "mcp":
        asyncio.run(mcp(args.directory, args.queries))
    else:
        asyncio.run(measure(args.directory, args))


if __name__ == "__main__":
    main()

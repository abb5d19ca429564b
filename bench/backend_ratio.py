"""PostgreSQL's search against SQLite's on the same memories, the same queries, in one run (#57
item 4: PostgreSQL search p50 within 1.5x SQLite's at 10k and 100k).

    python bench/backend_ratio.py                     # 10k and 100k memories, about 12 minutes
    python bench/backend_ratio.py --sizes 10000 --queries 100 --json out.json

For each size, the same memories (Zipf text, clustered 384-d content vectors and in-context
vectors near them: ``bench/postgres_scale.py``'s ``load``, from the same seeds) go into a private
PostgreSQL (pgserver, ANALYZEd) and into a SQLite file, both opened as a server opens them
(SQLite's indexes warmed up: the vectors, and at 50k memories or more the in-memory keyword
index). Then each query (5 Zipf words and a vector near a stored memory, top 10 in the one
conversation) runs on both backends in process, the order alternating query by query, the
embedding call excluded: the medians and their ratio. Then the real ``ollama-mcp`` over stdio
on each backend in turn, PostgreSQL, SQLite, PostgreSQL, SQLite (a synthetic embedder, so the
MCP figures hold the embedding call's few hundred microseconds).

``--new-words``: before each PostgreSQL search in process, the ranker forgets the words' counts it
has cached, as a new process (a new Claude Desktop session) has none; the bench's Zipf vocabulary
is small, so without it most of a query's words were counted by an earlier query.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

# In process, as the server's entry point runs (ollama_mcp/__main__.py): OpenBLAS's threads
# sleep after a matrix product instead of spinning ~0.1 s on a core. Without it, each SQLite
# search here left a core busy for the PostgreSQL search after it (10.5 against 8.3 ms p50 at
# 10k, bench/README.md). Set before numpy is first imported.
os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "4")

from bench.latency import percentile, through_mcp, words  # noqa: E402
from bench.postgres_scale import load, near_stored  # noqa: E402
from ollama_mcp.inputs.conversations import new_conversation  # noqa: E402


async def measure(n: int, dim: int, queries: int, mcp_rounds: int, new_words: bool = False) -> dict[str, Any]:
    import numpy as np  # noqa: PLC0415
    import pgserver  # noqa: PLC0415

    from bench.embed_server import EmbedServer, Synthetic  # noqa: PLC0415
    from ollama_mcp.app import open_app  # noqa: PLC0415
    from ollama_mcp.config import Settings  # noqa: PLC0415
    from ollama_mcp.domain import SearchFilters  # noqa: PLC0415

    server = EmbedServer(Synthetic(dim)).start()
    result: dict[str, Any] = {"memories": n, "dim": dim, "queries": queries, "new_words": new_words}
    with tempfile.TemporaryDirectory() as tmp:
        pg = pgserver.get_server(Path(tmp) / "pg", cleanup_mode="stop")
        base = {"OLLAMA_HOST": server.url, "OLLAMA_MCP_EMBED_MODEL": "all-minilm", "HOME": tmp,
                "OLLAMA_MCP_LOG_LEVEL": "WARNING"}
        envs = {"postgres": {**base, "OLLAMA_MCP_DB": pg.get_uri()},
                "sqlite": {**base, "OLLAMA_MCP_DB": f"{tmp}/memory.db"}}
        try:
            pg.psql("ALTER SYSTEM SET maintenance_work_mem = '2GB'; SELECT pg_reload_conf();")
            async with (
                open_app(Settings.from_env(envs["postgres"]), background=False) as on_pg,
                open_app(Settings.from_env(envs["sqlite"]), background=False) as on_sqlite,
            ):
                apps = {"postgres": on_pg, "sqlite": on_sqlite}
                convs, contexts = {}, {}
                for name, app in apps.items():
                    conv = await app.conversations.start(new_conversation("scale"))
                    # the same seeds: the same texts and vectors in both
                    _, contexts[name], timings = await load(
                        app, app.store, conv.id, n, dim, random.Random(7), np.random.default_rng(1))
                    convs[name] = conv
                    result[f"{name}_load_s"] = round(timings["total_s"], 1)
                assert np.array_equal(contexts["postgres"], contexts["sqlite"])
                pg.psql("VACUUM ANALYZE;")
                await on_sqlite.ranker.warm_up()  # as a server's start does (vectors; keyword index at 50k+)
                result["sqlite_keyword_index_loaded"] = on_sqlite.ranker.keywords.loaded  # type: ignore[attr-defined]
                rng, vectors_rng = random.Random(3), np.random.default_rng(5)
                for name, app in apps.items():  # one untimed search each: first-use costs out of the figures
                    await app.ranker.search("warm up", near_stored(contexts[name], rng, vectors_rng),
                                            SearchFilters(), convs[name].key, 10, None)
                times: dict[str, list[float]] = {"postgres": [], "sqlite": []}
                for i in range(queries):
                    text, q = " ".join(words(rng, 5)), near_stored(contexts["sqlite"], rng, vectors_rng)
                    order = ("postgres", "sqlite") if i % 2 == 0 else ("sqlite", "postgres")
                    for name in order:
                        if new_words and name == "postgres":
                            on_pg.ranker._words.frequencies.clear()  # type: ignore[attr-defined]  # (see the docstring)
                        started = time.perf_counter()
                        found = await apps[name].ranker.search(text, q, SearchFilters(), convs[name].key, 10, None)
                        times[name].append((time.perf_counter() - started) * 1000)
                        assert len(found) == 10, (name, len(found))
            for name, ms in times.items():
                result[f"{name}_search_ms_p50"] = round(statistics.median(ms), 2)
                result[f"{name}_search_ms_p95"] = round(percentile(ms, 0.95), 2)
            result["ratio_p50"] = round(result["postgres_search_ms_p50"] / result["sqlite_search_ms_p50"], 2)
            mcp: dict[str, list[float]] = {"postgres": [], "sqlite": []}
            for _ in range(mcp_rounds):
                for name in ("postgres", "sqlite"):
                    found = await through_mcp(envs[name], convs[name].id, queries, random.Random(11))
                    mcp[name].append(found["mcp_search_ms_p50"])
            for name, p50s in mcp.items():
                result[f"{name}_mcp_search_ms_p50s"] = p50s
            if mcp_rounds:
                result["mcp_ratio_p50"] = round(
                    statistics.median(mcp["postgres"]) / statistics.median(mcp["sqlite"]), 2)
        finally:
            server.stop()
            pg.cleanup()
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description="PostgreSQL's search against SQLite's on the same memories")
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--mcp-rounds", type=int, default=2, help="MCP runs per backend, alternated (0: none)")
    parser.add_argument("--new-words", action="store_true",
                        help="PostgreSQL counts every query's words afresh, as a new process does")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    import anyio  # noqa: PLC0415

    results = []
    for n in args.sizes:
        results.append(anyio.run(measure, n, args.dim, args.queries, args.mcp_rounds, args.new_words))
        print(json.dumps(results[-1]), flush=True)
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()

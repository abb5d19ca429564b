"""The PostgreSQL backend at scale: search and store latency without the embedding call, HNSW
recall@10 against exact search, bulk import rate, and the peak RSS of a server instance, at
growing store sizes (synthetic 384-d vectors and Zipf text; bench/latency.py's generators).

    python bench/postgres_scale.py                    # 10k and 100k memories
    python bench/postgres_scale.py --sizes 10000 --json out.json

Each size gets a private PostgreSQL (pgserver). The floor for search is an exact scan of the
same vectors inside PostgreSQL, timed alternately with our searches.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.latency import percentile, sentence, through_mcp, words  # noqa: E402


def clustered(rng: Any, n: int, dim: int, clusters: int = 256) -> Any:
    """Unit vectors around ``clusters`` centres: embeddings of real text are clustered, and HNSW's
    recall on structureless Gaussian noise says little about them."""
    import numpy as np  # noqa: PLC0415

    centres = rng.standard_normal((clusters, dim)).astype(np.float32)
    out = centres[rng.integers(0, clusters, n)] + 0.6 * rng.standard_normal((n, dim)).astype(np.float32)
    return out / np.linalg.norm(out, axis=1, keepdims=True)


def near_stored(context: Any, rng: random.Random, vectors_rng: Any) -> Any:
    """A query vector near one of the stored context vectors ``context`` (a unit float32 vector)."""
    import numpy as np  # noqa: PLC0415

    q = context[rng.randrange(context.shape[0])] + 0.2 * clustered(vectors_rng, 1, context.shape[1])[0]
    return (q / np.linalg.norm(q)).astype(np.float32)


async def nearest_context(conn: Any, q: Any, *, exact: bool) -> list[int]:
    """The 10 memories whose context vectors are nearest ``q``: by the HNSW index (at the
    connection's ``hnsw.ef_search``), or by an exact scan ("+ 0" keeps the planner off the index)."""
    dim = q.shape[0]
    distance = f"vector::vector({dim}) <=> %s"
    cursor = await conn.execute(
        f"SELECT memory_seq FROM memory_embeddings WHERE model = 'all-minilm' AND dim = {dim} AND facet = 'context'"
        f" ORDER BY {f'({distance}) + 0' if exact else distance} LIMIT 10", (q,))
    return [row[0] for row in await cursor.fetchall()]


async def load(svc: Any, store: Any, conversation_id: str, n: int, dim: int, rng: random.Random,
               vectors_rng: Any, waiting: int = 0) -> tuple[Any, Any, dict[str, float]]:
    """``n`` memories of Zipf text with clustered content vectors, and their context vectors (near
    their own, as the backfill would write them), loaded as `ollama-mcp migrate` loads: inside
    ``bulk_load``, HNSW indexes built once at the end. Returns both matrices and the seconds each
    step took. ``waiting``: the newest this many get no context vector (the backfill has not
    reached them: searches rank them by stand-ins)."""
    import numpy as np  # noqa: PLC0415

    from ollama_mcp.domain import EmbeddingRow  # noqa: PLC0415
    from ollama_mcp.inputs.memories import notes_to_import  # noqa: PLC0415

    content = clustered(vectors_rng, n, dim)
    context = content + 0.3 * clustered(vectors_rng, n, dim)
    context /= np.linalg.norm(context, axis=1, keepdims=True)
    started = time.perf_counter()
    async with store.bulk_load():
        for start in range(0, n, 5000):
            count = min(5000, n - start)
            await svc.memories.import_notes(notes_to_import(
                conversation_id, [sentence(rng) for _ in range(count)], list(content[start : start + count])
            ))
        memories = time.perf_counter()
        seqs = [m.seq for m in (await store.conversation_snapshot(conversation_id))[1]][: n - waiting]
        for start in range(0, n, 5000):
            await store.insert_embeddings([
                EmbeddingRow(seq, "context", 0, "all-minilm", context[i].astype("<f4").tobytes(), dim)
                for i, seq in enumerate(seqs[start:start + 5000], start=start)
            ])
        contexts = time.perf_counter()
    indexed = time.perf_counter()
    return content, context, {"memories_s": memories - started, "context_vectors_s": contexts - memories,
                              "index_build_s": indexed - contexts, "total_s": indexed - started}


async def measure(n: int, dim: int, queries: int, waiting: int = 0) -> dict[str, Any]:
    import numpy as np  # noqa: PLC0415
    import pgserver  # noqa: PLC0415

    from bench.embed_server import EmbedServer, Synthetic  # noqa: PLC0415
    from ollama_mcp.app import open_app  # noqa: PLC0415
    from ollama_mcp.config import Settings  # noqa: PLC0415
    from ollama_mcp.domain import SearchFilters  # noqa: PLC0415
    from ollama_mcp.inputs.conversations import new_conversation  # noqa: PLC0415
    from ollama_mcp.inputs.memories import note as new_note  # noqa: PLC0415
    from ollama_mcp.storage.postgres.search import OVERFETCH, ef_search  # noqa: PLC0415
    from ollama_mcp.storage.ranking import SearchTuning, candidate_depth  # noqa: PLC0415
    from ollama_mcp.when import query_window  # noqa: PLC0415

    rng, vectors_rng = random.Random(7), np.random.default_rng(1)
    server = EmbedServer(Synthetic(dim)).start()
    result: dict[str, Any] = {"memories": n, "dim": dim, "waiting_for_context": waiting}
    with tempfile.TemporaryDirectory() as tmp:
        pg = pgserver.get_server(Path(tmp) / "pg", cleanup_mode="stop")
        env = {"OLLAMA_HOST": server.url, "OLLAMA_MCP_DB": pg.get_uri(), "OLLAMA_MCP_EMBED_MODEL": "all-minilm",
               "HOME": tmp, "OLLAMA_MCP_LOG_LEVEL": "WARNING"}
        try:
            async with open_app(Settings.from_env(env), background=False) as app:
                svc, store = app, app.store
                # HNSW builds beyond a few thousand vectors want more than the default 64 MB (a
                # server setting; the bench sets what a team would for a store this size).
                pg.psql("ALTER SYSTEM SET maintenance_work_mem = '2GB'; SELECT pg_reload_conf();")
                conv = await svc.conversations.start(new_conversation("scale"))
                content, context, timings = await load(svc, store, conv.id, n, dim, rng, vectors_rng, waiting)
                result["index_build_s"] = round(timings["index_build_s"], 1)
                result["bulk_import_per_s"] = round(n / timings["total_s"])  # both vectors, indexes built
                pg.psql("VACUUM ANALYZE;")

                store_ms = []
                for i in range(queries):
                    started = time.perf_counter()
                    await svc.memories.store(new_note(sentence(rng), conv.id, embedding=content[i]))
                    store_ms.append((time.perf_counter() - started) * 1000)

                # recall@10 of the HNSW scan against an exact scan, for queries near stored memories
                async with store.reading("bench") as conn:  # type: ignore[attr-defined]
                    hits = 0
                    exact_ms, index_ms = [], []
                    for _ in range(queries):
                        q = near_stored(context, rng, vectors_rng)
                        top_10 = ef_search(n, OVERFETCH * candidate_depth(SearchTuning(), 10, None))
                        await conn.execute(f"SET LOCAL hnsw.ef_search = {top_10}")  # what a top 10 uses
                        started = time.perf_counter()
                        approx = await nearest_context(conn, q, exact=False)
                        index_ms.append((time.perf_counter() - started) * 1000)
                        started = time.perf_counter()
                        exact = await nearest_context(conn, q, exact=True)
                        exact_ms.append((time.perf_counter() - started) * 1000)
                        hits += len(set(approx) & set(exact))
                result["hnsw_recall_at_10"] = round(hits / (10 * queries), 3)
                result["hnsw_scan_ms_p50"] = round(statistics.median(index_ms), 2)
                result["exact_scan_ms_p50"] = round(statistics.median(exact_ms), 2)

                search_ms = []
                for _ in range(queries):
                    q = near_stored(context, rng, vectors_rng)
                    started = time.perf_counter()
                    found = await app.ranker.search(" ".join(words(rng, 5)), q, SearchFilters(), conv.key, 10, None)
                    search_ms.append((time.perf_counter() - started) * 1000)
                    assert len(found) == 10
                # a query naming a time (its lists run deeper: SearchTuning.window_depth), in the
                # month every memory here happened in
                dated_ms = []
                for _ in range(queries):
                    q = near_stored(context, rng, vectors_rng)
                    window = query_window(
                        " ".join(words(rng, 5)) + datetime.now(UTC).strftime(" in %B %Y"), datetime.now(UTC)
                    )
                    assert window is not None
                    started = time.perf_counter()
                    found = await app.ranker.search(window.keyword_text, q, SearchFilters(), conv.key, 10, None, window)
                    dated_ms.append((time.perf_counter() - started) * 1000)
                    assert len(found) == 10
            result.update(await through_mcp(env, conv.id, queries, rng))
        finally:
            server.stop()
            pg.cleanup()
    result.update({
        "store_ms_p50": round(statistics.median(store_ms), 2),
        "search_ms_p50": round(statistics.median(search_ms), 2),
        "search_ms_p95": round(percentile(search_ms, 0.95), 2),
        "dated_search_ms_p50": round(statistics.median(dated_ms), 2),
        "search_to_exact_scan": round(statistics.median(search_ms) / result["exact_scan_ms_p50"], 2),
    })
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description="ollama-mcp on PostgreSQL at scale")
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--waiting", type=int, default=0,
                        help="the newest this many memories have no context vector yet (ranked by stand-ins)")
    args = parser.parse_args()
    import anyio  # noqa: PLC0415

    results = []
    for n in args.sizes:
        results.append(anyio.run(measure, n, args.dim, args.queries, args.waiting))
        print(json.dumps(results[-1]), flush=True)
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()

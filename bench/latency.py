"""Speed and memory: search and store latency without the embedding call, bulk insert rate, peak RSS,
and spawn-to-initialize time, each beside a floor measured in the same run.

Floors: a bare numpy ``matrix @ query`` + ``argpartition`` over a matrix of the shape a search
multiplies (one context vector per memory; own vectors are only looked up for candidates),
timed alternately with our searches, and a minimal ``MCPServer`` with one tool for start-up.
Vectors are synthetic (768 dimensions by default) from an Ollama-compatible server in this
process (bench/embed_server.py ``Synthetic``), so no model is needed.

    python bench/latency.py                      # 1k, 10k and 100k memories
    python bench/latency.py --sizes 1000 10000 --json out.json

Each size runs in its own process; peak RSS is that of the real ``ollama-mcp`` server process
serving searches and stores over stdio on the populated database.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
# In process, as the server's entry point runs (ollama_mcp/__main__.py): OpenBLAS's threads
# sleep after a matrix product instead of spinning ~0.1 s on a core, which an in-process search
# here would otherwise leave busy (bench/README.md). Set before numpy is first imported.
os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "4")

# A Zipf-distributed vocabulary, like English text: a few words are everywhere, most are rare,
# and the most frequent ones are function words (the search leaves those out of keyword queries,
# as it would for real text).
from ollama_mcp.inputs.conversations import new_conversation  # noqa: E402
from ollama_mcp.inputs.memories import note as new_note  # noqa: E402
from ollama_mcp.inputs.memories import notes_to_import  # noqa: E402
from ollama_mcp.storage.ranking import STOP_WORDS  # noqa: E402

VOCABULARY = sorted(STOP_WORDS) + [f"w{i}" for i in range(5000)]
_ZIPF = [1 / (rank + 1) ** 1.07 for rank in range(len(VOCABULARY))]


def words(rng: random.Random, count: int) -> list[str]:
    return rng.choices(VOCABULARY, weights=_ZIPF, k=count)


def sentence(rng: random.Random) -> str:
    return " ".join(words(rng, rng.randint(8, 24)))


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


# -- one size, in its own process -----------------------------------------------------------------


async def measure_size(n: int, dim: int, queries: int) -> dict[str, Any]:
    import numpy as np  # noqa: PLC0415

    from bench.embed_server import EmbedServer, Synthetic  # noqa: PLC0415
    from ollama_mcp.app import open_app  # noqa: PLC0415
    from ollama_mcp.config import Settings  # noqa: PLC0415
    from ollama_mcp.domain import SearchFilters  # noqa: PLC0415

    rng = random.Random(7)
    server = EmbedServer(Synthetic(dim)).start()
    result: dict[str, Any] = {"memories": n, "dim": dim}
    try:
        with tempfile.TemporaryDirectory() as tmp:
            env = {
                "OLLAMA_HOST": server.url,
                "OLLAMA_MCP_DB": f"{tmp}/latency.db",
                "OLLAMA_MCP_EMBED_MODEL": "all-minilm",
                "HOME": tmp,
                "OLLAMA_MCP_LOG_LEVEL": "WARNING",
            }
            async with open_app(Settings.from_env(env), background=False) as app:
                conv = await app.conversations.start(new_conversation("latency"))
                vectors = np.random.default_rng(1).standard_normal((min(n, 5000), dim)).astype(np.float32)

                # bulk insert (the import path), content vectors given: no embedding call
                texts = [sentence(rng) for _ in range(n)]
                started = time.perf_counter()
                for start in range(0, n, 5000):
                    count = min(5000, n - start)
                    await app.memories.import_notes(
                        notes_to_import(conv.id, texts[start : start + count], list(vectors[:count]))
                    )
                result["bulk_insert_per_s"] = round(n / (time.perf_counter() - started))
                del texts

                # context vectors through the (synthetic, instant) Ollama-compatible server
                started = time.perf_counter()
                while await app.indexer.backfill_once():
                    pass
                result["backfill_per_s"] = round(n / (time.perf_counter() - started))

                # store, excluding the embedding call (the caller passes the vector)
                store_ms = []
                for i in range(queries):
                    started = time.perf_counter()
                    await app.memories.store(new_note(sentence(rng), conv.id, embedding=vectors[i % len(vectors)]))
                    store_ms.append((time.perf_counter() - started) * 1000)
                while await app.indexer.backfill_once():
                    pass

                # search, excluding the embedding call: the search component given a query vector,
                # in blocks alternating with the floor (numpy over a random matrix of the shape a
                # search multiplies: one context vector per memory) so machine noise hits both alike.
                # First right after the 200 single stores, then after the keyword index upkeep
                # the server runs in the background (the keyword upkeep), which is its usual state.
                search = app.ranker  # the server's own ranker
                await app.ranker.vectors.refresh()
                started = time.perf_counter()
                await search.warm_up()  # as a server starts: in a large store, the in-memory keyword index
                result["keyword_index_held"] = search.keywords.loaded
                result["keyword_index_load_s"] = round(time.perf_counter() - started, 2)
                rows, ranked_rows = app.ranker.vectors.size, app.ranker.vectors.ranked_rows
                matrix = np.random.default_rng(2).standard_normal((ranked_rows, dim)).astype(np.float32)

                async def measure_search(matrix: np.ndarray) -> tuple[list[float], list[float]]:
                    search_ms, floor_ms = [], []
                    for block in range(0, queries, 20):  # alternate blocks, not single queries: the
                        # floor streams its whole matrix through the caches, which would leave every
                        # search that follows it cold
                        batch = []
                        for _ in range(min(20, queries - block)):
                            qv = np.random.default_rng(rng.randrange(10**9)).standard_normal(dim).astype(np.float32)
                            batch.append((" ".join(words(rng, 5)), qv / np.linalg.norm(qv)))
                        for _, qv in batch:
                            started = time.perf_counter()
                            scores = matrix @ qv
                            top = np.argpartition(-scores, 40)[:40]
                            top[np.argsort(-scores[top])]
                            floor_ms.append((time.perf_counter() - started) * 1000)
                        for query, qv in batch:
                            started = time.perf_counter()
                            hits = await search.search(query, qv, SearchFilters(), conv.key, 10, None)
                            search_ms.append((time.perf_counter() - started) * 1000)
                            assert hits  # (fewer than 10: random query vectors are no closer than min_similarity)
                    return search_ms, floor_ms

                unmerged_ms, _ = await measure_search(matrix)
                assert await app.ranker.upkeep()
                search_ms, floor_ms = await measure_search(matrix)
                del matrix

            # the real server over stdio on this database: latency with the (synthetic) embedding
            # call included, and the server process's own peak RSS
            result.update(await through_mcp(env, conv.id, queries, rng))

    finally:
        server.stop()
    result.update({
        "index_rows": rows,
        "ranked_rows": ranked_rows,
        "vector_mb": round(rows * dim * 4 / 2**20),
        "store_ms_p50": round(statistics.median(store_ms), 2), "store_ms_p95": round(percentile(store_ms, 0.95), 2),
        "search_ms_p50": round(statistics.median(search_ms), 2), "search_ms_p95": round(percentile(search_ms, 0.95), 2),
        "search_before_upkeep_ms_p50": round(statistics.median(unmerged_ms), 2),
        "floor_ms_p50": round(statistics.median(floor_ms), 2),
        "search_to_floor": round(statistics.median(search_ms) / statistics.median(floor_ms), 2),
    })
    result["rss_budget_mb"] = round(result["vector_mb"] * 1.5 + 150)
    return result


async def through_mcp(env: dict[str, str], conversation_id: str, queries: int, rng: random.Random) -> dict[str, Any]:
    """Search and store latency of the real server over stdio, with raw JSON-RPC as the peers in
    shared/notes/users.md were measured (a client library's own parsing is not counted)."""
    proc = subprocess.Popen([str(Path(sys.executable).parent / "ollama-mcp")], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env, cwd="/")
    assert proc.stdin and proc.stdout
    ids = iter(range(1, 10**9))

    def rpc(method: str, params: dict[str, Any]) -> dict[str, Any]:
        message = {"jsonrpc": "2.0", "id": next(ids), "method": method, "params": params}
        proc.stdin.write((json.dumps(message) + "\n").encode())  # type: ignore[union-attr]
        proc.stdin.flush()  # type: ignore[union-attr]
        return json.loads(proc.stdout.readline())  # type: ignore[union-attr]

    def call(tool: str, **arguments: Any) -> dict[str, Any]:
        reply = rpc("tools/call", {"name": tool, "arguments": arguments})["result"]
        assert not reply["isError"], reply
        return reply["structuredContent"]

    search_ms, store_ms = [], []
    try:
        rpc(
            "initialize",
            {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "b", "version": "0"}},
        )
        proc.stdin.write(b'{"jsonrpc": "2.0", "method": "notifications/initialized"}\n')
        call("search_memories", query="warm up", conversation_id=conversation_id)
        for _ in range(queries):
            started = time.perf_counter()
            found = call("search_memories", query=" ".join(words(rng, 5)), conversation_id=conversation_id, top_k=10)
            search_ms.append((time.perf_counter() - started) * 1000)
            assert found["mode"] == "hybrid"
            started = time.perf_counter()
            stored = call("store_memory", content=sentence(rng), conversation_id=conversation_id)
            store_ms.append((time.perf_counter() - started) * 1000)
            assert stored["embedding_status"] == "embedded"
        peak = _peak_rss_mb(proc.pid)
    finally:
        proc.stdin.close()
        proc.wait(timeout=30)
    return {"mcp_search_ms_p50": round(statistics.median(search_ms), 2),
            "mcp_store_ms_p50": round(statistics.median(store_ms), 2), "server_peak_rss_mb": peak}


def _peak_rss_mb(pid: int) -> int | None:
    """VmHWM (peak resident set) of a running process, on Linux."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return round(int(line.split()[1]) / 1024)
    except OSError:
        pass
    return None


# -- start-up --------------------------------------------------------------------------------------

BARE = """from mcp.server import MCPServer
mcp = MCPServer("bare")
@mcp.tool()
async def ping() -> str:
    "ping"
    return "pong"
mcp.run("stdio")
"""


def spawn_to_initialize(command: list[str], env: dict[str, str]) -> float:
    hello = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "bench", "version": "0"}}}
    started = time.perf_counter()
    proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            env=env, cwd="/")
    assert proc.stdin and proc.stdout
    proc.stdin.write((json.dumps(hello) + "\n").encode())
    proc.stdin.flush()
    line = proc.stdout.readline()
    elapsed = time.perf_counter() - started
    proc.stdin.close()
    proc.wait(timeout=30)
    if b'"result"' not in line:
        raise SystemExit(f"no initialize result from {command}: {line[:200]!r}")
    return elapsed


def startup(runs: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        bare = Path(tmp) / "bare.py"
        bare.write_text(BARE)
        env = {"PATH": os.environ.get("PATH", ""), "HOME": tmp, "OLLAMA_MCP_DB": f"{tmp}/m.db",
               "OLLAMA_HOST": "127.0.0.1:9"}
        ours_cmd = [str(Path(sys.executable).parent / "ollama-mcp")]
        ours, floor = [], []
        for _ in range(runs):  # interleaved, so machine noise hits both alike
            floor.append(spawn_to_initialize([sys.executable, str(bare)], env))
            ours.append(spawn_to_initialize(ours_cmd, env))
    return {"ours_s_p50": round(statistics.median(ours), 3), "floor_s_p50": round(statistics.median(floor), 3),
            "ratio": round(statistics.median(ours) / statistics.median(floor), 2), "runs": runs}


def main() -> None:
    parser = argparse.ArgumentParser(description="ollama-mcp speed and memory benchmark")
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 10_000, 100_000])
    parser.add_argument("--dim", type=int, default=768)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--startup-runs", type=int, default=9)
    parser.add_argument("--one", type=int, help=argparse.SUPPRESS)  # internal: one size, print JSON
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    if args.one:
        import anyio  # noqa: PLC0415

        print(json.dumps(anyio.run(measure_size, args.one, args.dim, args.queries)))
        return
    results: dict[str, Any] = {"startup": startup(args.startup_runs), "sizes": []}
    print(f"start-up: ours {results['startup']['ours_s_p50']} s, bare MCPServer {results['startup']['floor_s_p50']} s, "
          f"ratio {results['startup']['ratio']}", flush=True)
    for n in args.sizes:
        out = subprocess.run([sys.executable, __file__, "--one", str(n), "--dim", str(args.dim),
                              "--queries", str(args.queries)], capture_output=True, text=True, check=True, cwd=ROOT)
        size = json.loads(out.stdout.strip().splitlines()[-1])
        results["sizes"].append(size)
        print(json.dumps(size), flush=True)
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    main()

"""A new server process, this tree's code against another's, alternated A B A B over MCP (#57).

    python bench/restart_ab.py --a-tree /tmp/wt-main --a-store a/bench.db --b-store b/bench.db
    python bench/restart_ab.py ... --startup --rounds 16     # spawn -> initialize only
    python bench/restart_ab.py ... --memory --rounds 4       # resident memory, and its peak

A change to what a new process reads on the way to its first search (a store format, the head
start) can only be judged against the code before it, on the store that code wrote. Side A runs
the server of another checkout (``--a-tree``, e.g. ``git worktree add /tmp/wt-main main``: the
installed ``ollama-mcp`` with ``PYTHONPATH`` pointing there), side B this tree's, each on its own
store (built by its own code: ``bench/mcp_stdio.build_store`` run under each tree). MiniLM behind
Ollama's API (``bench/embed_server.py``, one thread) answers both.

Per round and side: one spawn, ``initialize``, a search at once (from the ``initialize`` answer to
the result); a second spawn, ``initialize``, a search 1 s later; each followed by one raw embedding
call, the floor. Each side first starts once and idles 20 s, so that what a first start leaves
(a vector file, folded blocks) is there for every timed start. ``--startup``: spawn ->
``initialize`` answered only, Ollama unreachable. ``--memory``: per spawn, the server's resident
memory (``VmRSS``) and its peak (``VmHWM``) right after a first search sent at once, and again
after a second search 12 s later, once the warm-up is done.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import random
import sqlite3
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.latency import sentence  # noqa: E402
from bench.mcp_stdio import Server, query, start_minilm  # noqa: E402


def env(store: str, tree: str, host: str) -> dict[str, str]:
    return {"PATH": os.environ.get("PATH", ""), "HOME": str(Path(store).parent), "OLLAMA_MCP_DB": store,
            "OLLAMA_HOST": host, "OLLAMA_MCP_EMBED_MODEL": "all-minilm", "PYTHONPATH": tree,
            "OLLAMA_MCP_LOG_LEVEL": "WARNING"}


def startup(sides: dict[str, dict[str, str]], rounds: int) -> dict[str, list[float]]:
    times: dict[str, list[float]] = {side: [] for side in sides}
    for r in range(rounds):
        for side in (sorted(sides) if r % 2 == 0 else sorted(sides, reverse=True)):
            started = time.perf_counter()
            server = Server(sides[side])
            server.initialize()
            times[side].append((time.perf_counter() - started) * 1000)
            server.close()
    return times


def first_searches(sides: dict[str, dict[str, str]], rounds: int, host: str) -> dict[str, list[tuple[float, ...]]]:
    address, port = host.split(":")
    floor_conn = http.client.HTTPConnection(address, int(port))
    rng = random.Random(11)

    def floor() -> float:
        body = json.dumps({"model": "all-minilm", "input": [sentence(rng)], "truncate": True})
        started = time.perf_counter()
        floor_conn.request("POST", "/api/embed", body, {"Content-Type": "application/json"})
        floor_conn.getresponse().read()
        return (time.perf_counter() - started) * 1000

    conversations = {
        side: sqlite3.connect(e["OLLAMA_MCP_DB"]).execute(
            "SELECT id FROM conversations ORDER BY rowid DESC LIMIT 1").fetchone()[0]
        for side, e in sides.items()
    }
    for _ in range(5):
        floor()
    for side, e in sides.items():  # what a first start leaves, there for every timed one
        server = Server(e)
        server.initialize()
        server.timed("search_memories", query=query(rng), conversation_id=conversations[side], top_k=10)
        time.sleep(20)
        server.close()
    results: dict[str, list[tuple[float, ...]]] = {side: [] for side in sides}
    for r in range(rounds):
        for side in (sorted(sides) if r % 2 == 0 else sorted(sides, reverse=True)):
            server = Server(sides[side])
            server.initialize()
            at_once, found = server.timed("search_memories", query=query(rng), conversation_id=conversations[side],
                                          top_k=10)
            assert found["mode"] == "hybrid", found
            floor_at_once = floor()
            server.close()
            server = Server(sides[side])
            server.initialize()
            time.sleep(1.0)
            later, _ = server.timed("search_memories", query=query(rng), conversation_id=conversations[side], top_k=10)
            floor_later = floor()
            server.close()
            results[side].append((at_once, at_once - floor_at_once, later - floor_later, floor_at_once))
            print(side, *(round(x, 1) for x in results[side][-1]), flush=True)
    return results


def memory(sides: dict[str, dict[str, str]], rounds: int) -> dict[str, list[tuple[float, ...]]]:
    rng = random.Random(13)

    def status(pid: int) -> tuple[float, float]:
        fields = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines())
        return float(fields["VmRSS"].split()[0]) / 1024, float(fields["VmHWM"].split()[0]) / 1024

    results: dict[str, list[tuple[float, ...]]] = {side: [] for side in sides}
    for r in range(rounds):
        for side in (sorted(sides) if r % 2 == 0 else sorted(sides, reverse=True)):
            server = Server(sides[side])
            server.initialize()
            server.call("search_memories", query=query(rng), top_k=10)
            first = status(server.proc.pid)
            time.sleep(12)
            server.call("search_memories", query=query(rng), top_k=10)
            later = status(server.proc.pid)
            server.close()
            results[side].append((*first, *later))
            print(side, *(round(x, 1) for x in results[side][-1]), flush=True)
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--a-tree", required=True, help="the other checkout, side A (PYTHONPATH)")
    parser.add_argument("--a-store", required=True)
    parser.add_argument("--b-store", required=True, help="side B runs this tree")
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--startup", action="store_true", help="spawn -> initialize only")
    parser.add_argument("--memory", action="store_true", help="resident memory after a first search, and 12 s on")
    args = parser.parse_args()
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    if args.startup:
        sides = {"A": env(args.a_store, args.a_tree, "127.0.0.1:9"), "B": env(args.b_store, str(ROOT), "127.0.0.1:9")}
        times = startup(sides, args.rounds)
        for side, values in times.items():
            print(f"{side}: spawn -> initialize p50 {statistics.median(values):.1f} ms (n={len(values)})")
        print(f"B/A {statistics.median(times['B']) / statistics.median(times['A']):.3f}")
        return
    proc, host = start_minilm()
    try:
        sides = {"A": env(args.a_store, args.a_tree, host), "B": env(args.b_store, str(ROOT), host)}
        if args.memory:
            held = memory(sides, args.rounds)
        else:
            results = first_searches(sides, args.rounds, host)
    finally:
        proc.terminate()
    if args.memory:
        for side, rows in held.items():
            first_rss, first_peak, later_rss, later_peak = (statistics.median(r[i] for r in rows) for i in range(4))
            print(f"{side}: after a first search at once RSS {first_rss:.1f} MB, peak {first_peak:.1f};"
                  f" 12 s on RSS {later_rss:.1f} MB, peak {later_peak:.1f} (n={len(rows)})")
        return
    for side, rows in results.items():
        print(f"{side}: first search at once p50 {statistics.median(r[0] for r in rows):.1f} ms"
              f" (max {max(r[0] for r in rows):.1f}), over the floor {statistics.median(r[1] for r in rows):.1f};"
              f" 1 s after initialize, over the floor {statistics.median(r[2] for r in rows):.1f};"
              f" floor {statistics.median(r[3] for r in rows):.1f} (n={len(rows)})")


if __name__ == "__main__":
    main()

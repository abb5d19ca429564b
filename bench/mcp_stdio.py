"""What a user waits for: the real ``ollama-mcp`` over stdio with all-MiniLM-L6-v2 behind Ollama's
API (``bench/embed_server.py``, uncached, in its own process), beside floors measured in the same run.

    python bench/mcp_stdio.py                          # 1k and 10k memories, about 5 minutes
    python bench/mcp_stdio.py --sizes 1000 10000 100000 --json out.json

Floors: one ``/api/embed`` call of one memory-sized text to the same embedding server (what a
store or a search cannot avoid), and spawn-to-``initialize`` of a bare one-tool ``MCPServer``.
For each size, a store is built with synthetic 384-d vectors for both facets (the shape of
MiniLM's; latency depends on the shape, not the values), then:

- restart: once on the store as built (timed apart), then ``--restarts``
  times, spawn the server on it, ``initialize``, and one search at once: the time from the
  ``initialize`` answer to the search result (median);
- steady: ``--searches`` searches, each followed by a store of a new text (raw JSON-RPC, as the
  peers in shared/notes/users.md were measured) and by one raw embedding call, the floor under
  the same load: p50/p95/max of each, their distance to that floor, and the server's peak RSS;
  with ``--search-all``, every other search is ``search_all_conversations`` (top_k 10);
- hung Ollama (once, smallest size): a search while the embedding server accepts and never answers.

``--pause`` waits between the steady loop's rounds, as a user's calls come (the server's background
work then runs between them, not only when it cannot wait any longer); ``--backlog N`` leaves the
last N memories of the built store without their in-context vectors, as Ollama being down for a
while, or an import, leaves them: the server's backfill catches up while the loop runs.

Texts are Zipf-distributed words (bench/latency.py), 8-24 words a memory, 6 words a query.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import random
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.latency import _peak_rss_mb, percentile, sentence, startup, words  # noqa: E402
from ollama_mcp.inputs.conversations import new_conversation  # noqa: E402
from ollama_mcp.inputs.memories import notes_to_import  # noqa: E402
from ollama_mcp.inputs.turns import parse_turns  # noqa: E402

DIM = 384
SERVER = str(Path(sys.executable).parent / "ollama-mcp")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_minilm() -> tuple[subprocess.Popen[bytes], str]:
    """bench/embed_server.py in its own process (as Ollama is), with no vector cache."""
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, str(ROOT / "bench" / "embed_server.py"), "--port", str(port), "--cache", ""],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        cwd=ROOT,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if b"serving" not in line:
        proc.kill()
        raise SystemExit(f"embed_server did not start: {line!r}")
    return proc, f"127.0.0.1:{port}"


def embed_floor(host: str, rng: random.Random, calls: int) -> float:
    """Median ms of one /api/embed call for one new memory-sized text, over a kept-alive connection."""
    address, port = host.split(":")
    conn = http.client.HTTPConnection(address, int(port))
    times = []
    for _ in range(calls):
        body = json.dumps({"model": "all-minilm", "input": [sentence(rng)], "truncate": True})
        started = time.perf_counter()
        conn.request("POST", "/api/embed", body, {"Content-Type": "application/json"})
        reply = conn.getresponse()
        reply.read()
        times.append((time.perf_counter() - started) * 1000)
        assert reply.status == 200
    conn.close()
    return statistics.median(times)


TURNS_A_CONVERSATION = 1_000  # --turns: recorded chats of this many turns each (ended but the last)
LONG_TURN_CHARS = 100_000  # --long-turns: turns this long


def build_store(
    path: str, n: int, rng: random.Random, text: Callable[[random.Random], str] = sentence, conversations: int = 1,
    dim: int = DIM, turns: int = 0, chat_size: int = TURNS_A_CONVERSATION, long_turns: int = 0,
) -> str:
    """A store of ``n`` memories (``text``: each one's, Zipf words by default) in ``conversations``
    conversations of equal size, with synthetic vectors for both facets, and ``turns`` recorded
    turns (``add_messages``, as a chat app or the hooks record them) in chats of ``chat_size``,
    the last of which also holds ``long_turns`` turns of ``LONG_TURN_CHARS`` characters; returns
    the id of the last conversation of memories (the one the searches of one conversation ask)."""
    import anyio  # noqa: PLC0415
    import numpy as np  # noqa: PLC0415

    from bench.embed_server import EmbedServer, Synthetic  # noqa: PLC0415
    from ollama_mcp.app import open_app  # noqa: PLC0415
    from ollama_mcp.config import Settings  # noqa: PLC0415

    synthetic = EmbedServer(Synthetic(dim)).start()

    async def build() -> str:
        env = {"OLLAMA_HOST": synthetic.url, "OLLAMA_MCP_DB": path, "OLLAMA_MCP_EMBED_MODEL": "all-minilm",
               "HOME": str(Path(path).parent), "OLLAMA_MCP_LOG_LEVEL": "WARNING"}
        async with open_app(Settings.from_env(env), background=False) as app:
            vectors = np.random.default_rng(1).standard_normal((5000, dim)).astype(np.float32)
            each = -(-n // conversations)
            for index in range(conversations):
                conv = await app.conversations.start(new_conversation(f"bench {index}"))
                size = min(each, n - index * each)
                for start in range(0, size, 5000):
                    count = min(5000, size - start)
                    await app.memories.import_notes(
                        notes_to_import(conv.id, [text(rng) for _ in range(count)], list(vectors[:count]))
                    )
            last = conv.id
            for chat in range(0, turns, chat_size):
                recorded = await app.conversations.start(new_conversation(f"chat {chat // chat_size}"))
                size = min(chat_size, turns - chat)
                for start in range(0, size, 100):
                    said = [{"role": ("user", "assistant")[i % 2], "content": text(rng)}
                            for i in range(min(100, size - start))]
                    await app.transcript.add_messages(recorded.id, parse_turns("messages", said), embed=False)
                if chat + chat_size < turns:
                    await app.conversations.end(recorded.id)
            for _ in range(long_turns):  # in the last chat (or one of their own)
                if not turns:
                    recorded = await app.conversations.start(new_conversation("long turns"))
                long = " ".join(text(rng) for _ in range(LONG_TURN_CHARS // 20))[:LONG_TURN_CHARS]
                await app.transcript.add_messages(
                    recorded.id, parse_turns("messages", [{"role": "user", "content": long}]), embed=False
                )
            while await app.indexer.backfill_once():  # own and context vectors (synthetic, instant)
                pass
            await app.ranker.upkeep()
            return last

    try:
        return anyio.run(build)
    finally:
        synthetic.stop()


class Server:
    """The real server over stdio, spoken to with raw JSON-RPC."""

    def __init__(self, env: dict[str, str]) -> None:
        command = [SERVER]
        if os.environ.get("PYTHONPATH"):  # another tree's server (to alternate with today's code)
            command, env = [sys.executable, "-m", "ollama_mcp"], {**env, "PYTHONPATH": os.environ["PYTHONPATH"]}
        self.proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, env=env, cwd="/")
        self._ids = iter(range(1, 10**9))

    def rpc(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        assert self.proc.stdin and self.proc.stdout
        message = {"jsonrpc": "2.0", "id": next(self._ids), "method": method, "params": params}
        self.proc.stdin.write((json.dumps(message) + "\n").encode())
        self.proc.stdin.flush()
        return json.loads(self.proc.stdout.readline())

    def initialize(self) -> None:
        assert self.proc.stdin
        self.rpc("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                "clientInfo": {"name": "bench", "version": "0"}})
        self.proc.stdin.write(b'{"jsonrpc": "2.0", "method": "notifications/initialized"}\n')

    def call(self, tool: str, **arguments: Any) -> dict[str, Any]:
        reply = self.rpc("tools/call", {"name": tool, "arguments": arguments})["result"]
        assert not reply["isError"], reply
        return reply["structuredContent"]

    def timed(self, tool: str, **arguments: Any) -> tuple[float, dict[str, Any]]:
        started = time.perf_counter()
        result = self.call(tool, **arguments)
        return (time.perf_counter() - started) * 1000, result

    def close(self) -> None:
        assert self.proc.stdin
        self.proc.stdin.close()
        self.proc.wait(timeout=60)


def query(rng: random.Random) -> str:
    return " ".join(words(rng, 6))


def measure_size(n: int, host: str, args: argparse.Namespace, rng: random.Random) -> dict[str, Any]:
    address, port = host.split(":")
    floor_conn = http.client.HTTPConnection(address, int(port))

    def floor_call() -> float:
        """One raw /api/embed call of a new memory-sized text, between the server's calls: the
        floor under the same load (the server's background work included)."""
        body = json.dumps({"model": "all-minilm", "input": [sentence(rng)], "truncate": True})
        started = time.perf_counter()
        floor_conn.request("POST", "/api/embed", body, {"Content-Type": "application/json"})
        floor_conn.getresponse().read()
        return (time.perf_counter() - started) * 1000

    with tempfile.TemporaryDirectory() as tmp:
        db = f"{tmp}/bench.db"
        started = time.perf_counter()
        conv = build_store(db, n, rng, conversations=args.conversations, turns=args.turns, chat_size=args.chat_size,
                           long_turns=args.long_turns)
        if args.backlog:
            with sqlite3.connect(db) as conn:  # as if Ollama had been down for their contexts
                conn.execute("DELETE FROM memory_embeddings WHERE facet = 'context' AND memory_seq >"
                             " (SELECT max(seq) FROM memories) - ?", (args.backlog,))
        result: dict[str, Any] = {"memories": n, "build_s": round(time.perf_counter() - started, 1)}
        env = {"PATH": os.environ.get("PATH", ""), "HOME": tmp, "OLLAMA_MCP_DB": db, "OLLAMA_HOST": host,
               "OLLAMA_MCP_EMBED_MODEL": "all-minilm", "OLLAMA_MCP_LOG_LEVEL": "WARNING"}

        # The first start on a store no server has opened yet (built here in process, as an
        # import in a library would leave it; the build's upkeep folded its vectors into blocks).
        # Timed apart from the restarts, which start from what this start leaves.
        server = Server(env)
        try:
            server.initialize()
            ms, found = server.timed("search_memories", query=query(rng), conversation_id=conv, top_k=10)
            assert found["mode"] == "hybrid", found
            result["first_search_first_start_ms"] = round(ms, 1)
        finally:
            server.close()
        with sqlite3.connect(db) as conn:  # vectors a restart reads row by row rather than from blocks
            result["vectors_in_rows"] = conn.execute(
                "SELECT count(*) FROM memory_embeddings WHERE vector IS NOT NULL").fetchone()[0]

        first = []
        for _ in range(args.restarts):
            server = Server(env)
            try:
                server.initialize()
                ms, found = server.timed("search_memories", query=query(rng), conversation_id=conv, top_k=10)
                assert found["mode"] == "hybrid", found
                first.append(ms)
            finally:
                server.close()
        result["first_search_ms_p50"] = round(statistics.median(first), 1)
        result["first_search_ms_max"] = round(max(first), 1)
        # As a client does: its first search a second after initialize, the embedding floor
        # measured right after it (the server's warm-up has had that second).
        later, floors = [], []
        for _ in range(args.restarts):
            server = Server(env)
            try:
                server.initialize()
                time.sleep(1.0)
                ms, found = server.timed("search_memories", query=query(rng), conversation_id=conv, top_k=10)
                assert found["mode"] == "hybrid", found
                later.append(ms)
                floors.append(floor_call())
            finally:
                server.close()
        result["first_search_after_1s_ms_p50"] = round(statistics.median(later), 1)
        result["first_search_after_1s_over_floor_ms"] = round(statistics.median(later) - statistics.median(floors), 1)

        search_ms, all_ms, store_ms, floor_ms, statuses, modes = [], [], [], [], {}, {}
        shown: list[int] = []  # characters of memory text each search answered with
        server = Server(env)
        try:
            server.initialize()
            server.call("search_memories", query="warm up", conversation_id=conv)
            for round_ in range(args.searches):
                # search_memories and search_all_conversations alternate, round by round.
                if round_ % 2 or not args.search_all:
                    ms, found = server.timed("search_memories", query=query(rng), conversation_id=conv, top_k=10)
                    search_ms.append(ms)
                else:
                    ms, found = server.timed("search_all_conversations", query=query(rng), top_k=10)
                    all_ms.append(ms)
                modes[found["mode"]] = modes.get(found["mode"], 0) + 1
                shown.append(sum(len(hit["content"]) for hit in found["results"]))
                ms, stored = server.timed("store_memory", content=sentence(rng), conversation_id=conv)
                store_ms.append(ms)
                floor_ms.append(floor_call())
                if args.pause:
                    time.sleep(args.pause)
                statuses[stored["embedding_status"]] = statuses.get(stored["embedding_status"], 0) + 1
            result["server_peak_rss_mb"] = _peak_rss_mb(server.proc.pid)
        finally:
            server.close()
        if args.backlog:  # how much of it the loop's searches ran beside
            with sqlite3.connect(db) as conn:
                result["backlog_left"] = conn.execute(
                    "SELECT count(*) FROM memories m WHERE NOT EXISTS (SELECT 1 FROM memory_embeddings e"
                    " WHERE e.memory_seq = m.seq AND e.facet = 'context')").fetchone()[0]
        result.update({
            "search_ms_p50": round(statistics.median(search_ms), 1),
            "search_ms_p95": round(percentile(search_ms, 0.95), 1),
            "search_ms_max": round(max(search_ms), 1),
            "searches_over_250ms": sum(ms > 250 for ms in search_ms + all_ms),
            "shown_chars_max": max(shown),
            **({"search_all_ms_p50": round(statistics.median(all_ms), 1),
                "search_all_ms_p95": round(percentile(all_ms, 0.95), 1)} if all_ms else {}),
            "store_ms_p50": round(statistics.median(store_ms), 1),
            "store_ms_p95": round(percentile(store_ms, 0.95), 1),
            "store_ms_max": round(max(store_ms), 1),
            "store_statuses": statuses,
            "search_modes": modes,
            "embed_call_ms_p50": round(statistics.median(floor_ms), 1),
        })
        return result


def drain(n: int, host: str, args: argparse.Namespace, rng: random.Random) -> dict[str, Any]:
    """How long the server, started on a store whose last ``--backlog`` memories lack their
    in-context vectors and left alone (no calls), takes to embed them all."""
    with tempfile.TemporaryDirectory() as tmp:
        db = f"{tmp}/bench.db"
        build_store(db, n, rng, conversations=args.conversations)
        with sqlite3.connect(db) as conn:
            conn.execute("DELETE FROM memory_embeddings WHERE facet = 'context' AND memory_seq >"
                         " (SELECT max(seq) FROM memories) - ?", (args.backlog,))
        env = {"PATH": os.environ.get("PATH", ""), "HOME": tmp, "OLLAMA_MCP_DB": db, "OLLAMA_HOST": host,
               "OLLAMA_MCP_EMBED_MODEL": "all-minilm", "OLLAMA_MCP_LOG_LEVEL": "WARNING"}
        server = Server(env)
        try:
            server.initialize()
            started = time.perf_counter()
            left = args.backlog
            with sqlite3.connect(db) as conn:
                while left and time.perf_counter() - started < 900:
                    time.sleep(0.5)
                    left = conn.execute(
                        "SELECT count(*) FROM memories m WHERE NOT EXISTS (SELECT 1 FROM memory_embeddings e"
                        " WHERE e.memory_seq = m.seq AND e.facet = 'context')").fetchone()[0]
            return {"memories": n, "backlog": args.backlog, "left": left,
                    "drain_s": round(time.perf_counter() - started, 1)}
        finally:
            server.close()


def hung_search(n: int, rng: random.Random) -> dict[str, Any]:
    """A search while the embedding server accepts connections and never answers."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    held: list[socket.socket] = []

    def accept() -> None:
        while True:
            try:
                held.append(listener.accept()[0])
            except OSError:
                return

    threading.Thread(target=accept, daemon=True).start()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            db = f"{tmp}/bench.db"
            conv = build_store(db, n, rng)
            env = {"PATH": os.environ.get("PATH", ""), "HOME": tmp, "OLLAMA_MCP_DB": db,
                   "OLLAMA_HOST": f"127.0.0.1:{listener.getsockname()[1]}", "OLLAMA_MCP_EMBED_MODEL": "all-minilm",
                   "OLLAMA_MCP_LOG_LEVEL": "WARNING"}
            server = Server(env)
            try:
                server.initialize()
                search, found = server.timed("search_memories", query=query(rng), conversation_id=conv)
                store, stored = server.timed("store_memory", content=sentence(rng), conversation_id=conv)
                again, _ = server.timed("search_memories", query=query(rng), conversation_id=conv)
            finally:
                server.proc.kill()
                server.proc.wait()
            return {"hung_search_ms": round(search), "hung_search_mode": found["mode"], "hung_store_ms": round(store),
                    "hung_store_status": stored["embedding_status"], "hung_second_search_ms": round(again)}
    finally:
        listener.close()
        for conn in held:
            conn.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 10_000])
    parser.add_argument("--searches", type=int, default=2000, help="searches (each followed by a store) per size")
    parser.add_argument("--restarts", type=int, default=7)
    parser.add_argument("--startup-runs", type=int, default=9)
    parser.add_argument("--floor-calls", type=int, default=100)
    parser.add_argument("--no-hang", action="store_true", help="skip the hung-Ollama measurement")
    parser.add_argument("--pause", type=float, default=0.0, help="seconds between the steady loop's rounds")
    parser.add_argument("--backlog", type=int, default=0, metavar="N",
                        help="the last N memories start without their in-context vectors")
    parser.add_argument("--search-all", action="store_true",
                        help="every other search of the steady loop is search_all_conversations")
    parser.add_argument("--conversations", type=int, default=1, help="the memories spread over this many")
    parser.add_argument("--turns", type=int, default=0,
                        help="also this many recorded turns, in chats of 1,000 (every one but the last ended)")
    parser.add_argument("--chat-size", type=int, default=TURNS_A_CONVERSATION,
                        help="turns a recorded chat holds (--turns 100000 --chat-size 100000: one chat of 100,000)")
    parser.add_argument("--long-turns", type=int, default=0,
                        help=f"also this many turns of {LONG_TURN_CHARS:,} characters, in the last chat")
    parser.add_argument("--drain", action="store_true",
                        help="only time how long the server alone takes to embed the --backlog")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    rng = random.Random(11)

    results: dict[str, Any] = {"startup": startup(args.startup_runs), "sizes": []}
    print(f"start-up: ours {results['startup']['ours_s_p50']} s, bare {results['startup']['floor_s_p50']} s, "
          f"ratio {results['startup']['ratio']}", flush=True)
    minilm, host = start_minilm()
    try:
        embed_floor(host, rng, 10)  # the model's first calls are slower
        results["embed_call_ms_p50"] = round(embed_floor(host, rng, args.floor_calls), 1)
        print(f"one embedding call (MiniLM, one text): {results['embed_call_ms_p50']} ms", flush=True)
        for n in args.sizes:
            if args.drain:
                print(json.dumps(drain(n, host, args, rng)), flush=True)
                continue
            size = measure_size(n, host, args, rng)
            floor = size["embed_call_ms_p50"]  # measured between the server's calls
            size["store_over_floor_ms"] = round(size["store_ms_p50"] - floor, 1)
            size["search_over_floor_ms"] = round(size["search_ms_p50"] - floor, 1)
            if "search_all_ms_p50" in size:
                size["search_all_over_floor_ms"] = round(size["search_all_ms_p50"] - floor, 1)
            results["sizes"].append(size)
            print(json.dumps(size), flush=True)
        results["embed_call_ms_p50_after"] = round(embed_floor(host, rng, args.floor_calls), 1)
        print(f"one embedding call, again at the end: {results['embed_call_ms_p50_after']} ms", flush=True)
    finally:
        minilm.kill()
        minilm.wait()
    if not args.no_hang:
        results["hung"] = hung_search(min(args.sizes), rng)
        print(json.dumps(results["hung"]), flush=True)
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()

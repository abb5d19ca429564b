"""Load on the HTTP server: C concurrent MCP clients x N mixed calls (40% store_memory, 40%
search_memories, 20% list_conversations) against real ``ollama-mcp serve --http`` processes, each
client with its own token, 5 principals; then every acknowledged store is looked up in its
principal's store. A synthetic embedder behind Ollama's API (this measures the server under
concurrency, not the model: bench/latency.py has the MiniLM figures).

    .venv/bin/python bench/http_load.py --backend sqlite
    .venv/bin/python bench/http_load.py --backend postgres
    .venv/bin/python bench/http_load.py --backend postgres --instances 2
    .venv/bin/python bench/http_load.py --bare        # the floor: the SDK's server, tools that do nothing
    .venv/bin/python bench/http_load.py --profile /tmp/http   # and where the server's CPU goes (py-spy)

``--profile PREFIX`` samples each server process with py-spy (from PyPI; it reads the process
from outside, so the server runs unchanged) at 250 Hz, only while a thread runs (not waiting in
``epoll``), writes the collapsed stacks to ``PREFIX-N.txt`` and prints the share of the server's
CPU samples by where they were: what part of the stack a sample is in, the innermost frame first
matched to one of ``GROUPS``.

With two instances each client holds a connection to both and alternates its calls between them,
on one conversation: what one instance acknowledged, the other must find. The instances run
``--stateless`` (no MCP sessions: a load balancer may send any request anywhere).
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
from collections import defaultdict
from pathlib import Path
from typing import Any

import anyio
import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.embed_server import EmbedServer, Synthetic  # noqa: E402
from ollama_mcp.cli import admin  # noqa: E402
from ollama_mcp.config import Settings  # noqa: E402

SERVER = Path(sys.executable).parent / "ollama-mcp"
PRINCIPALS = ("alice", "bob", "carol", "dave", "erin")
WORDS = ("deploy", "invoice", "garden", "vacation", "database", "budget", "python", "meeting", "doctor", "piano")


# The floor: the SDK's own streamable HTTP server with the same four tool names, each answering at
# once with a small JSON object and touching nothing (``--bare``): what 50 clients cost any Python
# MCP server on this machine before it does any work.
BARE = """import socket, sys, uuid
import uvicorn
from pydantic import BaseModel
from mcp.server import MCPServer
server = MCPServer("bare")
class Started(BaseModel):
    conversation_id: str
class Stored(BaseModel):
    memory_id: str
    conversation_id: str | None
class Found(BaseModel):
    results: list[dict]
    mode: str
class Listed(BaseModel):
    conversations: list[dict]
@server.tool()
async def init_conversation(name: str | None = None) -> Started:
    "start"
    return Started(conversation_id=str(uuid.uuid4()))
@server.tool()
async def store_memory(content: str, conversation_id: str | None = None) -> Stored:
    "store"
    return Stored(memory_id=str(uuid.uuid4()), conversation_id=conversation_id)
@server.tool()
async def search_memories(query: str, conversation_id: str | None = None) -> Found:
    "search"
    return Found(results=[], mode="hybrid")
@server.tool()
async def list_conversations() -> Listed:
    "list"
    return Listed(conversations=[])
sock = socket.socket()
sock.bind(("127.0.0.1", 0))
print(f"serves MCP at http://127.0.0.1:{sock.getsockname()[1]}/mcp", file=sys.stderr, flush=True)
app = server.streamable_http_app(stateless_http="--stateless" in sys.argv)
uvicorn.Server(uvicorn.Config(app, log_level="warning", access_log=False)).run(sockets=[sock])
"""


# Where a sample of the server's stack is, by its innermost frame that matches (first match wins):
# the group names the work, not the module (the ranker's numpy is "our search", numpy alone not).
GROUPS = (
    ("sqlite: statements (aiosqlite's thread)", ("aiosqlite/core.py",)),
    ("postgres: psycopg", ("psycopg/", "psycopg_pool/")),
    ("ollama client + httpx (the embedding call)", ("ollama/_client.py", "httpx/", "httpcore/", "h11/")),
    ("our search and ranking", ("ollama_mcp/storage/ranking", "ollama_mcp/storage/sqlite/vector", "ollama_mcp/search",
                                "ollama_mcp/storage/postgres/rank")),
    ("our storage (SQL built, rows read)", ("ollama_mcp/storage/",)),
    ("our services", ("ollama_mcp/services/",)),
    ("our MCP tools and HTTP edge (auth, tokens)", ("ollama_mcp/mcp/", "ollama_mcp/host/")),
    ("pydantic (validation, serialisation)", ("pydantic/", "pydantic_core/")),
    ("json", ("json/",)),
    ("MCP SDK (sessions, streams, messages)", ("mcp/",)),
    ("starlette + uvicorn + sse (HTTP)", ("starlette/", "uvicorn/", "sse_starlette/", "h11/", "httptools/")),
    ("anyio + asyncio (scheduling, streams)", ("anyio/", "asyncio/")),
)


def profile_summary(paths: list[Path]) -> dict[str, float]:
    """Share of the samples in ``paths`` (py-spy's raw collapsed stacks) per group of ``GROUPS``."""
    counts: dict[str, int] = defaultdict(int)
    total = 0
    for path in paths:
        for line in path.read_text().splitlines():
            stack, _, number = line.rpartition(" ")
            if not stack:
                continue
            samples = int(number)
            total += samples
            frames = stack.split(";")[::-1]  # innermost first
            counts[next((name for frame in frames for name, marks in GROUPS if any(m in frame for m in marks)),
                        "other")] += samples
    ranked = sorted(counts.items(), key=lambda kv: -kv[1])
    return {name: round(100 * n / total, 1) for name, n in ranked} if total else {}


def start_profiler(pid: int, output: Path, gil: bool) -> subprocess.Popen[bytes]:
    """py-spy sampling ``pid`` into ``output``; ``gil``: only the thread holding the GIL (Python's own CPU)."""
    spy = Path(sys.executable).parent / "py-spy"
    if not spy.exists():
        raise SystemExit("--profile needs py-spy: .venv/bin/pip install py-spy")
    args = [str(spy), "record", "--pid", str(pid), "--rate", "250", *(["--gil"] if gil else []), "--format", "raw",
            "--output", str(output), "--nonblocking"]
    return subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` so far (Linux: /proc/PID/stat)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def start_bare(folder: str, stateless: bool) -> tuple[subprocess.Popen[str], str]:
    script = Path(folder) / "bare_http.py"
    script.write_text(BARE)
    args = [sys.executable, str(script), *(["--stateless"] if stateless else [])]
    process = subprocess.Popen(args, stderr=subprocess.PIPE, text=True, cwd="/")
    assert process.stderr is not None
    for line in process.stderr:
        if "serves MCP at" in line:
            return process, line.split("serves MCP at ", 1)[1].strip()
    raise SystemExit(f"the bare server did not start: {process.wait()}")


def start_server(env: dict[str, str], stateless: bool) -> tuple[subprocess.Popen[str], str]:
    args = [str(SERVER), "serve", "--http", "--port", "0", *(["--stateless"] if stateless else [])]
    process = subprocess.Popen(args, env=env, stderr=subprocess.PIPE, text=True, cwd="/")
    assert process.stderr is not None
    for line in process.stderr:
        if "serves MCP at" in line:
            return process, line.split("serves MCP at ", 1)[1].split(" ", 1)[0]
    raise SystemExit(f"the server did not start: {process.wait()}")


async def run_client(
    index: int, urls: list[str], token: str, calls: int, timings: dict[str, list[float]], acked: list[tuple[str, str]],
    errors: list[str],
) -> None:
    rng = random.Random(index)
    principal = PRINCIPALS[index % len(PRINCIPALS)]
    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=60) as session:
        clients = [Client(streamable_http_client(url, http_client=session), mode="legacy") for url in urls]
        for connected in clients:
            await connected.__aenter__()
        try:
            created = await clients[0].call_tool("init_conversation", {"name": f"load {index}"})
            conversation = (created.structured_content or {})["conversation_id"]
            for n in range(calls):
                mcp = clients[n % len(clients)]
                roll = rng.random()
                if roll < 0.4:
                    kind, name = "store", "store_memory"
                    args: dict[str, Any] = {"content": f"client {index} note {n}: {' '.join(rng.sample(WORDS, 4))}",
                                            "conversation_id": conversation}
                elif roll < 0.8:
                    kind, name = "search", "search_memories"
                    args = {"query": " ".join(rng.sample(WORDS, 2)), "conversation_id": conversation}
                else:
                    kind, name = "list", "list_conversations"
                    args = {}
                started = time.perf_counter()
                try:
                    result = await mcp.call_tool(name, args)
                except Exception as exc:  # noqa: BLE001 - counted, the run goes on
                    errors.append(f"{name}: {type(exc).__name__}: {exc}")
                    continue
                timings[kind].append((time.perf_counter() - started) * 1000)
                if result.is_error:
                    errors.append(f"{name}: {result.content[0].text}")  # type: ignore[union-attr]
                elif kind == "store":
                    acked.append((principal, (result.structured_content or {})["memory_id"]))
        finally:
            for connected in reversed(clients):
                await connected.__aexit__(None, None, None)


async def measure(
    database: str, embed_url: str, clients: int, calls: int, instances: int, bare: bool = False,
    profile: str | None = None, profile_gil: bool = False,
) -> dict[str, Any]:
    env = {"PATH": os.environ["PATH"], "HOME": os.environ.get("HOME", "/tmp"), "OLLAMA_MCP_DB": database,
           "OLLAMA_HOST": embed_url, "OLLAMA_MCP_EMBED_MODEL": "all-minilm", "OLLAMA_MCP_CHAT_MODEL": "none",
           "OLLAMA_MCP_LOG_LEVEL": "WARNING"}
    settings = Settings.from_env(env)
    if bare:
        tokens = ["none"] * clients
        servers = [start_bare(str(Path(database).parent), stateless=instances > 1) for _ in range(instances)]
    else:
        tokens = [(await admin.create_token(settings, f"client-{i}", PRINCIPALS[i % len(PRINCIPALS)]))[1]
                  for i in range(clients)]
        servers = [start_server(env, stateless=instances > 1) for _ in range(instances)]
    outputs = [Path(f"{profile}-{n}.txt") for n in range(len(servers))] if profile else []
    profilers = [start_profiler(process.pid, out, profile_gil)
                 for (process, _), out in zip(servers, outputs, strict=False)]
    timings: dict[str, list[float]] = defaultdict(list)
    acked: list[tuple[str, str]] = []
    errors: list[str] = []
    started = time.perf_counter()
    try:
        async with anyio.create_task_group() as tasks:
            for i in range(clients):
                urls = [url for _, url in servers]
                tasks.start_soon(run_client, i, urls[i % instances:] + urls[:i % instances], tokens[i], calls,
                                 timings, acked, errors)
    finally:
        cpu = [cpu_seconds(process.pid) for process, _ in servers]
        for process, _ in servers:
            process.terminate()
            process.wait(timeout=30)
        for profiler in profilers:  # py-spy writes its file when the process it samples is gone
            profiler.wait(timeout=60)
    wall = time.perf_counter() - started
    present: set[str] = {memory for _, memory in acked} if bare else set()  # the floor keeps nothing
    for principal in () if bare else PRINCIPALS:
        text, _ = await admin.export_store(settings.for_principal(principal), None, "json")
        present |= {m["id"] for c in json.loads(text)["conversations"] for m in c["memories"]}
    missing = [memory for _, memory in acked if memory not in present]
    every = [t for kind in timings.values() for t in kind]
    return {
        "clients": clients,
        "calls_per_client": calls,
        "instances": instances,
        "wall_s": round(wall, 1),
        "calls": len(every),
        "errors": len(errors),
        "first_errors": errors[:3],
        "acknowledged_stores": len(acked),
        "missing_stores": len(missing),
        **{f"{kind}_p50_ms": round(statistics.median(values), 1) for kind, values in sorted(timings.items())},
        **{
            f"{kind}_p99_ms": round(statistics.quantiles(values, n=100)[98], 1)
            for kind, values in sorted(timings.items())
        },
        "calls_per_s": round(len(every) / wall, 1),
        "all_p50_ms": round(statistics.median(every), 1),
        "all_p99_ms": round(statistics.quantiles(every, n=100)[98], 1),
        # CPU the server processes used over the run (user + system, every thread), per call: at one
        # core's worth per second, 1 / this is the most calls a second one process can answer.
        "server_cpu_s": round(sum(cpu), 1),
        "server_cpu_ms_per_call": round(1000 * sum(cpu) / max(len(every), 1), 2),
        **({"server_cpu_by_group_pct": profile_summary(outputs)} if profile else {}),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backend", choices=("sqlite", "postgres"), default="sqlite")
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--calls", type=int, default=100)
    parser.add_argument("--instances", type=int, default=1)
    parser.add_argument("--bare", action="store_true",
                        help="the floor: a bare SDK server with the same tool names that does nothing")
    parser.add_argument("--profile", metavar="PREFIX",
                        help="sample each server with py-spy into PREFIX-N.txt and print where its CPU went")
    parser.add_argument("--profile-gil", action="store_true",
                        help="with --profile: sample only the thread holding the GIL (py-spy --gil)")
    args = parser.parse_args()
    embedder = EmbedServer(Synthetic(dim=384)).start()
    with tempfile.TemporaryDirectory(prefix="ollama-mcp-load-") as tmp:
        pg = None
        if args.backend == "postgres":
            import pgserver  # noqa: PLC0415

            pg = pgserver.get_server(Path(tmp) / "pg", cleanup_mode="stop")
            database = pg.get_uri()
        else:
            if args.instances > 1:
                raise SystemExit("--instances > 1 needs --backend postgres")
            database = str(Path(tmp) / "memory.db")
        try:
            report = anyio.run(
                measure, database, embedder.url, args.clients, args.calls, args.instances, args.bare, args.profile,
                args.profile_gil,
            )
        finally:
            if pg is not None:
                pg.cleanup()
            embedder.stop()
    print(json.dumps({"backend": "bare SDK server" if args.bare else args.backend, **report}, indent=1))


if __name__ == "__main__":
    main()

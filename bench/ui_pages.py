"""How long the browser view's pages take over HTTP at a store size: the real ``ollama-mcp ui``
process on a store of N memories in one conversation (bench/mcp_stdio.py's store), spoken to
with httpx; a synthetic embedder behind Ollama's API (a page's time is not an embedding's).

    .venv/bin/python bench/ui_pages.py --memories 10000
"""

from __future__ import annotations

import argparse
import os
import random
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.embed_server import EmbedServer, Synthetic  # noqa: E402
from bench.mcp_stdio import DIM, SERVER, build_store  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--memories", type=int, default=10_000)
    parser.add_argument("--requests", type=int, default=20, help="per page (5 for health and export)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        path = str(Path(folder) / "memory.db")
        conversation = build_store(path, args.memories, random.Random(7))
        embedder = EmbedServer(Synthetic(DIM)).start()
        env = {"PATH": os.environ.get("PATH", ""), "HOME": folder, "OLLAMA_MCP_DB": path,
               "OLLAMA_HOST": embedder.url, "OLLAMA_MCP_EMBED_MODEL": "all-minilm"}
        proc = subprocess.Popen([SERVER, "ui", "--port", "0"], stdout=subprocess.PIPE, text=True, env=env, cwd="/")
        try:
            assert proc.stdout is not None
            printed = proc.stdout.readline() + proc.stdout.readline()
            link = re.search(r"http://\S+", printed)
            assert link, printed
            measure(link.group(0), conversation, args.requests)
        finally:
            proc.terminate()
            proc.wait(timeout=30)
            embedder.stop()


def measure(link: str, conversation: str, requests: int) -> None:
    pages = {
        "conversations": "/",
        "conversation (first page)": f"/conversations/{conversation}",
        "search (all conversations)": "/search?q=what+did+they+plan+for+the+weekend",
        "health": "/health",
        "export JSON (the conversation)": f"/conversations/{conversation}/export?format=json",
    }
    with httpx.Client(base_url=link.split("/?")[0], timeout=60) as client:
        client.get(link)
        for name, path in pages.items():
            count = max(1, requests // 4) if name.startswith(("health", "export")) else requests
            times, size = [], 0
            for _ in range(count):
                started = time.perf_counter()
                reply = client.get(path)
                times.append((time.perf_counter() - started) * 1000)
                assert reply.status_code == 200, (path, reply.status_code)
                size = len(reply.content)
            print(f"{name:<32} median {statistics.median(times):7.1f} ms  max {max(times):7.1f} ms  "
                  f"({count} requests, {size / 1024:,.0f} KiB)")


if __name__ == "__main__":
    main()

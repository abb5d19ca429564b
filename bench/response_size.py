"""Bytes of whole JSON-RPC responses a client receives over stdio: a 5-hit search over memories of
88,000 characters, an export page (Markdown and JSON) of such a conversation, and a read_memory
page. Sizes do not depend on the embedding model, so a synthetic embedder stands behind Ollama's
API (``embed_server.Synthetic``); the server is the installed ``ollama-mcp``, as shipped.

    python bench/response_size.py [--chars 88000] [--hits 5]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import select
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.embed_server import EmbedServer, Synthetic  # noqa: E402

SERVER = Path(sys.executable).parent / "ollama-mcp"
WORDS = "river stone lantern orchard meadow harbour copper window thistle marble cedar hollow ember".split()


class Stdio:
    def __init__(self, env: dict[str, str]) -> None:
        self.proc = subprocess.Popen([str(SERVER)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, env=env, cwd="/", bufsize=0)
        self.next_id = 0
        self.request("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                    "clientInfo": {"name": "bench", "version": "0"}})
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def send(self, message: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(message).encode() + b"\n")

    def request(self, method: str, params: dict[str, Any]) -> tuple[dict[str, Any], int]:
        self.next_id += 1
        self.send({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params})
        assert self.proc.stdout is not None
        if not select.select([self.proc.stdout], [], [], 120)[0]:
            raise SystemExit(f"no answer to {method}")
        line = self.proc.stdout.readline()
        return json.loads(line), len(line.rstrip(b"\n"))

    def tool(self, tool: str, /, **arguments: Any) -> tuple[dict[str, Any], int]:
        answer, size = self.request("tools/call", {"name": tool, "arguments": arguments})
        result = answer["result"]
        if result.get("isError"):
            raise SystemExit(f"{tool}: {result['content'][0]['text']}")
        return result["structuredContent"], size

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(timeout=30)


def text(seed: int, chars: int) -> str:
    rng = random.Random(seed)
    words = " ".join(rng.choice(WORDS) for _ in range(chars // 4))[: chars // 2]
    return f"{words} the kestrel report {seed} {words}"[:chars]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--chars", type=int, default=88_000)
    parser.add_argument("--hits", type=int, default=5)
    args = parser.parse_args()
    embedder = EmbedServer(Synthetic(384))
    embedder.start()
    with tempfile.TemporaryDirectory() as tmp:
        env = {"PATH": "/usr/bin:/bin", "HOME": tmp, "OLLAMA_HOST": f"127.0.0.1:{embedder.port}",
               "OLLAMA_MCP_DB": str(Path(tmp) / "memory.db"), "OLLAMA_MCP_EMBED_MODEL": "all-minilm",
               "OLLAMA_MCP_CHAT_MODEL": "none", "OLLAMA_MCP_MAX_CONTENT_CHARS": str(max(args.chars, 100_000))}
        if "PYTHONPATH" in os.environ:  # an A/B run: the server of that checkout
            env["PYTHONPATH"] = os.environ["PYTHONPATH"]
        server = Stdio(env)
        server.tool("init_conversation", name="long memories")
        ids = [server.tool("store_memory", content=text(i, args.chars))[0]["memory_id"] for i in range(args.hits)]
        found, search = server.tool("search_memories", query="kestrel report", top_k=args.hits)
        _, markdown = server.tool("export_conversation")
        _, as_json = server.tool("export_conversation", format="json")
        try:
            _, read = server.tool("read_memory", memory_id=ids[0])
        except SystemExit:  # a version before read_memory
            read = 0
        server.close()
    embedder.stop()
    print(f"{args.hits} memories of {args.chars:,} characters; bytes of the whole JSON-RPC response:")
    print(f"  search_memories, {len(found['results'])} hits: {search:,}")
    print(f"  export_conversation page 1, markdown: {markdown:,}")
    print(f"  export_conversation page 1, json: {as_json:,}")
    print(f"  read_memory page 1: {read:,}")


if __name__ == "__main__":
    main()

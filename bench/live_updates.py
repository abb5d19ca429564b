"""Live updates: what watching costs and how soon a subscriber hears a write.

Per tick (every 0.2 s while anyone is subscribed) the server reads the watched conversations'
change marks and, for list subscribers, the conversation list's mark; this times both on a
SQLite store whose watched conversation holds ``--memories`` notes, then the delay from a
``store_memory`` returning to the ``subscriptions/listen`` event arriving (in-memory MCP clients,
synthetic embeddings from bench/embed_server.py).

    python bench/live_updates.py                 # 10k memories in the watched conversation
    python bench/live_updates.py --memories 100000
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
import uuid
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from mcp import Client  # noqa: E402

from bench.embed_server import EmbedServer, Synthetic  # noqa: E402
from ollama_mcp.app import open_app  # noqa: E402
from ollama_mcp.config import Settings  # noqa: E402
from ollama_mcp.domain import Memory, utc_now  # noqa: E402
from ollama_mcp.inputs.conversations import new_conversation
from ollama_mcp.mcp.server import build_server  # noqa: E402


def median_ms(samples: list[float]) -> str:
    return f"median {statistics.median(samples) * 1000:.2f} ms, max {max(samples) * 1000:.2f} ms"


async def run(memories: int, writes: int) -> None:
    embedder = EmbedServer(Synthetic(384)).start()
    folder = tempfile.mkdtemp()
    settings = Settings.from_env({
        "OLLAMA_MCP_DB": f"{folder}/memory.db", "OLLAMA_HOST": embedder.url, "OLLAMA_MCP_EMBED_MODEL": "all-minilm",
    })
    settings = replace(settings, chat_model=None)
    try:
        async with open_app(settings, background=False) as app:
            conversation = await app.conversations.start(new_conversation("watched"))
            notes = [
                Memory(id=str(uuid.uuid4()), seq=0, conversation_id=conversation.id, kind="note", content=f"note {i}",
                       tags=(), metadata={}, created_at=utc_now())
                for i in range(memories)
            ]
            await app.store.insert_memories(notes, [None] * len(notes))
            for name, read in (("change_marks", lambda: app.store.change_marks([conversation.id])),
                               ("conversations_mark", app.store.conversations_mark)):
                times = []
                for _ in range(50):
                    started = time.perf_counter()
                    await read()
                    times.append(time.perf_counter() - started)
                print(f"{name} ({memories} memories): {median_ms(times)}")
        uri = f"memory://conversations/{conversation.id}"
        async with Client(build_server(settings)) as watcher, Client(build_server(settings)) as writer:
            async with watcher.listen(resource_subscriptions=[uri]) as subscription:
                delays = []
                for i in range(writes):
                    await writer.call_tool("store_memory", {"content": f"live {i}", "conversation_id": conversation.id})
                    started = time.perf_counter()
                    await subscription.__anext__()
                    delays.append(time.perf_counter() - started)
        print(f"store_memory returned -> resources/updated heard ({writes} writes): {median_ms(delays)}")
    finally:
        embedder.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--memories", type=int, default=10_000)
    parser.add_argument("--writes", type=int, default=20)
    args = parser.parse_args()
    asyncio.run(run(args.memories, args.writes))


if __name__ == "__main__":
    main()

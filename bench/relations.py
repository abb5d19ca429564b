"""Related conversations: which links the product makes between ended conversations, with real
MiniLM vectors (bench/embed_server.py) and the real relate job.

Each LoCoMo session becomes a conversation ended with the session's own summary (the dataset's
``session_summary``). Sessions of the same LoCoMo conversation are the same two people carrying
on their lives: those are the links a user would want (the ground truth here); sessions of
different conversations are other people. For every pair the cosine similarity of the two
summaries is read back through ``similar_summaries``; the table gives, per threshold, the share
of links made that join sessions of the same conversation (precision), and the share of
sessions linked to at least one earlier session of their own conversation. The default threshold
is what ``OLLAMA_MCP_RELATED_THRESHOLD`` ships with.

    python bench/relations.py                     # SQLite
    python bench/relations.py --postgres          # the same on PostgreSQL (pgserver)
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.embed_server import DEFAULT_CACHE, EmbedServer, MiniLM  # noqa: E402
from ollama_mcp.app import open_app  # noqa: E402
from ollama_mcp.config import RELATED_THRESHOLD, Settings  # noqa: E402
from ollama_mcp.inputs.conversations import new_conversation
from ollama_mcp.services.relations import MAX_RELATED  # noqa: E402

DATA = Path(__file__).resolve().parent.parent.parent / "shared" / "bench-data" / "locomo-dev.json"
THRESHOLDS = (0.3, 0.4, 0.5, 0.6, 0.7, 0.8)


async def run(env: dict[str, str], samples: list[dict[str, Any]]) -> dict[str, Any]:
    settings = Settings.from_env(env)
    owner: dict[str, str] = {}
    order: list[str] = []
    async with open_app(settings) as app:
        started = time.perf_counter()
        for sample in samples:
            for key, summary in sorted(sample["session_summary"].items(), key=lambda kv: int(kv[0].split("_")[1])):
                conversation = await app.conversations.start(new_conversation(f"{sample['sample_id']} {key}"))
                await app.conversations.end(conversation.id, summary)
                owner[conversation.id] = sample["sample_id"]
                order.append(conversation.id)
        while await app.store.next_job_time() is not None:  # a relate job still queued or running
            await asyncio.sleep(0.1)
        linking = time.perf_counter() - started
        pairs: dict[tuple[str, str], float] = {}
        for conversation in order:
            for other, score in await app.store.similar_summaries(conversation, app.indexer.model, len(order)) or []:
                pairs[tuple(sorted((conversation, other)))] = score  # type: ignore[index]
        found = {(r.conversation_id, c, r.kind) for c in order for r in await app.store.relations(c)}
        made = {(a, b) for a, b, _ in found}
        duplicates = sum(kind == "duplicate" for _, _, kind in found) // 2
    same = [s for (a, b), s in pairs.items() if owner[a] == owner[b]]
    other = [s for (a, b), s in pairs.items() if owner[a] != owner[b]]
    table = []
    for threshold in THRESHOLDS:
        links = {(a, b) for (a, b), s in pairs.items() if s >= threshold}
        right = sum(owner[a] == owner[b] for a, b in links)
        linked = {c for c in order if any(owner[x] == owner[c] and c in (x, y) for x, y in links
                                          if owner[x] == owner[y])}
        table.append({
            "threshold": threshold, "pairs_linked": len(links),
            "precision": round(right / len(links), 3) if links else None,
            "sessions_linked_to_their_own": round(len(linked) / len(order), 3),
        })
    return {
        "sessions": len(order), "conversations": len(samples), "linking_seconds": round(linking, 2),
        "similarity_same_conversation": {"median": round(statistics.median(same), 3),
                                         "p10": round(statistics.quantiles(same, n=10)[0], 3)},
        "similarity_other_conversations": {"median": round(statistics.median(other), 3),
                                           "p90": round(statistics.quantiles(other, n=10)[-1], 3)},
        "by_threshold": table,
        "default_threshold": RELATED_THRESHOLD, "max_links_per_conversation": MAX_RELATED,
        "links_made_by_the_product": len(made) // 2,  # each seen from both ends
        "links_marked_duplicate": duplicates,
        "highest_similarity_of_two_sessions": round(max(pairs.values()), 3),
        "links_made_joining_the_same_conversation": round(
            sum(owner[a] == owner[b] for a, b in made) / len(made), 3) if made else None,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--postgres", action="store_true", help="run on PostgreSQL (pgserver)")
    parser.add_argument("--data", type=Path, default=DATA)
    args = parser.parse_args()
    samples = json.loads(args.data.read_text())
    server = EmbedServer(MiniLM(DEFAULT_CACHE)).start()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            database = str(Path(tmp) / "relations.db")
            if args.postgres:
                import pgserver  # noqa: PLC0415

                database = pgserver.get_server(Path(tmp) / "pg", cleanup_mode="stop").get_uri()
            env = {"OLLAMA_HOST": server.url, "OLLAMA_MCP_DB": database, "OLLAMA_MCP_EMBED_MODEL": "all-minilm",
                   "OLLAMA_MCP_CHAT_MODEL": "none", "OLLAMA_MCP_LOG_LEVEL": "WARNING", "HOME": tmp}
            print(json.dumps(asyncio.run(run(env, samples)), indent=2))
    finally:
        server.stop()


if __name__ == "__main__":
    main()

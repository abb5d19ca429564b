"""What a query naming a time costs (#18): in-process searches on a store like bench/mcp_stdio.py's
(synthetic 384-d vectors, Zipf words), with and without a time in the query, at several
``SearchTuning.window_depth`` values, in alternating blocks.

    python bench/window_cost.py                       # 10k memories, about a minute
    python bench/window_cost.py --memories 100000 --depths 50 200
    python bench/window_cost.py --depths 200 --told-weights 0 1    # the list of memories told of a short window later
    python bench/window_cost.py --depths 200 --chat   # memories of chat text: LoCoMo's turns, cycled

The synthetic embedder answers in about a millisecond; the figures are the search's own work.
Zipf words rarely look like a time (1.5% of them pass ``when``'s first scan); chat text often does
("last", "this", "night": 20% of LoCoMo's turns without their dates), so ``--chat`` shows what
reading the times a memory names costs where it costs most.
"""

from __future__ import annotations

import argparse
import random
import statistics
import string
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import anyio

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.embed_server import EmbedServer, Synthetic  # noqa: E402
from bench.latency import sentence  # noqa: E402
from bench.mcp_stdio import DIM, build_store, query  # noqa: E402

TIME = datetime.now(UTC).strftime(" in %B %Y")  # the month the synthetic store's memories happened in
# A week's window: every memory happened after it, so the memories that may speak of it later
# (SearchTuning.told_weight) are read, as many as ``told_rows``: a short window's worst case.
WEEK = " last week"
NAMED = {"": "a query naming none", TIME: "a query naming its month", WEEK: "one naming last week"}


async def measure(db: str, conversation: str, url: str, args: argparse.Namespace) -> dict[str, list[float]]:
    from ollama_mcp.app import open_app  # noqa: PLC0415
    from ollama_mcp.config import Settings  # noqa: PLC0415
    from ollama_mcp.inputs.search import search_request  # noqa: PLC0415
    from ollama_mcp.storage.ranking import SearchTuning  # noqa: PLC0415

    env = {"OLLAMA_HOST": url, "OLLAMA_MCP_DB": db, "OLLAMA_MCP_EMBED_MODEL": "all-minilm",
           "HOME": str(Path(db).parent), "OLLAMA_MCP_LOG_LEVEL": "WARNING"}
    rng = random.Random(3)
    times: dict[str, list[float]] = {}
    async with open_app(Settings.from_env(env)) as app:
        for _ in range(30):  # the indexes load; query words get cached
            await app.recall.search(search_request(query(rng) + TIME, conversation))
        keywords = app.indexer.ranker.keywords  # a large store's in-memory keyword index loads in the background
        with anyio.fail_after(120):
            while args.memories >= app.indexer.ranker.tuning.keyword_index_min_memories and not keywords.loaded:
                await anyio.sleep(0.2)
        told_weights = args.told_weights or [SearchTuning().told_weight]
        for _ in range(args.rounds):
            for depth, told_weight in [(d, w) for d in args.depths for w in told_weights]:
                app.indexer.ranker.tuning = replace(SearchTuning(), window_depth=depth, told_weight=told_weight)
                for suffix in ("", TIME, WEEK):
                    label = f"window_depth={depth}, told_weight={told_weight}, {NAMED[suffix]}"
                    for _ in range(args.searches):
                        request = search_request(query(rng) + suffix, conversation)
                        started = time.perf_counter()
                        await app.recall.search(request)
                        times.setdefault(label, []).append((time.perf_counter() - started) * 1000)
    return times


def chat_turns() -> Callable[[random.Random], str]:
    """Each call the next of LoCoMo's turns, as "Speaker: text" (the benchmark's date prefix left
    out: a user's memory names a time only when its words do), cycled; each round of the cycle ends
    its texts with another letter, since an identical note is stored once."""
    from bench.locomo import DEFAULT_DATA, load  # noqa: PLC0415

    turns = [t.text.split("] ", 1)[-1] for sample in load(DEFAULT_DATA) for t in sample.turns]
    order = iter(range(10**9))

    def text(_rng: random.Random) -> str:
        rounds, at = divmod(next(order), len(turns))
        return f"{turns[at]} {string.ascii_lowercase[rounds % 26]}"

    return text


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--memories", type=int, default=10_000)
    parser.add_argument("--depths", type=int, nargs="+", default=[50, 100, 200])
    parser.add_argument(
        "--told-weights", type=float, nargs="+", help="SearchTuning.told_weight values (default: the shipped one)"
    )
    parser.add_argument("--searches", type=int, default=100, help="per block")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument(
        "--chat", action="store_true", help="memories of LoCoMo's turns (without their dates), not Zipf words"
    )
    args = parser.parse_args()
    text = chat_turns() if args.chat else sentence
    server = EmbedServer(Synthetic(DIM)).start()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            db = f"{tmp}/bench.db"
            conversation = build_store(db, args.memories, random.Random(11), text)
            times = anyio.run(measure, db, conversation, server.url, args)
    finally:
        server.stop()
    print(f"{args.memories} memories, search p50 in-process (ms), {args.rounds} x {args.searches} each:")
    for label, values in times.items():
        print(f"  {label}: {statistics.median(values):.2f}")


if __name__ == "__main__":
    main()

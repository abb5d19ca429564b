"""What working out changed facts costs a search (#82): a store of many first-person notes naming
people and places (each a claim about the speaker; the worst case for reading statements) plus a
few that change where the speaker lives, searched by this tree and by an earlier one (``--code``),
alternated A B A B, each in a fresh process over its own copy of the store.

In process (``open_app`` and ``Recall.search``, the fake Ollama of the tests: vectors of hashed
words), labelled so: it isolates what the search reads and computes beside the ranking; the
figures through MCP are ``bench/mcp_stdio.py``'s.

    python bench/supersession_cost.py --code /tmp/old --notes 10000 --rounds 4
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
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
NAMES = ["Anna", "Bruno", "Carla", "Dev", "Elif", "Farid", "Greta", "Hugo"]
PLACES = ["Paris", "Lisbon", "Berlin", "Oslo", "Rome", "Porto", "Vienna", "Madrid"]
QUERIES = ["where do I live", "what did I talk about with Anna", "project 42 in Paris", "Hugo Rome"]


def child(mode: str, database: str, notes: int, searches: int) -> None:
    """Run in a subprocess with the tree under test first on the path (PYTHONPATH)."""
    import anyio  # noqa: PLC0415

    from ollama_mcp.app import open_app  # noqa: PLC0415
    from ollama_mcp.config import Settings  # noqa: PLC0415
    from ollama_mcp.inputs.conversations import new_conversation  # noqa: PLC0415
    from ollama_mcp.inputs.memories import notes_to_import  # noqa: PLC0415
    from ollama_mcp.inputs.search import search_request  # noqa: PLC0415
    from tests.support.fake_ollama import FakeOllama  # noqa: PLC0415

    async def main() -> None:
        import time  # noqa: PLC0415

        fake = FakeOllama().start()
        settings = Settings.from_env({"OLLAMA_MCP_DB": database, "OLLAMA_HOST": fake.url, "HOME": "/nonexistent"})
        rng = random.Random(1)
        try:
            async with open_app(settings, background=False) as app:
                if mode == "build":
                    conversation = await app.conversations.start(new_conversation("notes"))
                    texts = [f"I met {rng.choice(NAMES)} in {rng.choice(PLACES)} and we talked about project {i}."
                             for i in range(notes)]
                    texts += [f"I live in {place} now, note {i}." for i, place in enumerate(PLACES)]
                    for start in range(0, len(texts), 1000):
                        await app.memories.import_notes(notes_to_import(conversation.id, texts[start:start + 1000]))
                    return
                for query in QUERIES:  # warm-up
                    await app.recall.search(search_request(query, None, 10, everywhere=True))
                took = []
                for i in range(searches):
                    started = time.perf_counter()
                    await app.recall.search(search_request(QUERIES[i % len(QUERIES)], None, 10, everywhere=True))
                    took.append((time.perf_counter() - started) * 1000)
                print(json.dumps({"median_ms": statistics.median(took)}))
        finally:
            fake.stop()

    anyio.run(main)


def run(tree: Path, mode: str, database: str, notes: int, searches: int) -> dict[str, float]:
    done = subprocess.run(
        [sys.executable, __file__, "--child", mode, "--database", database, "--notes", str(notes),
         "--searches", str(searches)],
        env={**os.environ, "PYTHONPATH": str(tree)}, capture_output=True, text=True, check=True, cwd=tree,
    )
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    return json.loads(lines[-1]) if lines else {}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--code", type=Path, required=False, help="the earlier tree (a checkout): the baseline")
    parser.add_argument("--notes", type=int, default=10_000)
    parser.add_argument("--searches", type=int, default=120)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--child", choices=("build", "search"))
    parser.add_argument("--database")
    args = parser.parse_args()
    if args.child:
        child(args.child, args.database, args.notes, args.searches)
        return
    trees = {"after": ROOT, **({"before": args.code.resolve()} if args.code else {})}
    with tempfile.TemporaryDirectory() as tmp:
        stores = {name: str(Path(tmp) / f"{name}.db") for name in trees}
        for name, tree in trees.items():
            run(tree, "build", stores[name], args.notes, 0)
        results: dict[str, list[float]] = {name: [] for name in trees}
        for r in range(args.rounds):
            order = list(trees) if r % 2 == 0 else list(reversed(trees))
            for name in order:
                results[name].append(run(trees[name], "search", stores[name], args.notes, args.searches)["median_ms"])
                print(f"round {r + 1} {name}: {results[name][-1]:.2f} ms", file=sys.stderr)
    summary = {name: {"medians_ms": [round(x, 2) for x in got], "median_ms": round(statistics.median(got), 2)}
               for name, got in results.items()}
    print(json.dumps({"notes": args.notes, "searches_per_run": args.searches, "in_process": True, **summary}, indent=2))


if __name__ == "__main__":
    main()

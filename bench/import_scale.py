"""How long ``ollama-mcp import`` takes on a large ChatGPT export, and its peak memory.

    python bench/import_scale.py [--conversations 10000] [--turns 20] [--backend sqlite]

Generates a ChatGPT-format ``conversations.json`` (each conversation a tree with a regenerated
answer, so the current-branch walk is exercised; turns of about 200 characters), then runs the
installed ``ollama-mcp import`` on it into a new store with no Ollama listening, as a user would,
and reports the wall time and the process's peak RSS (from ``wait4``'s rusage). The target
(#54): 10,000 conversations and 200,000 turns in at most 2 minutes, peak RSS under 300 MB.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

WORDS = ("flight hotel budget deploy server test branch invoice garden tomato frost lisbon porto train "
         "meeting schedule review design schema index vector memory search token cache retry timeout "
         "window context summary project worktree commit release wheel bundle plugin").split()


def conversation(i: int, turns: int, rng: random.Random) -> dict[str, object]:
    def text() -> str:
        return " ".join(rng.choice(WORDS) for _ in range(30)).capitalize() + "."

    mapping: dict[str, dict[str, object]] = {"root": {"id": "root", "message": None, "parent": None, "children": []}}
    parent, t = "root", 1_600_000_000 + i * 3600
    for k in range(turns):
        nid = f"{i}-{k}"
        role = "user" if k % 2 == 0 else "assistant"
        mapping[nid] = {"id": nid, "parent": parent, "children": [], "message": {
            "id": nid, "author": {"role": role}, "create_time": t + k,
            "content": {"content_type": "text", "parts": [text()]}, "metadata": {}}}
        mapping[parent]["children"].append(nid)  # type: ignore[attr-defined]
        if k == 1:  # a regenerated answer beside the first one: off the current branch
            alt = f"{i}-alt"
            mapping[alt] = {"id": alt, "parent": parent, "children": [], "message": {
                "id": alt, "author": {"role": "assistant"}, "create_time": t + k,
                "content": {"content_type": "text", "parts": [text()]}, "metadata": {}}}
            mapping[parent]["children"].append(alt)  # type: ignore[attr-defined]
        parent = nid
    return {"title": f"Conversation {i}", "create_time": t, "update_time": t + turns, "mapping": mapping,
            "current_node": parent, "conversation_id": f"conv-{i}", "id": f"conv-{i}"}


def generate(path: Path, conversations: int, turns: int) -> None:
    rng = random.Random(7)
    with path.open("w") as out:
        out.write("[")
        for i in range(conversations):
            out.write(("," if i else "") + json.dumps(conversation(i, turns, rng)))
        out.write("]")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--conversations", type=int, default=10_000)
    parser.add_argument("--turns", type=int, default=20)
    parser.add_argument("--postgres-url", help="import into this PostgreSQL database instead of a new SQLite file")
    args = parser.parse_args()
    script = Path(sys.executable).parent / "ollama-mcp"
    with tempfile.TemporaryDirectory(prefix="import-scale-") as folder:
        export = Path(folder) / "conversations.json"
        generate(export, args.conversations, args.turns)
        db = args.postgres_url or str(Path(folder) / "memory.db")
        env = {"PATH": os.environ["PATH"], "HOME": folder, "OLLAMA_MCP_DB": db, "OLLAMA_HOST": "http://127.0.0.1:9"}
        started = time.monotonic()
        proc = subprocess.Popen([str(script), "import", str(export)], env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, cwd="/")
        _, status, usage = os.wait4(proc.pid, 0)
        elapsed = time.monotonic() - started
        out, err = proc.stdout.read(), proc.stderr.read()  # type: ignore[union-attr]
        if status != 0:
            print(err, file=sys.stderr)
            return 1
        size = export.stat().st_size
        print(out.strip())
        print(f"{args.conversations:,} conversations, {args.conversations * args.turns:,} turns, file "
              f"{size / 1e6:.0f} MB: {elapsed:.1f} s, peak RSS {usage.ru_maxrss / 1024:.0f} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())

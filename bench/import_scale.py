"""How long ``ollama-mcp import`` takes on a large ChatGPT export, and its peak memory.

    python bench/import_scale.py [--conversations 10000] [--turns 20] [--backend sqlite]
    python bench/import_scale.py --huge-turn 32     # one turn of 32 MB (#80 item 4)

Generates a ChatGPT-format ``conversations.json`` (each conversation a tree with a regenerated
answer, so the current-branch walk is exercised; turns of about 200 characters), then runs the
installed ``ollama-mcp import`` on it into a new store with no Ollama listening, as a user would,
and reports the wall time and the process's peak RSS (from ``wait4``'s rusage). The target
(#54): 10,000 conversations and 200,000 turns in at most 2 minutes, peak RSS under 300 MB.

``--drain`` then starts the installed server over MCP stdio with a real embedding model behind
the Ollama API (``bench/embed_server.py``, pinned to one thread) and times how long its
background takes to embed everything the import left pending (both vectors of every turn),
nobody asking meanwhile (#56 item 4: "how long the backlog of a 5,000-turn import takes"):

    python bench/import_scale.py --conversations 250 --turns 20 --drain

``--claude-code N`` instead writes a Claude Code projects folder of N sessions of about
``--session-kb`` each (as Claude Code's are: most of their bytes the files its tools read back,
which the import keeps as 300-character tool turns), and runs ``ollama-mcp import --claude-code``
on it, as a user would (#83: 5,000 sessions, 2 GB, memory bounded):

    python bench/import_scale.py --claude-code 5000 --session-kb 400
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sqlite3
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


async def drain(db: str, home: str, model: str) -> tuple[int, float, float]:
    """How many memories were pending when the server started, the seconds until none is, and
    the floor: the seconds the model itself takes for the same texts (a sample of 500 memories'
    two texts, encoded in-process in batches of 32 with nothing cached, scaled to all)."""
    import anyio  # noqa: PLC0415
    from mcp import Client, StdioServerParameters  # noqa: PLC0415

    from bench.embed_server import EmbedServer, MiniLM  # noqa: PLC0415
    from ollama_mcp.config import Settings  # noqa: PLC0415
    from ollama_mcp.storage.backends import open_backend  # noqa: PLC0415

    minilm = MiniLM(None, model)  # nothing cached: the drain pays for every text, as a user's does
    embedder = EmbedServer(minilm).start()
    env = {"PATH": os.environ["PATH"], "HOME": home, "OLLAMA_MCP_DB": db, "OLLAMA_HOST": embedder.url,
           "OLLAMA_MCP_EMBED_MODEL": model, "OLLAMA_MCP_CHAT_MODEL": "none", "OLLAMA_MCP_LOG_LEVEL": "WARNING"}
    store, _ = await open_backend(Settings.from_env(env))
    try:
        pending = await store.pending_count(model)
        server = StdioServerParameters(command=str(Path(sys.executable).parent / "ollama-mcp"), env=env, cwd="/")
        started = time.monotonic()
        async with Client(server, mode="legacy"):
            while await store.pending_count(model):
                await anyio.sleep(0.5)
            seconds = time.monotonic() - started
        embedder.stop()
        texts = [text for row in sqlite3.connect(db).execute(
            "SELECT m.content, x.context FROM memories m JOIN memory_contexts x ON x.seq = m.seq"
            " WHERE m.seq % (SELECT max(1, count(*) / 500) FROM memories) = 0"
        ) for text in row]
        began = time.perf_counter()
        minilm.model.encode(texts, batch_size=32, normalize_embeddings=True)
        floor = (time.perf_counter() - began) * pending * 2 / len(texts)
        return pending, seconds, floor
    finally:
        await store.aclose()
        embedder.stop()


def generate_huge(path: Path, megabytes: int) -> None:
    """One ChatGPT conversation whose question is ``megabytes`` MB of words (written a megabyte at
    a time) and whose answer is short: an export a parser must not build whole (#80 item 4)."""
    node = {"id": "m1", "parent": "root", "children": ["m2"], "message": {
        "id": "m1", "author": {"role": "user"}, "create_time": 1700000001,
        "content": {"content_type": "text", "parts": ["HUGE"]}}}
    chat = {"id": "c1", "title": "one huge turn", "create_time": 1700000000, "current_node": "m2", "mapping": {
        "root": {"id": "root", "message": None, "parent": None, "children": ["m1"]}, "m1": node,
        "m2": {"id": "m2", "parent": "m1", "children": [], "message": {
            "id": "m2", "author": {"role": "assistant"}, "create_time": 1700000002,
            "content": {"content_type": "text", "parts": ["ok"]}}}}}
    head, tail = json.dumps([chat]).split("HUGE")
    words = (" ".join(WORDS) + " ").encode()
    block = (words * ((1 << 20) // len(words) + 1))[: 1 << 20]
    with path.open("wb") as out:
        out.write(head.encode())
        for _ in range(megabytes):
            out.write(block)
        out.write(tail.encode())


def generate_claude_code(home: Path, sessions: int, session_kb: int) -> None:
    """``sessions`` transcripts under ``home/.claude/projects``, in 50 projects, each about ``session_kb``."""
    rng = random.Random(7)
    exchanges = 10
    read_back = max(session_kb * 1024 // exchanges - 600, 100)
    for s in range(sessions):
        folder = home / ".claude" / "projects" / f"-home-dana-project{s % 50}"
        folder.mkdir(parents=True, exist_ok=True)
        sid = f"{s:08d}-0000-4000-8000-{s:012d}"
        lines = []
        for e in range(exchanges):
            base = {"sessionId": sid, "cwd": f"/home/dana/project{s % 50}",
                    "timestamp": f"2026-10-{1 + e:02d}T10:00:00Z"}
            text = " ".join(rng.choice(WORDS) for _ in range(20))
            lines.append({**base, "type": "user", "uuid": f"{sid}-{e}-q", "message": {"role": "user", "content": text}})
            lines.append({**base, "type": "assistant", "uuid": f"{sid}-{e}-t", "message": {
                "role": "assistant", "content": [
                {"type": "text", "text": "Let me read it."},
                {"type": "tool_use", "id": f"t{e}", "name": "Read", "input": {"file_path": f"/src/f{e}.py"}}]}})
            body = (" ".join(rng.choice(WORDS) for _ in range(40)) + "\n") * (read_back // 300 + 1)
            lines.append({**base, "type": "user", "uuid": f"{sid}-{e}-r", "message": {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": f"t{e}", "content": body[:read_back]}]}})
            lines.append({**base, "type": "assistant", "uuid": f"{sid}-{e}-a",
                          "message": {"role": "assistant", "content": text.capitalize() + "."}})
        (folder / f"{sid}.jsonl").write_text("\n".join(json.dumps(line) for line in lines) + "\n")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--conversations", type=int, default=10_000)
    parser.add_argument("--turns", type=int, default=20)
    parser.add_argument("--postgres-url", help="import into this PostgreSQL database instead of a new SQLite file")
    parser.add_argument("--drain", action="store_true",
                        help="then time the server's background embedding of what the import left pending")
    parser.add_argument("--model", default="all-minilm", help="the embedding model --drain serves")
    parser.add_argument("--huge-turn", type=int, metavar="MB",
                        help="instead: one conversation whose one turn is this many MB")
    parser.add_argument("--claude-code", type=int, metavar="N", help="instead: a Claude Code folder of N sessions")
    parser.add_argument("--session-kb", type=int, default=400, help="with --claude-code: each session's size")
    args = parser.parse_args()
    script = Path(sys.executable).parent / "ollama-mcp"
    with tempfile.TemporaryDirectory(prefix="import-scale-") as folder:
        export = Path(folder) / "conversations.json"
        if args.claude_code:
            return claude_code_run(script, Path(folder), args.claude_code, args.session_kb)
        if args.huge_turn:
            generate_huge(export, args.huge_turn)
        else:
            generate(export, args.conversations, args.turns)
        db = args.postgres_url or str(Path(folder) / "memory.db")
        env = {"PATH": os.environ["PATH"], "HOME": folder, "OLLAMA_MCP_DB": db, "OLLAMA_HOST": "http://127.0.0.1:9"}
        timed = timed_import(script, [str(export)], env)
        if timed is None:
            return 1
        elapsed, peak_mb = timed
        size = export.stat().st_size
        what = (f"one turn of {args.huge_turn:,} MB" if args.huge_turn else
                f"{args.conversations:,} conversations, {args.conversations * args.turns:,} turns")
        print(f"{what}, file {size / 1e6:.0f} MB: {elapsed:.2f} s, peak RSS {peak_mb:.0f} MB")
        if args.drain:
            import anyio  # noqa: PLC0415

            if args.postgres_url:
                raise SystemExit("--drain measures a SQLite store")
            pending, seconds, floor = anyio.run(drain, db, folder, args.model)
            print(f"drain ({args.model}, one thread, nobody asking): {pending:,} memories pending, "
                  f"all embedded in {seconds:.1f} s from the server's start ({pending / seconds:.1f} memories/s); "
                  f"the model alone on the same texts (in process, batches of 32): {floor:.1f} s, "
                  f"ratio {seconds / floor:.2f}")
    return 0


def timed_import(script: Path, args: list[str], env: dict[str, str]) -> tuple[float, float] | None:
    """``ollama-mcp import ARGS`` as a user runs it, its output printed: its wall time and peak RSS
    in MB (from ``wait4``'s rusage); None (its stderr printed) when it failed."""
    started = time.monotonic()
    proc = subprocess.Popen([str(script), "import", *args], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, cwd="/")
    _, status, usage = os.wait4(proc.pid, 0)
    elapsed = time.monotonic() - started
    out, err = proc.stdout.read(), proc.stderr.read()  # type: ignore[union-attr]
    if status != 0:
        print(err, file=sys.stderr)
        return None
    print(out.strip())
    return elapsed, usage.ru_maxrss / 1024


def claude_code_run(script: Path, folder: Path, sessions: int, session_kb: int) -> int:
    started = time.monotonic()
    generate_claude_code(folder, sessions, session_kb)
    size = sum(f.stat().st_size for f in (folder / ".claude" / "projects").rglob("*.jsonl"))
    print(f"generated {sessions:,} sessions, {size / 1e9:.2f} GB, in {time.monotonic() - started:.0f} s")
    env = {"PATH": os.environ["PATH"], "HOME": str(folder), "OLLAMA_MCP_DB": str(folder / "memory.db"),
           "OLLAMA_HOST": "http://127.0.0.1:9"}
    timed = timed_import(script, ["--claude-code"], env)
    if timed is None:
        return 1
    elapsed, peak_mb = timed
    print(f"import --claude-code of {sessions:,} sessions, {size / 1e9:.2f} GB: {elapsed:.1f} s "
          f"({size / 1e6 / elapsed:.0f} MB/s), peak RSS {peak_mb:.0f} MB, "
          f"store {(folder / 'memory.db').stat().st_size / 1e6:.0f} MB")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    sys.exit(main())

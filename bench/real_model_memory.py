"""Summaries and facts with a real small model, through MCP with the shipped prompts (#84 item 2).

Each session of a dev LoCoMo conversation becomes a conversation of its own that asks for facts
(``init_conversation`` with ``metadata.facts``), its turns recorded with ``add_messages`` as
``bench/locomo.py --path chats`` records them, then ``end_conversation``: the server's background
jobs write the summary and extract the facts with the chat model, as for a user. Measured per
session, against what LoCoMo ships for it:

- summary: the share of the gold session summary's sentences present in ours, JSON validity (a job
  that failed on the model's reply), its length, the seconds until it was stored;
- facts: recall (the share of LoCoMo's observations present among our facts) and precision (the
  share of our facts present among the observations), whether any fact was found at all in a
  session whose observations hold some, and how many segments the model was asked twice (the
  facts calls the server counted, ``chat_calls``, less one a segment).

A sentence is present when its key words are (at least half of its content words, stemmed, in
one sentence of the other side) or when a sentence of the other side is MiniLM-close to it
(cosine >= 0.7, the embedding model the server uses).

    python bench/local_model.py serve --port 18600 &
    OMP_NUM_THREADS=1 python bench/real_model_memory.py --host http://127.0.0.1:18600 \\
        --model qwen2.5-coder:1.5b --sessions 10
"""

from __future__ import annotations

import argparse
import json
import re
import sqlite3
import statistics
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

import anyio
import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench import locomo  # noqa: E402
from bench.real_model_agent import tokens  # noqa: E402

STOP = set("i me my we our you your he she his her it its they them their is are was were be been being have has "
           "had do does did to of in on at by for with about as into from that this these those who which what "
           "when where how and or but so also very just".split())
CLOSE = 0.7


def sentences(text: str) -> list[str]:
    return [s.strip() for s in re.split(r"(?<=[.!?])\s+|\n+(?:- )?", text) if len(s.strip()) > 3]


def words(text: str) -> set[str]:
    return {w for w in tokens(text) if w not in STOP}


def embed(host: str, texts: list[str]) -> np.ndarray:
    if not texts:
        return np.zeros((0, 384))
    request = urllib.request.Request(f"{host}/api/embed", json.dumps({"model": "all-minilm", "input": texts}).encode(),
                                     {"content-type": "application/json"})
    with urllib.request.urlopen(request, timeout=600) as reply:
        vectors = np.array(json.load(reply)["embeddings"], dtype=float)
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def present(host: str, wanted: list[str], said: list[str]) -> list[bool]:
    """For each wanted sentence: whether one of ``said`` states it (key words, or MiniLM-close)."""
    if not wanted or not said:
        return [False] * len(wanted)
    close = embed(host, wanted) @ embed(host, said).T
    found = []
    for i, sentence in enumerate(wanted):
        key = words(sentence)
        by_words = any(key and len(key & words(s)) / len(key) >= 0.5 for s in said)
        found.append(bool(by_words or close[i].max() >= CLOSE))
    return found


def gold(sample_id: str) -> tuple[dict[int, str], dict[int, list[str]]]:
    for item in json.loads(locomo.DEFAULT_DATA.read_text(encoding="utf-8")):
        if item["sample_id"] == sample_id:
            summaries = {int(re.search(r"\d+", k).group()): v for k, v in item["session_summary"].items()}  # type: ignore[union-attr]
            observed = {int(re.search(r"\d+", k).group()): [o[0] for person in v.values() for o in person]  # type: ignore[union-attr]
                        for k, v in item["observation"].items()}
            return summaries, observed
    raise SystemExit(f"no sample {sample_id}")


async def run(args: argparse.Namespace) -> dict[str, Any]:
    sample = next(s for s in locomo.load(locomo.DEFAULT_DATA) if s.sample_id == args.sample)
    summaries, observed = gold(sample.sample_id)
    sessions: dict[int, list[locomo.Turn]] = {}
    for turn in sample.turns:
        sessions.setdefault(int(turn.dia_id.split(":")[0][1:]), []).append(turn)
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as folder:
        db = Path(folder) / "memory.db"
        env = {"PATH": "/usr/bin:/bin", "HOME": folder, "OLLAMA_HOST": args.host, "PYTHONPATH": str(ROOT),
               "OLLAMA_MCP_DB": str(db), "OLLAMA_MCP_EMBED_MODEL": "all-minilm",
               "OLLAMA_MCP_CHAT_MODEL": args.model, "OLLAMA_MCP_CHAT_CALLS_PER_HOUR": "10000",
               "OLLAMA_MCP_CHAT_TIMEOUT": str(args.chat_timeout), "OLLAMA_MCP_LOG_LEVEL": "WARNING"}
        async with locomo.mcp_driver(env, {}) as driver:
            call = driver._call  # type: ignore[attr-defined]
            for number in sorted(sessions)[: args.sessions]:
                conv = (await call("init_conversation", name=f"session {number}", metadata={"facts": True}))[
                    "conversation_id"]
                await call("add_messages", conversation_id=conv, messages=locomo.messages(sessions[number]))
                with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as con:
                    calls_before = con.execute("SELECT coalesce(max(id), 0) FROM chat_calls").fetchone()[0]
                started = time.monotonic()
                await call("end_conversation", conversation_id=conv)
                jobs = await _settled(db, conv, args.wait)
                took = round(time.monotonic() - started, 1)
                with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as con:
                    summary = [c for (c,) in con.execute(
                        "SELECT content FROM memories WHERE conversation_id = ? AND kind = 'summary'", (conv,))]
                    facts = [c for (c,) in con.execute(
                        "SELECT content FROM memories WHERE conversation_id = ? AND kind = 'fact'", (conv,))]
                    facts_calls = con.execute("SELECT count(*) FROM chat_calls WHERE kind = 'facts' AND id > ?",
                                              (calls_before,)).fetchone()[0]
                ours = sentences(summary[0]) if summary else []
                wanted = sentences(summaries.get(number, ""))
                got = present(args.host, wanted, ours)
                observations = observed.get(number, [])
                recalled = present(args.host, observations, facts)
                precise = present(args.host, facts, observations)
                rows.append({
                    "session": number, "turns": len(sessions[number]), "seconds": took, "jobs": jobs,
                    "summary_chars": len(summary[0]) if summary else 0,
                    "summary_recall": round(sum(got) / len(got), 3) if got else None,
                    "observations": len(observations), "facts": len(facts),
                    # one call a segment, and one more for each segment the model listed no fact for
                    "facts_segments": segments(sessions[number]), "facts_calls": facts_calls,
                    "fact_recall": round(sum(recalled) / len(recalled), 3) if recalled else None,
                    "fact_precision": round(sum(precise) / len(precise), 3) if precise else None,
                    "summary": summary[0] if summary else None, "fact_texts": facts,
                })
                print(json.dumps({k: v for k, v in rows[-1].items() if k not in ("summary", "fact_texts")}),
                      file=sys.stderr, flush=True)
    return {"model": args.model, "sample": args.sample, "sessions": len(rows), **_totals(rows), "rows": rows}


def segments(turns: list[locomo.Turn]) -> int:
    """How many requests the facts job makes of a session's turns, each asked once."""
    from ollama_mcp.domain import Memory  # noqa: PLC0415
    from ollama_mcp.services.facts import SEGMENT_CHARS  # noqa: PLC0415
    from ollama_mcp.services.summaries import groups  # noqa: PLC0415

    items = [Memory(id=str(n), seq=n, conversation_id="", kind="message", content=t.text, tags=(), metadata={},
                    created_at=t.occurred_at, role="user", actor=t.speaker) for n, t in enumerate(turns, 1)]
    return len(groups(items, SEGMENT_CHARS))


async def _settled(db: Path, conv: str, wait: float) -> dict[str, Any]:
    """The conversation's summary and facts jobs once each has ended or waits to be tried again
    (or ``wait`` passed): each one's state, attempts and last error. One job waiting for its retry
    does not end the wait for the other still running."""
    deadline = time.monotonic() + wait
    while True:
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as con:
            jobs = {kind: {"state": state, "attempts": attempts, "error": error} for kind, state, attempts, error in
                    con.execute("SELECT kind, state, attempts, last_error FROM jobs WHERE conversation_id = ? "
                                "AND kind IN ('summarize', 'facts') ORDER BY id", (conv,))}
        ended = len(jobs) == 2 and all(
            j["state"] in ("done", "failed") or (j["state"] == "queued" and j["attempts"]) for j in jobs.values())
        if ended or time.monotonic() > deadline:
            return jobs
        await anyio.sleep(1)


def _totals(rows: list[dict[str, Any]]) -> dict[str, Any]:
    def mean(key: str) -> float | None:
        found = [r[key] for r in rows if r[key] is not None]
        return round(statistics.mean(found), 3) if found else None

    failed = [r["session"] for r in rows if any(j["state"] != "done" for j in r["jobs"].values())]
    return {
        "summary_recall": mean("summary_recall"), "fact_recall": mean("fact_recall"),
        "fact_precision": mean("fact_precision"),
        "sessions_with_observations_and_no_fact": [r["session"] for r in rows if r["observations"] and not r["facts"]],
        "segments_asked_again": sum(r["facts_calls"] - r["facts_segments"] for r in rows),
        "sessions_whose_jobs_did_not_finish": failed,
        "summary_chars_median": statistics.median(r["summary_chars"] for r in rows) if rows else None,
        "seconds_median": statistics.median(r["seconds"] for r in rows) if rows else None,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--host", required=True, help="the Ollama API serving the chat model and all-minilm")
    parser.add_argument("--model", default="qwen2.5-coder:1.5b")
    parser.add_argument("--sample", default="conv-26")
    parser.add_argument("--sessions", type=int, default=10, help="the conversation's first N sessions")
    parser.add_argument("--chat-timeout", type=float, default=120.0, help="OLLAMA_MCP_CHAT_TIMEOUT (the default)")
    parser.add_argument("--wait", type=float, default=900.0, help="seconds a session's jobs may take")
    parser.add_argument("--json", type=Path, help="write every session's row here too")
    args = parser.parse_args()
    report = anyio.run(run, args)
    if args.json:
        args.json.write_text(json.dumps(report, indent=2))
    print(json.dumps({k: v for k, v in report.items() if k != "rows"}, indent=2))


if __name__ == "__main__":
    main()

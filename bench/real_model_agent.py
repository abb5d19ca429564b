"""``ask_agent`` with a real small model, through MCP (#84 item 2, the agent's part): does it search
memory, is its answer right, and does it say so when memory holds nothing?

Each dev LoCoMo conversation asked is recorded as ``bench/locomo.py --path chats`` records it (each
session a conversation of turns, through ``add_messages``), into a store of its own; then
questions of categories 1-4 and of category 5 (adversarial: about something that did not happen)
go to ``ask_agent`` (scope all), as a client asks them. Per question: whether the agent called a
search tool, the answer's token F1 against LoCoMo's answer (the dataset's own measure: lower-case,
punctuation and articles out, Porter stems), and for category 5 whether it abstained (said memory
holds nothing) rather than answer. The model is whatever the Ollama API at ``--host`` serves:
``bench/local_model.py serve`` for the packaged Qwen2.5-Coder models.

    python bench/local_model.py serve --port 18600 &
    OMP_NUM_THREADS=1 python bench/real_model_agent.py --host http://127.0.0.1:18600 \\
        --model qwen2.5-coder:1.5b --samples 1 --per-category 5 --adversarial 10
"""

from __future__ import annotations

import argparse
import json
import random
import re
import statistics
import string
import sys
import tempfile
import time
import urllib.request
from collections import Counter
from pathlib import Path
from typing import Any

import anyio
import snowballstemmer

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench import locomo  # noqa: E402

ABSTAINED = re.compile(
    r"\b(no (information|record|mention|memor(y|ies)|details?)"
    r"|not (mentioned|found|stored|recorded|in (the |my )?memor)"
    r"|(do|does|did)( not|n't) (know|have|mention)|nothing (about|on|in)|holds nothing|cannot find|can't find"
    r"|couldn't find|could not find|unable to find|no relevant)", re.IGNORECASE)
_STEM = snowballstemmer.stemmer("porter")


def tokens(text: str) -> list[str]:
    text = "".join(c for c in text.lower() if c not in string.punctuation)
    return _STEM.stemWords([w for w in text.split() if w not in ("a", "an", "the", "and")])


def f1(prediction: str, gold: str) -> float:
    said, wanted = tokens(prediction), tokens(gold)
    common = sum((Counter(said) & Counter(wanted)).values())
    if not said or not wanted or not common:
        return 0.0
    precision, recall = common / len(said), common / len(wanted)
    return 2 * precision * recall / (precision + recall)


def answers(path: Path) -> dict[tuple[str, str], tuple[int, str]]:
    """(sample, question) -> (category, LoCoMo's answer; for category 5 its adversarial answer)."""
    found = {}
    for item in json.loads(path.read_text(encoding="utf-8")):
        for qa in item["qa"]:
            found[(item["sample_id"], qa["question"])] = (int(qa["category"]),
                                                           str(qa.get("answer", qa.get("adversarial_answer", ""))))
    return found


async def run(args: argparse.Namespace) -> dict[str, Any]:
    locomo.PATH = "chats"
    samples = locomo.load(locomo.DEFAULT_DATA)
    samples = [s for s in samples if s.sample_id == args.sample] if args.sample else samples[: args.samples]
    gold = answers(locomo.DEFAULT_DATA)
    rng = random.Random(args.seed)
    rows: list[dict[str, Any]] = []
    for sample in samples:
        with tempfile.TemporaryDirectory() as folder:
            env = {"PATH": "/usr/bin:/bin", "HOME": folder, "OLLAMA_HOST": args.host,
                   "PYTHONPATH": str(ROOT),  # the server of this checkout (a worktree measures its own commit)
                   "OLLAMA_MCP_DB": str(Path(folder) / "memory.db"), "OLLAMA_MCP_EMBED_MODEL": "all-minilm",
                   "OLLAMA_MCP_CHAT_MODEL": args.model, "OLLAMA_MCP_CHAT_CALLS_PER_HOUR": "0",
                   "OLLAMA_MCP_LOG_LEVEL": "WARNING"}
            async with locomo.mcp_driver(env, {}) as driver:
                await locomo.store_all(driver, [sample], progress=True)
                chosen = [q for c in (1, 2, 3, 4) for q in rng.sample(
                    [q for q in sample.questions if q.category == c],
                    min(args.per_category, sum(q.category == c for q in sample.questions)))]
                adversarial = [q for q in sample.questions if q.category == 5]
                chosen += rng.sample(adversarial, min(args.adversarial, len(adversarial)))
                for number, question in enumerate(chosen, start=1):
                    # Each question in a new conversation, as a user asks in a new chat (asked in
                    # one, each would see the earlier questions and answers as its history)...
                    asking = await driver.init(f"question {number}")
                    started = time.monotonic()
                    if args.mode == "context":
                        reply, error = await _context_then_answer(driver, args, asking, question.text), False
                    else:
                        result = await driver.client.call_tool("ask_agent", {"query": question.text, "scope": "all"})  # type: ignore[attr-defined]
                        reply, error = result.structured_content or {}, bool(result.is_error)
                        if error:
                            reply = {"response": result.content[0].text if result.content else ""}  # type: ignore[union-attr]
                    took = time.monotonic() - started
                    # and gone after it: the question and answer it records would be found by the next.
                    await driver.client.call_tool("delete_conversation", {"conversation_id": asking})  # type: ignore[attr-defined]
                    said = str(reply.get("response") or "")
                    category, answer = gold[(sample.sample_id, question.text)]
                    rows.append({
                        "sample": sample.sample_id, "category": category, "question": question.text,
                        "answer": answer, "said": said, "error": error,
                        "searched": any(t.startswith("search") for t in reply.get("tools_used") or []),
                        "searches": sum(t.startswith("search") for t in reply.get("tools_used") or []),
                        "tools": reply.get("tools_used") or [], "note": reply.get("note"),
                        "f1": f1(said, answer), "abstained": bool(ABSTAINED.search(said)), "seconds": round(took, 1),
                    })
                    print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
    answerable = [r for r in rows if r["category"] != 5]
    adversarial_rows = [r for r in rows if r["category"] == 5]
    return {
        "model": args.model, "mode": args.mode, "questions": len(rows),
        "answerable": {"n": len(answerable), "searched": _share(answerable, "searched"),
                       "f1": round(statistics.mean(r["f1"] for r in answerable), 3) if answerable else None},
        "adversarial": {"n": len(adversarial_rows), "abstained": _share(adversarial_rows, "abstained"),
                        "searched": _share(adversarial_rows, "searched")},
        "errors": sum(r["error"] for r in rows),
        "cut_by_deadline": sum("Stopped after" in (r["note"] or "") for r in rows),
        "seconds_median": statistics.median(r["seconds"] for r in rows) if rows else None,
        "rows": rows,
    }


async def _context_then_answer(driver: Any, args: argparse.Namespace, asking: str, question: str) -> dict[str, Any]:
    """build_context (the MCP prompt: recalled memories from every conversation) and one call of the
    model with it, the options the product sends, no tools: what the agent's loop is measured against."""
    built = await driver.client.get_prompt("build_context", {"conversation_id": asking, "query": question})
    context = [{"role": m.role, "content": m.content.text} for m in built.messages]
    messages = [{"role": "system", "content": (
        "Answer the user's question briefly, from the memories below only. When they do not contain the answer, "
        'reply "Memory holds nothing on this." and nothing else.')}, *context, {"role": "user", "content": question}]
    body = {"model": args.model, "messages": messages, "stream": False,
            "options": {"temperature": 0.0, "repeat_penalty": 1.0, "num_predict": 300, "num_ctx": 8192}}
    request = urllib.request.Request(f"{args.host}/api/chat", json.dumps(body).encode(),
                                     {"content-type": "application/json"})
    reply = await anyio.to_thread.run_sync(lambda: json.load(urllib.request.urlopen(request, timeout=600)))
    return {"response": reply["message"]["content"], "tools_used": [], "note": None}


def _share(rows: list[dict[str, Any]], key: str) -> float | None:
    return round(sum(bool(r[key]) for r in rows) / len(rows), 3) if rows else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--host", required=True, help="the Ollama API serving the chat model and all-minilm")
    parser.add_argument("--model", default="qwen2.5-coder:1.5b")
    parser.add_argument("--samples", type=int, default=1, help="dev conversations asked (each in its own store)")
    parser.add_argument("--sample", help="the one dev conversation asked, by id (conv-41): one the design never saw")
    parser.add_argument("--per-category", type=int, default=5, help="questions of each category 1-4")
    parser.add_argument("--adversarial", type=int, default=10, help="category-5 questions")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--mode", choices=("agent", "context"), default="agent",
                        help="agent: ask_agent; context: the build_context prompt and one model call, no tools")
    parser.add_argument("--json", type=Path, help="write every question's row here too")
    args = parser.parse_args()
    report = anyio.run(run, args)
    if args.json:
        args.json.write_text(json.dumps(report, indent=2))
    print(json.dumps({k: v for k, v in report.items() if k != "rows"}, indent=2))


if __name__ == "__main__":
    main()

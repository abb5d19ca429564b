"""What replacing secrets costs a write, and what it takes that is no secret (#83).

1. False positives: every turn of the dev LoCoMo conversations (ordinary chat, no secrets) through
   ``redaction.redact``: how many it changes, and what it took them for. And, as a control, a set
   of secrets of each kind, each in a sentence: how many it finds.
2. In process (labelled so): ``redact`` per LoCoMo turn, median and p95 µs, and per KB; and each
   hostile 200 KB text (one repeated token prefix, which made some patterns backtrack over the
   whole line), the slowest of them.
3. Through MCP, the product as shipped: the real ``ollama-mcp`` over stdio with all-MiniLM-L6-v2
   behind Ollama's API (``bench/embed_server.py``, its own process, threads pinned), storing LoCoMo
   turns with ``store_memory``, redaction on (the default) and off (``OLLAMA_MCP_REDACT=off``),
   alternated A B A B, each round in a fresh process on a fresh store: the p50 of each and their
   difference, beside the floor (one ``/api/embed`` call of such a text).

    OMP_NUM_THREADS=1 python bench/redaction_cost.py --rounds 4 --stores 150
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.latency import percentile  # noqa: E402
from bench.mcp_stdio import Server, start_minilm  # noqa: E402
from ollama_mcp import redaction  # noqa: E402

DATA = ROOT.parent / "shared" / "bench-data" / "locomo-dev.json"
CONTROL = [  # one of each kind the README names, in a sentence (all fake)
    "my key is AKIAZ3MPL5QRSTUV7WXY, use it",
    "push with ghp_R2x9Kq7Lm4Np8Vt3Wz6Yb1Cd5Fg0Hj2Ks7Qa please",
    "the db is postgresql://app:Tr0ub4dor!x9@db.internal:5432/prod",
    "ANTHROPIC_API_KEY=sk-ant-api03-Xy9_aB3cD4eF5gH6iJ7kL8mN9oP0qR1sT2uV3wX4yZ5aB6cD7eF8gH9iJ0kL1mN2oP3q-Ab",
    "OPENAI_API_KEY=sk-proj-Abc123def456ghi789jkl012mno345pqr678stu901vwxYZ",
    "Bearer eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.SflKxwRJSMeKKF2QT4fwpMeJf36P",
    "key:\n-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ\n"
    "-----END OPENSSH PRIVATE KEY-----",
    "DB_PASSWORD=hunter2horse!",
    "slack xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx in the channel",
    "stripe sk_live_4eC39HqLyjWDarjtT1zdp7dc for billing",
    "GOOGLE_API_KEY=AIzaSyDaGmWKa4JsXZ-HjGw7ISLn_3namBGewQe",
    "hf_AbCdEfGhIjKlMnOpQrStUvWxYz01234567 is my Hugging Face token",
    'config: {"client_secret": "9f8e7d6c5b4a39281706f5e4d3c2b1a0"}',
    "npm: //registry.npmjs.org/:_authToken=npm_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789",
]


def turns() -> list[str]:
    samples = json.loads(DATA.read_text())
    return [t.get("text", "") for s in samples for key, session in s["conversation"].items()
            if key.startswith("session_") and isinstance(session, list) for t in session]


def false_positives(texts: list[str]) -> dict[str, Any]:
    changed = [(text, done) for text in texts if (done := redaction.redact(text)).found]
    kinds: Counter[str] = Counter()
    for _, done in changed:
        kinds.update(dict(done.found))
    found = sum(1 for text in CONTROL if redaction.redact(text).count == 1)
    return {"turns": len(texts), "changed": len(changed), "rate": len(changed) / len(texts), "kinds": dict(kinds),
            "examples": [done.text[:200] for _, done in changed[:10]], "control_found": f"{found}/{len(CONTROL)}"}


def in_process(texts: list[str]) -> dict[str, Any]:
    redaction.redact("warm the detector up")
    took = []
    for text in texts:
        started = time.perf_counter_ns()
        redaction.redact(text)
        took.append((time.perf_counter_ns() - started) / 1000)
    chars = sum(map(len, texts))
    return {"median_us": round(statistics.median(took), 1), "p95_us": round(percentile(took, 95), 1),
            "us_per_kb": round(sum(took) / chars * 1000, 1), "mean_chars": round(chars / len(texts))}


def hostile() -> dict[str, Any]:
    """``redact`` of 200 KB texts built to make detectors backtrack or widen over the whole line."""
    import base64  # noqa: PLC0415

    cases = {
        "one word": "a" * 200_000, "prose": "lorem ipsum dolor sit amet " * 7_400,
        "base64": base64.b64encode(bytes(range(256)) * 586).decode()[:200_000],
        "password=": "password=" * 22_000, "api_key: ": "api_key: " * 22_000, "http://a:": "http://a:" * 22_000,
        "AKIA": "AKIA" * 50_000, "sk-": "sk-" * 66_000, "eyJ.": "eyJ." * 50_000, "ghp_": "ghp_" * 50_000,
        "xoxb-1-": "xoxb-1-" * 28_000, "PEM headers": "-----BEGIN PRIVATE KEY-----\n" * 7_000,
    }
    took = {}
    for name, text in cases.items():
        started = time.perf_counter()
        redaction.redact(text)
        took[name] = round((time.perf_counter() - started) * 1000, 1)
    return {"ms": took, "slowest_ms": max(took.values())}


def through_mcp(host: str, texts: list[str], rounds: int, stores: int) -> dict[str, Any]:
    results: dict[str, list[float]] = {"on": [], "off": []}
    medians: dict[str, list[float]] = {"on": [], "off": []}
    for round_ in range(rounds):
        for mode in ("on", "off") if round_ % 2 == 0 else ("off", "on"):
            with tempfile.TemporaryDirectory() as folder:
                env = {"PATH": os.environ["PATH"], "HOME": folder, "OLLAMA_HOST": host,
                       "OLLAMA_MCP_DB": str(Path(folder) / "memory.db"), "OLLAMA_MCP_EMBED_MODEL": "all-minilm",
                       "OLLAMA_MCP_REDACT": mode, "OLLAMA_MCP_LOG_LEVEL": "WARNING"}
                server = Server(env)
                server.initialize()
                server.call("store_memory", content="warm up the server and the detector")
                took = []
                for text in texts[round_ * stores:(round_ + 1) * stores]:
                    ms, _ = server.timed("store_memory", content=text)
                    took.append(ms)
                server.close()
            results[mode] += took
            medians[mode].append(statistics.median(took))
    on, off = statistics.median(results["on"]), statistics.median(results["off"])
    return {"rounds": rounds, "stores_a_round": stores, "p50_on_ms": round(on, 2), "p50_off_ms": round(off, 2),
            "difference_ms": round(on - off, 2), "round_medians_on": [round(x, 2) for x in medians["on"]],
            "round_medians_off": [round(x, 2) for x in medians["off"]]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--stores", type=int, default=150, help="store_memory calls a round")
    parser.add_argument("--no-mcp", action="store_true", help="only the false positives and the in-process cost")
    args = parser.parse_args()
    texts = [t for t in turns() if t.strip()]
    report: dict[str, Any] = {"false_positives": false_positives(texts), "in_process": in_process(texts),
                              "hostile_200kb": hostile()}
    if not args.no_mcp:
        proc, host = start_minilm()
        try:
            import random  # noqa: PLC0415

            from bench.mcp_stdio import embed_floor  # noqa: PLC0415

            report["embed_floor_ms"] = round(embed_floor(host, random.Random(1), 50), 2)
            report["through_mcp"] = through_mcp(host, texts, args.rounds, args.stores)
        finally:
            proc.kill()
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()

"""Retrieval quality on LoCoMo: record every turn as a message, ask every question, score the ranks.

Drives the product through the same service API the MCP tools call (default), or through the
real ``ollama-mcp`` process over MCP stdio (``--mcp``), against an Ollama-compatible server with
a real embedding model (``bench/embed_server.py``, started here unless ``--ollama-host`` is
given). Scoring follows ../shared/bench-data/README.md: recall@1/5/10 and MRR of the turns named
in ``evidence``, per category; the headline is over the questions of categories 1-4. S@10 is
session-level recall: a question hits when a top-10 turn is in one of its evidence sessions.

    python bench/locomo.py                       # service API, prints the table
    python bench/locomo.py --mcp                 # the same through MCP stdio
    python bench/locomo.py --tune keyword_weight=1.5 --json out.json
    python bench/locomo.py --grid time_weight=0,0.5,1,2   # rotated folds of dev over a grid
    python bench/locomo.py --questions q.json    # each question's first evidence rank, to compare runs

Each session's turns are recorded in order (``add_messages``), each turn with its speaker as
``actor`` and its session's date as ``occurred_at`` (the date and the speaker also stay in its
text), and searched with ``include_messages``; every question is asked with the conversation's
last session date as the reference time ("last year" in a question is the year before the
conversation's end, not before today).

The rotated protocol (``--grid``): every configuration of the grid ranks every question once;
then for each of the five conversations, the configuration best on the other four (headline
R@10, then MRR, among those keeping adversarial R@10 at 0.85 there) is scored on it. The
headline figure is the mean over the five folds (per category), beside the figure of the
configuration best on all five. These are "rotated folds of dev", not held-out figures: the rules
were written against these five conversations (bench/README.md).
"""

from __future__ import annotations

import argparse
import itertools
import json
import re
import statistics
import sys
import tempfile
import time
import unicodedata
from collections import defaultdict
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field, fields, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

import anyio

from ollama_mcp.inputs.conversations import new_conversation
from ollama_mcp.inputs.memories import note as new_note
from ollama_mcp.inputs.turns import parse_turns

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_DATA = ROOT.parent / "shared" / "bench-data" / "locomo-dev.json"
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}
HEADLINE = (1, 2, 3, 4)
_EVIDENCE = re.compile(r"D(\d+):0*(\d+)")


# -- the dataset ---------------------------------------------------------------------------------


@dataclass
class Turn:
    dia_id: str
    text: str
    occurred_at: str  # the session's date, ISO 8601
    speaker: str


@dataclass
class Question:
    text: str
    category: int
    evidence: set[str]


@dataclass
class Sample:
    sample_id: str
    turns: list[Turn]
    questions: list[Question]
    skipped: int = 0

    @property
    def reference_time(self) -> str:
        """When the questions are asked: at the conversation's last session."""
        return max(t.occurred_at for t in self.turns)


def session_time(raw: str) -> str:
    """ "1:56 pm on 8 May, 2023" as ISO 8601 (UTC)."""
    moment = datetime.strptime(" ".join(raw.replace(",", "").split()), "%I:%M %p on %d %B %Y")
    return moment.replace(tzinfo=UTC).isoformat()


def load(path: Path) -> list[Sample]:
    samples = []
    for item in json.loads(path.read_text(encoding="utf-8")):
        conv = item["conversation"]
        turns: list[Turn] = []
        sessions = sorted(
            (int(k.split("_")[1]), k) for k in conv if re.fullmatch(r"session_\d+", k) and conv[k]
        )
        for _, key in sessions:
            date = conv.get(f"{key}_date_time", "")
            for turn in conv[key]:
                text = f"[{date}] {turn['speaker']}: {turn['text']}"
                if turn.get("blip_caption"):
                    text += f" [shares {turn['blip_caption']}]"
                turns.append(Turn(_normal_id(turn["dia_id"]), text, session_time(date), turn["speaker"]))
        known = {t.dia_id for t in turns}
        sample = Sample(item["sample_id"], turns, [])
        for qa in item["qa"]:
            gold = {f"D{s}:{t}" for raw in qa.get("evidence", []) for s, t in _EVIDENCE.findall(str(raw))} & known
            if not gold:
                sample.skipped += 1
                continue
            sample.questions.append(Question(qa["question"], int(qa["category"]), gold))
        samples.append(sample)
    return samples


def words(text: str) -> str:
    """A text's words, lower-cased: two hits with the same are the same sentence (as folds.words
    says it; written here too so that --code can run a tree without folds)."""
    return " ".join(re.findall(r"\w+", unicodedata.normalize("NFKC", text).casefold()))


def _normal_id(raw: str) -> str:
    found = _EVIDENCE.findall(raw)
    return f"D{found[0][0]}:{found[0][1]}" if found else raw


# -- drivers: the service API, or MCP over stdio ------------------------------------------------------


Found = list[tuple[list[str], str]]  # each hit: its memory id and those folded into it; its text


class Driver(Protocol):
    async def init(self, name: str) -> str: ...
    async def record(self, conversation_id: str, turns: list[Turn]) -> list[str]: ...
    async def note(self, conversation_id: str, turn: Turn) -> str: ...
    async def end(self, conversation_id: str) -> None: ...
    async def search(self, conversation_id: str | None, query: str, k: int, reference_time: str | None) -> Found: ...
    async def pending(self) -> int: ...
    def tune(self, tuning: dict[str, Any]) -> None: ...


# --path: how the conversations are recorded and asked (#79).
#   conversation: each sample one conversation of turns (add_messages), asked with search_memories in it;
#   chats: each session its own conversation (every one but the last ended), asked with the default
#          search_all_conversations(query, top_k=10), each sample in a store of its own;
#   notes: each turn a store_memory note of one conversation, asked with search_memories;
#   both: chats, and every turn also stored as a note of its session.
PATH = "conversation"
CODE: Path | None = None  # --code DIR: run that tree's server (MCP), to compare with today's code
# --legacy: the code before #79 searched turns only when asked (include_messages: true).
LEGACY = False


# --no-dates: the client passes no occurred_at and no reference_time (every turn happened when it was
# stored, questions are asked "now"), as a client that knows nothing of time does (#56 item 5).
DATED = True


def messages(turns: list[Turn]) -> list[dict[str, str]]:
    """A session's turns as add_messages' turns: two people talking, each a user with a name."""
    return [{"role": "user", "content": t.text, "actor": t.speaker,
             **({"occurred_at": t.occurred_at} if DATED else {})} for t in turns]


async def settle(driver: Driver) -> None:
    """Wait until the server's background embedding has caught up: a store waits for its memory's
    own vector only, the in-context one follows in the background (seconds later; the questions
    of a user come long after the turns they ask about). The bound is an hour: all-mpnet-base-v2
    on one CPU thread embeds the dev data's 3,000 contexts in about 25 minutes when nothing is
    cached."""
    with anyio.fail_after(3600):
        while await driver.pending():
            await anyio.sleep(0.1)


@asynccontextmanager
async def service_driver(env: dict[str, str], tuning: dict[str, Any]) -> AsyncIterator[Driver]:
    from ollama_mcp.app import open_app  # noqa: PLC0415
    from ollama_mcp.config import Settings  # noqa: PLC0415
    from ollama_mcp.inputs.search import search_request  # noqa: PLC0415
    from ollama_mcp.storage.ranking import SearchTuning  # noqa: PLC0415

    class ServiceDriver:
        def __init__(self, app: Any) -> None:
            self.conversations, self.memories, self.recall = app.conversations, app.memories, app.recall
            self.transcript = app.transcript
            self.indexer = app.indexer

        async def init(self, name: str) -> str:
            return (await self.conversations.start(new_conversation(name))).id

        async def record(self, conversation_id: str, turns: list[Turn]) -> list[str]:
            added, _ = await self.transcript.add_messages(conversation_id, parse_turns("messages", messages(turns)))
            return [m.id for m in added]

        async def note(self, conversation_id: str, turn: Turn) -> str:
            stored = await self.memories.store(new_note(turn.text, conversation_id, occurred_at=turn.occurred_at))
            return str(stored.memory.id)

        async def end(self, conversation_id: str) -> None:
            await self.conversations.end(conversation_id)

        async def search(self, conversation_id: str | None, query: str, k: int, reference_time: str | None) -> Found:
            legacy = {"include_messages": True} if LEGACY else {}
            request = search_request(
                query, conversation_id, top_k=k, reference_time=reference_time, everywhere=conversation_id is None,
                **legacy,
            )
            outcome = await self.recall.search(request)
            if outcome.mode != "hybrid":
                raise SystemExit(f"search fell back to {outcome.mode}: {outcome.notice}")
            return [([hit.memory.id, *(m.id for m in getattr(hit, "also", ()))], hit.memory.content)
                    for hit in outcome.hits]

        async def pending(self) -> int:
            return await self.indexer.pending_count()

        def tune(self, changes: dict[str, Any]) -> None:
            self.indexer.ranker.tuning = replace(SearchTuning(), **{**tuning, **changes})

    async with open_app(Settings.from_env(env), tuning=replace(SearchTuning(), **tuning)) as app:
        yield ServiceDriver(app)


@asynccontextmanager
async def mcp_driver(env: dict[str, str], tuning: dict[str, Any]) -> AsyncIterator[Driver]:
    from mcp import Client, StdioServerParameters  # noqa: PLC0415

    if tuning:
        raise SystemExit("--tune works with the service API only: the server always runs its defaults")

    from ollama_mcp.config import Settings  # noqa: PLC0415
    from ollama_mcp.storage.backends import open_backend  # noqa: PLC0415

    settings = Settings.from_env(env)

    class McpDriver:
        def __init__(self, client: Client, store: Any) -> None:
            self.client = client
            self.store = store  # read-only: how much of the server's background embedding is left

        async def _call(self, tool: str, **args: Any) -> dict[str, Any]:
            result = await self.client.call_tool(tool, args)
            if result.is_error:
                raise SystemExit(f"{tool} failed: {result.content[0].text}")  # type: ignore[union-attr]
            return result.structured_content or {}

        async def init(self, name: str) -> str:
            return (await self._call("init_conversation", name=name))["conversation_id"]

        async def record(self, conversation_id: str, turns: list[Turn]) -> list[str]:
            added = await self._call("add_messages", messages=messages(turns), conversation_id=conversation_id)
            return list(added["message_ids"])

        async def note(self, conversation_id: str, turn: Turn) -> str:
            dated = {"occurred_at": turn.occurred_at} if DATED else {}
            stored = await self._call("store_memory", content=turn.text, conversation_id=conversation_id, **dated)
            return str(stored["memory_id"])

        async def end(self, conversation_id: str) -> None:
            await self._call("end_conversation", conversation_id=conversation_id)

        async def search(self, conversation_id: str | None, query: str, k: int, reference_time: str | None) -> Found:
            legacy = {"include_messages": True} if LEGACY else {}
            if conversation_id is None:  # the default search over every conversation, as a model calls it
                found = await self._call("search_all_conversations", query=query, top_k=k, **legacy)
            else:
                found = await self._call(
                    "search_memories", query=query, conversation_id=conversation_id, top_k=k, **legacy,
                    **({"reference_time": reference_time} if reference_time else {}),
                )
            if found["mode"] != "hybrid":
                raise SystemExit(f"search fell back to {found['mode']}: {found.get('notice')}")
            return [([hit["memory_id"], *(p["memory_id"] for p in hit.get("also_in") or [])], hit["content"])
                    for hit in found["results"]]

        async def pending(self) -> int:
            return int(await self.store.pending_count(settings.embed_model))

        def tune(self, changes: dict[str, Any]) -> None:
            if changes:
                raise SystemExit("--grid works with the service API only: the server always runs its defaults")

    if CODE is not None:  # another tree's server (--code): the same interpreter, that tree first on the path
        env = {**env, "PYTHONPATH": str(CODE)}
        server = StdioServerParameters(command=sys.executable, args=["-m", "ollama_mcp"], env=env, cwd="/")
    else:
        server = StdioServerParameters(command=str(Path(sys.executable).parent / "ollama-mcp"), env=env, cwd="/")
    async with Client(server, mode="legacy") as client:
        store, _ = await open_backend(settings)
        try:
            yield McpDriver(client, store)
        finally:
            await store.aclose()


# -- scoring ----------------------------------------------------------------------------------------


@dataclass
class Scores:
    r1: list[float] = field(default_factory=list)
    r5: list[float] = field(default_factory=list)
    r10: list[float] = field(default_factory=list)
    rr: list[float] = field(default_factory=list)
    s10: list[float] = field(default_factory=list)  # session level: a top-10 turn is in an evidence session

    def add(self, ranked: list[set[str]], gold: set[str]) -> None:
        for k, bucket in ((1, self.r1), (5, self.r5), (10, self.r10)):
            hit = set().union(*ranked[:k]) & gold if ranked[:k] else set()
            bucket.append(len(hit) / len(gold))
        first = next((i for i, ids in enumerate(ranked, 1) if ids & gold), None)
        self.rr.append(1 / first if first else 0.0)
        sessions = {turn.split(":")[0] for ids in ranked[:10] for turn in ids}
        self.s10.append(1.0 if sessions & {turn.split(":")[0] for turn in gold} else 0.0)

    def extend(self, other: Scores) -> None:
        for f in fields(self):
            getattr(self, f.name).extend(getattr(other, f.name))

    def row(self) -> dict[str, float]:
        mean = lambda xs: round(statistics.fmean(xs), 3) if xs else 0.0  # noqa: E731
        return {
            "n": len(self.rr),
            "R@1": mean(self.r1),
            "R@5": mean(self.r5),
            "R@10": mean(self.r10),
            "MRR": mean(self.rr),
            "S@10": mean(self.s10),
        }


Key = tuple[str, int]  # (sample id, category)
REPEATS: list[int] = []  # per question: how many of its top 10 say a sentence an earlier one said
TRACE: list[dict[str, Any]] | None = None  # --questions FILE: every question's outcome, written there


@dataclass
class Stored:
    sample: Sample
    conversation: str | None  # None: asked over every conversation of its store (--path chats, both)
    turns_of: dict[str, set[str]]  # memory id -> the turn it records


async def store_all(
    driver: Driver, samples: Iterable[Sample], progress: bool, wait: bool = True
) -> tuple[list[Stored], list[float]]:
    stored, timings = [], []
    from ollama_mcp.inputs.turns import MAX_TURNS  # noqa: PLC0415 - add_messages' limit per call
    for sample in samples:
        turns_of: dict[str, set[str]] = defaultdict(set)
        sessions = [list(grouped) for _, grouped in itertools.groupby(sample.turns, key=lambda turn: turn.occurred_at)]
        one = None if PATH in ("chats", "both") else await driver.init(sample.sample_id)
        for number, whole in enumerate(sessions, start=1):
            conversation = one or await driver.init(f"{sample.sample_id} session {number}")
            for session in (whole[i : i + MAX_TURNS] for i in range(0, len(whole), MAX_TURNS)):
                started = time.perf_counter()
                if PATH == "notes":
                    ids = [await driver.note(conversation, turn) for turn in session]
                else:
                    ids = await driver.record(conversation, session)
                timings.append((time.perf_counter() - started) * 1000 / len(session))  # per turn
                for memory_id, turn in zip(ids, session, strict=True):
                    turns_of[memory_id].add(turn.dia_id)
                if PATH == "both":
                    for turn in session:
                        turns_of[await driver.note(conversation, turn)].add(turn.dia_id)
            if one is None and number < len(sessions):
                await driver.end(conversation)
        stored.append(Stored(sample, one, turns_of))
        if progress:
            print(
                f"  {sample.sample_id}: {len(sample.turns)} turns, {len(sample.questions)} questions", file=sys.stderr
            )
    if wait:
        await settle(driver)
    return stored, timings


async def ask_all(
    driver: Driver, stored: list[Stored]
) -> tuple[dict[Key, Scores], list[tuple[float, bool]], dict[str, Scores]]:
    """Every question's scores by (sample, category), search times (with whether the question
    names a date: a time in the query the product reads), and R@10 of the questions that name a
    date beside those that do not."""
    from ollama_mcp.when import query_window  # noqa: PLC0415

    scores: dict[Key, Scores] = defaultdict(Scores)
    by_date: dict[str, Scores] = defaultdict(Scores)
    timings = []
    for item in stored:
        reference = datetime.fromisoformat(item.sample.reference_time)
        for question in item.sample.questions:
            started = time.perf_counter()
            found = await driver.search(
                item.conversation, question.text, 10, item.sample.reference_time if DATED else None
            )
            dated = query_window(question.text, reference) is not None
            timings.append(((time.perf_counter() - started) * 1000, dated))
            turns = [set().union(*(item.turns_of[m] for m in ids)) for ids, _ in found]
            said = [words(text) for _, text in found]
            REPEATS.append(len(said) - len(set(said)))
            scores[(item.sample.sample_id, question.category)].add(turns, question.evidence)
            if TRACE is not None:  # --questions: each question's outcome, to compare two runs one by one
                found = [i for i, t in enumerate(turns) if t & question.evidence]
                TRACE.append({"sample": item.sample.sample_id, "category": question.category, "question": question.text,
                              "dated": dated, "first_evidence_rank": found[0] + 1 if found else None})
            if question.category in HEADLINE:
                group = f"{'dated' if dated else 'undated'}{' temporal' if question.category == 2 else ''}"
                by_date[group].add(turns, question.evidence)
                by_date["dated (all)" if dated else "undated (all)"].add(turns, question.evidence)
    return scores, timings, by_date


def per_category(scores: dict[Key, Scores], samples: Iterable[str]) -> dict[int, Scores]:
    wanted = set(samples)
    out: dict[int, Scores] = defaultdict(Scores)
    for (sample, category), s in scores.items():
        if sample in wanted:
            out[category].extend(s)
    return out


def rotated(
    results: dict[str, dict[Key, Scores]], sample_ids: list[str]
) -> tuple[dict[str, dict[str, float]], list[str]]:
    """The mean over the rotated folds (each conversation left out in turn) of each category's
    figures, and each fold's chosen config."""
    folds: list[dict[str, dict[str, float]]] = []
    chosen = []
    for held_out in sample_ids:
        rest = [s for s in sample_ids if s != held_out]
        best = max(results, key=lambda name: _merit(table(per_category(results[name], rest))))
        chosen.append(f"{held_out}: {best}")
        folds.append(table(per_category(results[best], [held_out])))
    mean: dict[str, dict[str, float]] = {}
    for row in sorted({row for f in folds for row in f}, key=lambda r: (r.startswith("headline"), r)):
        present = [f[row] for f in folds if row in f]
        mean[row] = {k: round(statistics.fmean(f[k] for f in present), 3) for k in present[0] if k != "n"}
        mean[row]["n"] = sum(r["n"] for r in present)
    return mean, chosen


# Questions about what was never said (category 5) must keep finding the turn that shows it: a
# configuration below this adversarial R@10 (#18's target) ranks after every one that keeps it.
ADVERSARIAL_FLOOR = 0.85


def _merit(rows: dict[str, dict[str, float]]) -> tuple[bool, float, float]:
    adversarial = rows.get("5 adversarial", {}).get("R@10", 1.0)
    return adversarial >= ADVERSARIAL_FLOOR, rows["headline (1-4)"]["R@10"], rows["headline (1-4)"]["MRR"]


def table(per_category: dict[int, Scores]) -> dict[str, dict[str, float]]:
    rows = {f"{c} {CATEGORIES[c]}": per_category[c].row() for c in sorted(per_category)}
    headline = Scores()
    for c in HEADLINE:
        headline.extend(per_category.get(c, Scores()))
    rows["headline (1-4)"] = headline.row()
    return rows


def render(rows: dict[str, dict[str, float]]) -> str:
    lines = [f"| {'category':<16} | {'n':>4} | R@1   | R@5   | R@10  | MRR   | S@10  |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    for name, r in rows.items():
        lines.append(
            f"| {name:<16} | {r['n']:>4} | {r['R@1']:.3f} | {r['R@5']:.3f} | {r['R@10']:.3f} | {r['MRR']:.3f} "
            f"| {r.get('S@10', 0.0):.3f} |"
        )
    return "\n".join(lines)


def _tuning(pairs: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for pair in pairs:
        key, _, value = pair.partition("=")
        out[key] = _number(value)
    return out


def _number(value: str) -> int | float:
    return int(value) if value.lstrip("-").isdigit() else float(value)


def _grid(specs: list[str]) -> list[dict[str, Any]]:
    """``key=v1,v2`` specs as every combination (one empty configuration without specs)."""
    configs: list[dict[str, Any]] = [{}]
    for spec in specs:
        key, _, values = spec.partition("=")
        configs = [{**c, key: _number(v)} for c in configs for v in values.split(",")]
    return configs


async def amain(args: argparse.Namespace) -> dict[str, Any]:  # noqa: PLR0915
    global DATED, PATH, LEGACY, CODE  # noqa: PLW0603 - one run, one setting
    DATED, PATH, LEGACY, CODE = not args.no_dates, args.path, args.legacy, args.code
    samples = load(args.data)
    if args.limit:
        samples = samples[: args.limit]
    server = None
    host = args.ollama_host
    if host is None:
        from bench.embed_server import MODELS, EmbedServer, MiniLM  # noqa: PLC0415

        if args.model not in MODELS:
            raise SystemExit(f"--model: the bench serves {', '.join(MODELS)}; for another, pass --ollama-host")
        server = EmbedServer(MiniLM(None if args.no_cache else MODELS[args.model][2], args.model)).start()
        host = server.url
    try:
        started = time.perf_counter()
        results: dict[str, dict[Key, Scores]] = defaultdict(dict)
        by_date: dict[str, dict[str, Scores]] = defaultdict(lambda: defaultdict(Scores))
        search_ms: list[tuple[float, bool]] = []
        store_ms: list[float] = []
        pending_before = pending_after = 0
        asked_in = 0.0
        drained_in = None
        # --path chats/both: a store a sample, searched whole (a person's store holds their own chats)
        groups = [samples] if PATH in ("conversation", "notes") and not args.store_each else [[s] for s in samples]
        for group in groups:
            with tempfile.TemporaryDirectory() as tmp:
                database = str(Path(tmp) / "locomo.db")
                if args.postgres:
                    import pgserver  # noqa: PLC0415 - the PostgreSQL backend only

                    database = pgserver.get_server(Path(tmp) / "pg", cleanup_mode="stop").get_uri()
                env = {"OLLAMA_HOST": host, "OLLAMA_MCP_DB": database,
                       "OLLAMA_MCP_EMBED_MODEL": args.model, "OLLAMA_MCP_LOG_LEVEL": "WARNING", "HOME": tmp,
                       "OLLAMA_MCP_CHAT_MODEL": "none"}  # no summaries: every result is a turn
                driver = mcp_driver if args.mcp else service_driver
                async with driver(env, _tuning(args.tune)) as d:
                    stored, timings_stored = await store_all(d, group, progress=not args.quiet, wait=not args.no_wait)
                    store_ms.extend(timings_stored)
                    stored_at = time.perf_counter()
                    pending_before += await d.pending()
                    for config in _grid(args.grid):
                        d.tune(config)
                        name = ",".join(f"{k}={v}" for k, v in config.items()) or "defaults"
                        scored, timings, dates = await ask_all(d, stored)
                        results[name].update(scored)
                        for key, value in dates.items():
                            by_date[name][key].extend(value)
                        search_ms.extend(timings)
                        if not args.quiet and args.grid:
                            rows = table(per_category(results[name], [s.sample_id for s in group]))
                            print(f"  {name}: {rows['headline (1-4)']}", file=sys.stderr)
                    pending_after += await d.pending()
                    asked_in += time.perf_counter() - stored_at
                    if args.no_wait:  # how long the rest of the backlog takes, nobody asking
                        await settle(d)
                        drained_in = round((drained_in or 0) + time.perf_counter() - stored_at, 1)
        elapsed = time.perf_counter() - started
    finally:
        if server is not None:
            server.stop()
    ids = [s.sample_id for s in samples]
    best = max(results, key=lambda name: _merit(table(per_category(results[name], ids))))
    out: dict[str, Any] = {
        "path": "mcp-stdio" if args.mcp else "service", "recorded": PATH, "legacy": LEGACY,
        "repeated_sentences": {"questions_with_a_repeat": sum(1 for r in REPEATS if r),
                               "repeats": sum(REPEATS), "questions": len(REPEATS)},
        "backend": "postgres" if args.postgres else "sqlite",
        "tuning": _tuning(args.tune), "best_on_all": best, "rows": table(per_category(results[best], ids)),
        "dated": {k: v.row() for k, v in sorted(by_date[best].items())},
        "median_ms": {
            "store_ms": round(statistics.median(store_ms), 2),
            "search_ms": round(statistics.median(ms for ms, _ in search_ms), 2),
            "search_ms_p95": round(sorted(ms for ms, _ in search_ms)[int(0.95 * (len(search_ms) - 1))], 2),
            "search_ms_max": round(max(ms for ms, _ in search_ms), 2),
            "dated_search_ms": round(statistics.median(ms for ms, dated in search_ms if dated), 2),
        },
        "seconds": round(elapsed, 1), "skipped_questions": sum(s.skipped for s in samples),
        "backlog": {"waited": not args.no_wait, "pending_when_asked": pending_before,
                    "pending_after_questions": pending_after, "questions_seconds": round(asked_in, 1),
                    "drained_seconds_after_storing": drained_in},
    }
    out["per_conversation"] = {
        sample: {"R@5": rows["headline (1-4)"]["R@5"], "R@10": rows["headline (1-4)"]["R@10"],
                 "adversarial R@10": rows.get("5 adversarial", {}).get("R@10")}
        for sample in ids for rows in [table(per_category(results[best], [sample]))]
    }
    if len(results) > 1 and len(ids) > 1:
        out["rotated"], out["folds"] = rotated(results, ids)
        # each configuration's headline and adversarial R@10 on each conversation: a change ships
        # only if it holds on every one of them (and on the second model)
        out["by_config"] = {
            name: {sample: [rows["headline (1-4)"]["R@10"], rows.get("5 adversarial", {}).get("R@10")]
                   for sample in ids for rows in [table(per_category(results[name], [sample]))]}
            for name in results
        }
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description="LoCoMo retrieval benchmark for ollama-mcp.")
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help=f"dataset (default {DEFAULT_DATA})")
    parser.add_argument("--mcp", action="store_true", help="drive the real ollama-mcp process over MCP stdio")
    parser.add_argument(
        "--postgres", action="store_true", help="the PostgreSQL backend (a private pgserver) instead of SQLite"
    )
    parser.add_argument("--ollama-host", help="use this Ollama-compatible server instead of starting one")
    parser.add_argument("--model", default="all-minilm",
                        help="embedding model name: all-minilm (default) or all-mpnet (all-mpnet-base-v2)")
    parser.add_argument(
        "--tune", action="append", default=[], metavar="KEY=VALUE", help="override a SearchTuning field"
    )
    parser.add_argument("--grid", action="append", default=[], metavar="KEY=V1,V2",
                        help="rotated folds of dev over every combination of these SearchTuning values")
    parser.add_argument("--limit", type=int, help="only the first N conversations")
    parser.add_argument("--questions", type=Path, metavar="FILE",
                        help="write each question's first evidence rank (of the last configuration run) to FILE")
    parser.add_argument("--no-dates", action="store_true",
                        help="pass no occurred_at and no reference_time: every turn stored now (#56 item 5)")
    parser.add_argument("--no-wait", action="store_true",
                        help="ask at once after storing, while the in-context vectors are still being computed "
                        "(#56 item 4), then time the rest of the drain")
    parser.add_argument("--no-cache", action="store_true", help="do not use the embedding cache")
    parser.add_argument("--path", choices=("conversation", "chats", "notes", "both"), default="conversation",
                        help="how turns are recorded and asked (#79): one conversation of turns asked with "
                        "search_memories (default); chats: a conversation a session, every one but the last "
                        "ended, asked with the default search_all_conversations; notes: each turn a "
                        "store_memory note; both: chats with every turn also a note")
    parser.add_argument("--store-each", action="store_true", help="a store a sample on every path")
    parser.add_argument("--legacy", action="store_true",
                        help="pass include_messages: true, as the code before #79 needed to search turns")
    parser.add_argument("--code", type=Path, help="with --mcp: run the server of this source tree (to compare)")
    parser.add_argument("--json", type=Path, help="also write the results here")
    parser.add_argument("--quiet", action="store_true")
    args = parser.parse_args()
    global TRACE  # noqa: PLW0603 - one run, one trace
    TRACE = [] if args.questions else None
    result = anyio.run(amain, args)
    if args.questions:
        args.questions.write_text(json.dumps(TRACE, indent=0))
    if "rotated" in result:
        print("rotated folds of dev, not held-out (the mean of five; each fold's configuration chosen on the"
              " other four):")
        print(render(result["rotated"]))
        print("\n".join(result["folds"]))
        print(f"\ntuned on all five ({result['best_on_all']}):")
    print(render(result["rows"]))
    print("\nquestions of categories 1-4 that name a date, and those that do not:")
    print(render(result["dated"]))
    print(f"\npath={result['path']} tuning={result['tuning']} median store {result['median_ms'].get('store_ms')} ms, "
          f"search {result['median_ms'].get('search_ms')} ms (including the embedding call; naming a date "
          f"{result['median_ms'].get('dated_search_ms')} ms; p95 {result['median_ms']['search_ms_p95']} ms, "
          f"max {result['median_ms']['search_ms_max']} ms), {result['seconds']} s, "
          f"{result['skipped_questions']} questions without usable evidence skipped")
    print(f"backlog: {result['backlog']}")
    print(f"recorded as {result['recorded']} (legacy={result['legacy']}); same sentence twice in a top 10: "
          f"{result['repeated_sentences']}")
    print("per conversation (headline R@5, R@10; adversarial R@10): " + "; ".join(
        f"{k} {v['R@5']:.3f} {v['R@10']:.3f} {v['adversarial R@10']}" for k, v in result["per_conversation"].items()))
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    main()

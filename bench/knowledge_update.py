"""A knowledge-update stream (#82 item 4): facts that change, told among things that do not, and
whether the default search puts the current value first.

Deterministic from its seed: ~10 people, four attributes that change (where they live, who they
work for, their team's database, their standup day), 2-5 versions each over 12-24 months, every
version said in varied wording (stated, implied, corrected, ended: "no longer ..."), each in a
conversation of its own with its ``occurred_at``, among 3-5 times as many distractors: facts that
never change (some look like the changing ones: where someone was born), the same value said of
someone else, the current value said again in other words, and chatter. Everything goes in through
MCP (``init_conversation``, ``add_messages``, ``end_conversation``) to the real server, with MiniLM
behind Ollama's API and no chat model, and is asked with the default ``search_all_conversations``.

What it reports (pooled over the seeds):
- ``top1_current``: a question about the current value ("Where does Maren live?", several
  phrasings) has the current statement first (or the current value said again);
- ``stale_top5_unmarked``: a superseded statement of that attribute sits in the top 5 without
  ``superseded_by``;
- ``current_top5``: the current statement is in the top 5;
- ``history_found``: a question about the past ("Where did Maren live before Oslo?") finds the
  value before the current one in its top 5;
- ``collateral``: a question about a fact that never changed (where someone was born, what they are
  allergic to) has that fact first, unmarked.

    python bench/knowledge_update.py --seeds 1 2 3            # the real server over stdio, MiniLM
    python bench/knowledge_update.py --seeds 1 --print-stream  # the stream itself, to read
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import locomo  # noqa: E402
from bench.locomo import Turn, mcp_driver, settle  # noqa: E402

PEOPLE = ["Maren", "Tobias", "Ilse", "Ravi", "Odile", "Kwame", "Sunniva", "Teodor", "Priya", "Anselm", "Liesl",
          "Dario"]
OTHERS = ["Jonas", "Beatrix", "Casimir", "Henrike", "Yusuf", "Linnea", "Matteo", "Agnieszka"]  # never asked about
VALUES = {
    "city": ["Lisbon", "Porto", "Berlin", "Vienna", "Oslo", "Lyon", "Tallinn", "Seville", "Krakow", "Ghent",
             "Bergen", "Turin"],
    "employer": ["Fernwood Labs", "Halcyon Freight", "Brightmere Bank", "Quillon Games", "Okapi Health",
                 "Tessellate", "Marlow and Pike", "Northgate Energy"],
    "database": ["PostgreSQL", "MySQL", "MongoDB", "SQLite", "CockroachDB", "MariaDB", "DynamoDB"],
    "standup": ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday"],
}
# Ways of saying a value: first told, told again as a change (stated or implied), corrected, ended.
SAID = {
    "city": {
        "stated": ["{s} lives in {v}.", "{s} moved to {v}.", "{s} is based in {v} these days."],
        "implied": ["{s} just got the keys to a flat in {v}.", "{s} says the trams in {v} are much better than "
                    "the buses were.", "{s} has been settling into the new place in {v}."],
        "corrected": ["Correction: {s} lives in {v}, not {old}.", "I had it wrong, {s} is in {v}, not {old}."],
        "ended": ["{s} no longer lives in {old}.", "{s} has left {old} for good."],
        "again": ["{s} still loves living in {v}.", "{s} sent photos of the river in {v} again."],
        "current": ["Where does {s} live?", "Which city is {s} based in?", "What city does {s} live in now?"],
        "before": ["Where did {s} live before {v}?", "Which city was {s} in before moving to {v}?"],
    },
    "employer": {
        "stated": ["{s} works at {v}.", "{s} started a new job at {v}.", "{s} is employed by {v}."],
        "implied": ["{s} had a first week at {v} and likes the team.", "{s} got a {v} badge and a laptop today."],
        "corrected": ["Small fix: {s} works for {v}, not {old}.", "To be precise, {s}'s employer is {v}, not {old}."],
        "ended": ["{s} left {old} and is taking a break from work.", "{s} no longer works at {old}."],
        "again": ["{s} is still happy at {v}.", "{s} got promoted at {v}."],
        "current": ["Where does {s} work?", "Who is {s}'s employer?", "Which company does {s} work for?"],
        "before": ["Where did {s} work before {v}?", "Which company employed {s} before {v}?"],
    },
    "database": {
        "stated": ["{s}'s team uses {v} as its database.", "{s}'s team runs everything on {v}."],
        "implied": ["{s}'s team finished migrating every service to {v}.", "{s} spent the week tuning {v} "
                    "indexes for the team."],
        "corrected": ["To be precise, {s}'s team uses {v}, not {old}.", "I mixed it up: {s}'s team is on {v}, "
                      "not {old}."],
        "ended": ["{s}'s team dropped {old} entirely.", "{s}'s team no longer uses {old}."],
        "again": ["{s}'s team is still very happy with {v}.", "{s} says {v} has been rock solid for the team."],
        "current": ["Which database does {s}'s team use?", "What database is {s}'s team on?"],
        "before": ["What database did {s}'s team use before {v}?", "Which database was {s}'s team on before {v}?"],
    },
    "standup": {
        "stated": ["{s}'s standup is on {v}.", "{s}'s team holds its standup every {v}."],
        "implied": ["{s} cannot do lunch on {v}s because of the standup.", "{s} is preparing notes for the {v} "
                    "standup."],
        "corrected": ["Actually {s}'s standup is on {v} now, not {old}.", "Correction: {s}'s standup is {v}, "
                      "not {old}."],
        "ended": ["{s}'s team cancelled the {old} standup.", "{s}'s team no longer has a standup on {old}."],
        "again": ["{s}'s {v} standup ran long again.", "{s} still has the standup every {v}."],
        "current": ["What day is {s}'s standup?", "When does {s}'s team hold its standup?"],
        "before": ["What day was {s}'s standup before {v}?", "Which day did {s}'s standup used to be on before {v}?"],
    },
}
STABLE = {  # facts that never change, and the question that asks each
    "born": (["{s} was born in {v}.", "{s} grew up in {v}, where the family still lives."], "Where was {s} born?",
             VALUES["city"]),
    "allergy": (["{s} is allergic to {v}.", "{s} has to avoid {v} because of an allergy."], "What is {s} allergic to?",
                ["peanuts", "shellfish", "pollen", "cats", "penicillin", "sesame"]),
    "instrument": (["{s} plays the {v}.", "{s} has played the {v} since school."], "Which instrument does {s} play?",
                   ["cello", "trumpet", "piano", "violin", "drums", "flute"]),
}
CHATTER = ["Had a great coffee this morning.", "The weather has been grey all week.", "Remind me to water the plants.",
           "The train was late again today.", "I finished the book about lighthouses.", "Lunch was a bit too salty.",
           "We watched a documentary about octopuses.", "My phone battery dies so fast lately.",
           "The meeting ran over by twenty minutes.", "Found a nice bakery near the station."]


@dataclass
class Statement:
    text: str
    at: str
    person: str | None = None
    attribute: str | None = None  # a changing attribute, a stable fact's key, or None (chatter)
    value: str | None = None  # what it says the value is (None: it ends one)
    version: int = -1  # of a changing attribute: 0, 1, ...; -1: not one
    role: str = "chatter"  # version | again | lookalike | stable | chatter
    ids: list[str] = field(default_factory=list)


@dataclass
class Probe:
    query: str
    kind: str  # current | before | stable
    person: str
    attribute: str
    wanted: set[int]  # indexes of statements that answer it
    stale: set[int] = field(default_factory=set)  # statements a current question must not show unmarked


def stream(seed: int) -> tuple[list[Statement], list[Probe]]:
    """The statements in time order, and the questions asked after the last."""
    rng = random.Random(seed)
    people = rng.sample(PEOPLE, 10)
    start = datetime(2024, 1, 8, 9, tzinfo=UTC)
    months = rng.randint(12, 24)
    span = timedelta(days=30 * months)
    said: list[Statement] = []
    histories: dict[tuple[str, str], list[tuple[int, str | None]]] = {}
    me = people[0] if FIRST else None  # --wording alt: the first person is the user, in the first person
    for person in people:
        for attribute, pool in VALUES.items():
            versions = rng.randint(2, 5)
            values = rng.sample(pool, min(versions, len(pool)))
            times = sorted(rng.random() for _ in values)
            history: list[tuple[int, str | None]] = []
            old: str | None = None
            for i, (value, when) in enumerate(zip(values, times, strict=True)):
                ways = SAID[attribute]
                if i == 0:
                    way = "stated"
                elif i == len(values) - 1 and rng.random() < 0.15:
                    way = "ended"
                else:
                    way = rng.choice(["stated", "stated", "implied", "corrected"])
                if person == me:
                    way = "stated"
                told: str | None = None if way == "ended" else value
                text = rng.choice(ways[way]).format(s=person, v=value, old=old)
                if person == me:
                    text = FIRST[attribute][0].format(v=value)
                at = start + span * when
                said.append(Statement(text, _iso(at), person, attribute, told, i, "version"))
                history.append((len(said) - 1, told))
                if told is not None and person != me and rng.random() < 0.5:  # said again later, in other words
                    again = at + (span * (times[i + 1] if i + 1 < len(times) else 1.0) - span * when) * rng.random()
                    said.append(Statement(rng.choice(ways["again"]).format(s=person, v=value), _iso(again), person,
                                          attribute, value, i, "again"))
                    history.append((len(said) - 1, told))
                if told is not None:
                    old = told
            histories[person, attribute] = history
        for key, (ways, _, pool) in STABLE.items():
            if person == me:
                continue
            value = rng.choice(pool)
            said.append(Statement(rng.choice(ways).format(s=person, v=value), _iso(start + span * rng.random()),
                                  person, key, value, -1, "stable"))
    # Look-alikes: a value someone holds, said of somebody the questions never ask about.
    changing = [s for s in said if s.role == "version" and s.value is not None]
    for source in rng.sample(changing, len(changing) // 2):
        other = rng.choice(OTHERS)
        text = rng.choice(SAID[source.attribute or "city"]["stated"]).format(s=other, v=source.value)
        said.append(Statement(text, _iso(start + span * rng.random()), None, None, None, -1, "lookalike"))
    while len(said) < 4 * len(changing):
        said.append(Statement(rng.choice(CHATTER), _iso(start + span * rng.random())))
    said = [s for _, s in sorted(enumerate(said), key=lambda p: (p[1].at, p[0]))]
    probes: list[Probe] = []
    for person in people:
        for attribute in VALUES:
            mine = [(i, s) for i, s in enumerate(said) if s.person == person and s.attribute == attribute]
            last = max(s.version for _, s in mine)
            current = {i for i, s in mine if s.version == last}
            stale = {i for i, s in mine if s.version < last}
            asked = [FIRST[attribute][1]] if person == me else SAID[attribute]["current"]
            for phrasing in asked:
                probes.append(Probe(phrasing.format(s=person), "current", person, attribute, current, stale))
            final = next(s for i, s in mine if s.version == last and s.role == "version")
            earlier = [s for _, s in mine if s.version == last - 1 and s.role == "version"]
            if final.value is not None and earlier and earlier[0].value is not None:
                before = {i for i, s in mine if s.version == last - 1}
                ways = [FIRST[attribute][2]] if person == me else SAID[attribute]["before"]
                probes.append(Probe(rng.choice(ways).format(s=person, v=final.value), "before",
                                    person, attribute, before))
        for key, (_, question, _) in STABLE.items():
            if person == me:
                continue
            wanted = {i for i, s in enumerate(said) if s.person == person and s.attribute == key}
            probes.append(Probe(question.format(s=person), "stable", person, key, wanted))
    return said, probes


def _iso(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


async def run(seed: int, host: str, model: str) -> dict[str, Any]:
    said, probes = stream(seed)
    with tempfile.TemporaryDirectory() as tmp:
        env = {"OLLAMA_HOST": host, "OLLAMA_MCP_DB": str(Path(tmp) / "memory.db"), "OLLAMA_MCP_EMBED_MODEL": model,
               "OLLAMA_MCP_LOG_LEVEL": "WARNING", "HOME": tmp, "OLLAMA_MCP_CHAT_MODEL": "none"}
        async with mcp_driver(env, {}) as driver:
            by_id: dict[str, int] = {}
            for index, statement in enumerate(said):
                conversation = await driver.init(f"session {index}")
                ids = await driver.record(conversation, [Turn(str(index), statement.text, statement.at, "me")])
                by_id.update(dict.fromkeys(ids, index))
                await driver.end(conversation)
            await settle(driver)
            counts = {"current": 0, "top1_current": 0, "current_top5": 0, "stale_top5_unmarked": 0, "before": 0,
                      "history_found": 0, "stable": 0, "collateral": 0}
            searched_ms: list[float] = []
            for probe in probes:
                started = time.perf_counter()
                found = await driver._call("search_all_conversations", query=probe.query, top_k=10)  # type: ignore[attr-defined]
                searched_ms.append((time.perf_counter() - started) * 1000)
                hits = [([by_id.get(h["memory_id"], -1), *(by_id.get(p["memory_id"], -1)
                          for p in h.get("also_in") or [])], bool(h.get("superseded_by"))) for h in found["results"]]
                first = set(hits[0][0]) if hits else set()
                top5 = [(set(ids), marked) for ids, marked in hits[:5]]
                counts[probe.kind] += 1
                if SHOW_MISSES:
                    _show(probe, hits, found["results"], said)
                if probe.kind == "current":
                    counts["top1_current"] += bool(first & probe.wanted)
                    counts["current_top5"] += any(ids & probe.wanted for ids, _ in top5)
                    counts["stale_top5_unmarked"] += any(ids & probe.stale and not marked for ids, marked in top5)
                elif probe.kind == "before":
                    counts["history_found"] += any(ids & probe.wanted for ids, _ in top5)
                else:
                    counts["collateral"] += bool(first & probe.wanted) and not hits[0][1]
    return {"seed": seed, "statements": len(said), "changing": sum(s.role == "version" for s in said),
            "counts": counts, "search_ms_p50": round(statistics.median(searched_ms), 1)}


FIRST: dict[str, tuple[str, str, str]] = {}  # --wording alt: the user's own facts, in the first person
SHOW_MISSES = False  # --show-misses: print each question answered wrong, with its top 3


def _show(probe: Probe, hits: list[tuple[list[int], bool]], results: list[dict[str, Any]],
          said: list[Statement]) -> None:
    first = set(hits[0][0]) if hits else set()
    if probe.kind == "current":
        ok = bool(first & probe.wanted) and not any(set(i) & probe.stale and not m for i, m in hits[:5])
    elif probe.kind == "before":
        ok = any(set(i) & probe.wanted for i, _ in hits[:5])
    else:
        ok = bool(first & probe.wanted) and not hits[0][1]
    if ok:
        return
    print(f"MISS {probe.kind}: {probe.query}  wanted: {[said[i].text for i in sorted(probe.wanted)][:2]}",
          file=sys.stderr)
    for r, (_ids, marked) in zip(results[:3], hits[:3], strict=False):
        print(f"    {'*' if marked else ' '} {r['content'][:90]}", file=sys.stderr)


def pooled(runs: list[dict[str, Any]]) -> dict[str, float]:
    total: dict[str, int] = {}
    for one in runs:
        for key, value in one["counts"].items():
            total[key] = total.get(key, 0) + value
    share = {
        "top1_current": total["top1_current"] / max(total["current"], 1),
        "stale_top5_unmarked": total["stale_top5_unmarked"] / max(total["current"], 1),
        "current_top5": total["current_top5"] / max(total["current"], 1),
        "history_found": total["history_found"] / max(total["before"], 1),
        "collateral": total["collateral"] / max(total["stable"], 1),
    }
    return {key: round(value, 3) for key, value in share.items()}


async def amain(args: argparse.Namespace) -> None:
    locomo.DATED = True
    locomo.CODE = args.code
    global SHOW_MISSES  # noqa: PLW0603
    SHOW_MISSES = args.show_misses
    if args.wording == "alt":
        from bench import knowledge_update_alt as alt  # noqa: PLC0415

        globals().update(PEOPLE=alt.PEOPLE, OTHERS=alt.OTHERS, VALUES=alt.VALUES, SAID=alt.SAID, STABLE=alt.STABLE,
                         CHATTER=alt.CHATTER, FIRST=alt.FIRST)
    if args.print_stream:
        said, probes = stream(args.seeds[0])
        for statement in said:
            print(statement.at[:10], statement.role, statement.text)
        for probe in probes:
            print("?", probe.kind, probe.query)
        return
    host = args.ollama_host
    server = None
    if host is None:
        from bench.embed_server import MODELS, EmbedServer, MiniLM  # noqa: PLC0415

        server = EmbedServer(MiniLM(MODELS[args.model][2], args.model)).start()
        host = server.url
    try:
        runs = []
        for seed in args.seeds:
            one = await run(seed, host, args.model)
            runs.append(one)
            print(json.dumps(one), file=sys.stderr)
        print(json.dumps({"model": args.model, "seeds": args.seeds, "pooled": pooled(runs),
                          "per_seed": [{"seed": r["seed"], **pooled([r])} for r in runs]}, indent=2))
    finally:
        if server is not None:
            server.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--model", default="all-minilm")
    parser.add_argument("--ollama-host", default=None, help="an Ollama-compatible server (default: the bench's own)")
    parser.add_argument("--wording", choices=("dev", "alt"), default="dev",
                        help="alt: knowledge_update_alt.py's people, values and wording (a robustness check)")
    parser.add_argument("--code", type=Path, default=None, metavar="DIR",
                        help="run that tree's server (a checkout of an earlier commit: the baseline)")
    parser.add_argument("--show-misses", action="store_true", help="print each question answered wrong")
    parser.add_argument("--print-stream", action="store_true", help="print the first seed's stream and questions")
    anyio.run(amain, parser.parse_args())


if __name__ == "__main__":
    main()

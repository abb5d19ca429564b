"""Facts in tests: a fact as the model replies it, the facts and facts jobs stored, and a
conversation that asks for facts ended with a scripted facts reply."""

from __future__ import annotations

import json
from typing import Any

from ollama_mcp.app import App
from ollama_mcp.inputs.conversations import new_conversation
from ollama_mcp.inputs.turns import parse_turns
from tests.conftest import Database
from tests.support.fake_ollama import FakeOllama


def fact(subject: str, predicate: str, obj: str, source: int, *, confidence: float = 0.9,
         exclusive: bool = False) -> dict[str, Any]:
    return {"subject": subject, "predicate": predicate, "object": obj, "confidence": confidence,
            "exclusive": exclusive, "source": source}


def reply(*facts: dict[str, Any]) -> str:
    return json.dumps({"facts": list(facts)})


def meta(value: Any) -> dict[str, Any]:
    return json.loads(value) if isinstance(value, str) else dict(value)


def fact_rows(db: Database) -> list[tuple[str, dict[str, Any], Any, str | None]]:
    """(content, metadata, source_seq, superseded_by) of every fact, oldest first."""
    found = db.rows(
        "SELECT content, metadata, source_seq, superseded_by FROM memories WHERE kind = 'fact' ORDER BY seq"
    )
    return [(content, meta(m), source, superseded) for content, m, source, superseded in found]


def facts_jobs(db: Database) -> list[tuple[str, str | None]]:
    return db.rows("SELECT state, last_error FROM jobs WHERE kind = 'facts' ORDER BY id")


async def run_jobs(app: App) -> None:
    while await app.jobs.run_once():
        pass


async def ended_with_facts(
    app: App, fake_ollama: FakeOllama, script: str | tuple[str, ...], *turns: str
) -> tuple[str, list[str]]:
    """A conversation that asks for facts, its turns recorded and ended with a given summary (so
    the only chat requests are the facts job's, answered by ``script``: one reply or several, in
    order); the jobs run."""
    conv = await app.conversations.start(new_conversation("move", {"facts": True}))
    stored, _ = await app.transcript.add_messages(conv.id, parse_turns("messages", [
        {"role": "user" if i % 2 == 0 else "assistant", "content": text, "actor": "caroline" if i % 2 == 0 else None}
        for i, text in enumerate(turns)
    ]))
    fake_ollama.enqueue_chat(*((script,) if isinstance(script, str) else script))
    await app.conversations.end(conv.id, summary="Caroline talked about her move.")
    await run_jobs(app)
    return conv.id, [m.id for m in stored]

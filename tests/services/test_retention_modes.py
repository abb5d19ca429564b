"""Retention modes (``metadata.retention``): what is kept of a turn once a summary covers it.
full keeps it, audit-only keeps its author, time and digest but not its text, ephemeral deletes
it; in each, every table and index of the store is read to prove the text went everywhere at
once, on both backends."""

from __future__ import annotations

import hashlib
import json
from dataclasses import replace
from typing import Any

import pytest

from ollama_mcp.app import App, open_app
from ollama_mcp.config import Settings
from ollama_mcp.domain import Memory
from ollama_mcp.errors import InvalidInputError
from ollama_mcp.inputs.context import context_request, history_request
from ollama_mcp.inputs.conversations import new_conversation
from ollama_mcp.inputs.memories import note as new_note
from ollama_mcp.inputs.search import search_request
from ollama_mcp.inputs.turns import parse_turns
from tests.conftest import Database, backfill, connect, eventually
from tests.support.mcp_client import call

pytestmark = pytest.mark.anyio

# FTS5's own tables (their rows are tokens, checked through MATCH) and SQLite's bookkeeping.
SQLITE_SKIPPED = ("memories_fts", "memory_contexts_fts", "sqlite_", "keyword_scratch")


def holders(db: Database, word: str) -> set[str]:
    """Every place in the store that holds ``word``: each text, JSON or keyword column of every
    table (``table.column``, with the memory kind for memories), and on SQLite the two FTS5
    keyword indexes (``fts.content`` / ``fts.context``, with the kinds of the rows they match)."""
    found: set[str] = set()
    if db.backend == "sqlite":
        tables = [t for (t,) in db.rows("SELECT name FROM sqlite_master WHERE type = 'table'")
                  if not t.startswith(SQLITE_SKIPPED)]
        columns = [(t, c[1]) for t in tables for c in db.rows(f"PRAGMA table_info({t})")]
        columns.append(("memory_contexts", "context"))  # computed, not stored: the view is what a reader gets
    else:
        columns = db.rows(
            "SELECT table_name, column_name FROM information_schema.columns WHERE table_schema = 'public'"
            " AND data_type IN ('text', 'jsonb', 'tsvector', 'character varying', 'ARRAY')"
        )
    for table, column in columns:
        where = f"CAST({column} AS TEXT) LIKE ?"
        if table == "memories":
            kinds = sorted(k for (k,) in db.rows(f"SELECT DISTINCT kind FROM memories WHERE {where}", f"%{word}%"))
            found.update(f"memories.{column}:{kind}" for kind in kinds)
        elif table == "memory_contexts":
            kinds = sorted(k for (k,) in db.rows(
                "SELECT DISTINCT m.kind FROM memory_contexts x JOIN memories m ON m.seq = x.seq"
                " WHERE x.context LIKE ?",
                f"%{word}%"))
            found.update(f"memories.context:{kind}" for kind in kinds)
        elif db.count(f"SELECT count(*) FROM {table} WHERE {where}", f"%{word}%"):
            found.add(f"{table}.{column}")
    if db.backend == "sqlite":
        for facet, fts in (("content", "memories_fts"), ("context", "memory_contexts_fts")):
            kinds = db.rows(
                f"SELECT DISTINCT m.kind FROM {fts} JOIN memories m ON m.seq = {fts}.rowid WHERE {fts} MATCH ?", word
            )
            found.update(f"fts.{facet}:{kind}" for (kind,) in kinds)
            # Every FTS5 entry has its row, and every row its entry (nothing left of a deleted turn).
            assert db.count(f"SELECT count(*) FROM {fts}_docsize") == db.count("SELECT count(*) FROM memories"), fts
    return found


def summary_only(db: Database) -> set[str]:
    """Where a covered turn's words may still be: the summaries (as memories, in their keyword
    entries) and the conversation's rolling summary."""
    kept = {"memories.content:summary", "memories.context:summary", "conversations.rolling_summary"}
    if db.backend == "sqlite":
        return kept | {"fts.content:summary", "fts.context:summary"}
    return kept | {"memories.content_words:summary", "memories.context_words:summary"}


def vector_facets(db: Database, seq: int) -> list[str]:
    return sorted(f for (f,) in db.rows("SELECT facet FROM memory_embeddings WHERE memory_seq = ?", seq))


def no_orphans(db: Database) -> None:
    for table in ("memory_embeddings", "memory_tags" if db.backend == "sqlite" else "embedding_leases"):
        assert db.count(f"SELECT count(*) FROM {table} WHERE memory_seq NOT IN (SELECT seq FROM memories)") == 0, table


async def transcript(app: App, retention: str) -> tuple[str, list[Memory], Memory]:
    """Five turns (kumquat0-4) with a note between the second and third, embedded, compaction
    queued (past 4 messages): it covers the oldest two turns."""
    conv = await app.conversations.start(
        new_conversation("fruit", {"retention": retention, "compact_after_messages": 4})
    )
    turns: list[Memory] = []
    note = None
    for i in range(5):
        turns += (await app.transcript.add_messages(conv.id, parse_turns("messages", [
            {"role": "user" if i % 2 == 0 else "assistant", "content": f"kumquat{i} is on the table", "actor": "ann"}
        ])))[0]
        if i == 1:
            note = (await app.memories.store(new_note("the pantry code is persimmon", conv.id))).memory
    assert note is not None
    await backfill(app)
    return conv.id, turns, note


def memory_row(db: Database, seq: int) -> tuple[Any, ...]:
    found = db.rows("SELECT m.content, x.context, m.role, m.actor, m.metadata, m.created_at FROM memories m"
                    " JOIN memory_contexts x ON x.seq = m.seq WHERE m.seq = ?", seq)
    return found[0] if found else ()


def meta(value: Any) -> dict[str, Any]:
    return json.loads(value) if isinstance(value, str) else dict(value)


async def test_full_retention_keeps_covered_turns_as_they_were(app: App, db: Database) -> None:
    conv, turns, _ = await transcript(app, "full")
    assert await app.jobs.run_once()
    assert db.count("SELECT summarized_through FROM conversations WHERE id = ?", conv) == turns[1].seq
    assert holders(db, "kumquat0") == summary_only(db) | {
        "memories.content:message", "memories.context:message", "memories.context:note",
        *({"fts.content:message", "fts.context:message", "fts.context:note"} if db.backend == "sqlite" else
          {"memories.content_words:message", "memories.context_words:message", "memories.context_words:note"}),
    }
    assert vector_facets(db, turns[0].seq) == ["content", "context"]


async def test_audit_only_replaces_covered_turns_by_their_digest_in_every_table_and_index(
    app: App, db: Database, settings: Settings
) -> None:
    conv, turns, note = await transcript(app, "audit-only")
    async with open_app(settings, background=False) as other:  # another process, its indexes loaded
        before = await other.recall.search(search_request("kumquat0", everywhere=True))
        assert turns[0].id in [h.memory.id for h in before.hits]

        assert await app.jobs.run_once()
        for turn in turns[:2]:
            content, context, role, actor, metadata, created_at = memory_row(db, turn.seq)
            digest = "sha256:" + hashlib.sha256(turn.content.encode()).hexdigest()
            assert (content, context, role, actor, created_at) == (digest, digest, turn.role, "ann", turn.created_at)
            assert meta(metadata)["redacted"] == "audit-only"
            assert vector_facets(db, turn.seq) == []
        for word in ("kumquat0", "kumquat1"):
            assert holders(db, word) == summary_only(db), word
        # The note and the third turn quoted them in their context: rewritten, to be embedded again.
        assert memory_row(db, note.seq)[1] == "the pantry code is persimmon"
        assert memory_row(db, turns[2].seq)[1] == "the pantry code is persimmon\nkumquat2 is on the table"
        assert vector_facets(db, note.seq) == vector_facets(db, turns[2].seq) == ["content"]
        assert vector_facets(db, turns[3].seq) == ["content", "context"]  # its context did not change
        await backfill(app)
        assert vector_facets(db, note.seq) == ["content", "context"]
        assert vector_facets(db, turns[0].seq) == []  # never embedded again
        assert await app.store.pending_count(app.indexer.model) == 0
        no_orphans(db)

        for searcher in (app, other):
            found = await searcher.recall.search(search_request("kumquat0", everywhere=True))
            ids = [h.memory.id for h in found.hits]
            assert turns[0].id not in ids and turns[1].id not in ids
            assert any(h.memory.kind == "summary" and "kumquat0" in h.memory.content for h in found.hits)
    # The turns stay in the transcript (who, when), with their digest for the text.
    history = await app.transcript.history(history_request(conv, 10))
    assert [m.content.startswith("sha256:") for m in history] == [True, True, False, False, False]
    [exported] = (await app.archive.export_all(conv))["conversations"]
    turns_out = [m["content"] for m in exported["memories"] if m.get("kind") == "message"]
    assert [t.startswith("sha256:") for t in turns_out] == [True, True, False, False, False]


async def test_ephemeral_deletes_covered_turns_and_at_the_end_every_turn_keeping_notes_and_summaries(
    app: App, db: Database
) -> None:
    conv, turns, note = await transcript(app, "ephemeral")
    assert await app.jobs.run_once()
    assert memory_row(db, turns[0].seq) == () and memory_row(db, turns[1].seq) == ()
    for word in ("kumquat0", "kumquat1"):
        assert holders(db, word) == summary_only(db), word
    assert memory_row(db, note.seq)[1] == "the pantry code is persimmon"
    no_orphans(db)
    assert [m.content for m in await app.transcript.history(history_request(conv, 10))] == [
        f"kumquat{i} is on the table" for i in (2, 3, 4)]
    built = await app.context.build(context_request(conv, 10_000))
    assert built.summary_included and "kumquat0" in built.messages[0]["content"]

    await app.conversations.end(conv)
    assert await app.jobs.run_once()  # the end summary covers the rest
    assert db.count("SELECT count(*) FROM memories WHERE conversation_id = ? AND kind = 'message'", conv) == 0
    assert db.count("SELECT count(*) FROM memories WHERE conversation_id = ? AND kind = 'note'", conv) == 1
    assert holders(db, "kumquat4") == {"memories.content:summary", "memories.context:summary", "conversations.summary",
                                       *({"fts.content:summary", "fts.context:summary"} if db.backend == "sqlite" else
                                         {"memories.content_words:summary", "memories.context_words:summary"})}
    no_orphans(db)
    await backfill(app)
    found = await app.recall.search(search_request("kumquat4", everywhere=True))
    assert [h.memory.kind for h in found.hits if "kumquat4" in h.memory.content] == ["summary"]


async def test_a_deleted_private_turn_keeps_participants_views_without_the_summary(app: App, db: Database) -> None:
    conv = await app.conversations.start(
        new_conversation("ops", {"retention": "ephemeral", "compact_after_messages": 2})
    )
    await app.transcript.add_messages(conv.id, parse_turns("messages", [
        {"role": "user", "content": "the vault code is quince", "actor": "ann", "to": ["bob"]},
        {"role": "user", "content": "lunch at noon", "actor": "ann"},
        {"role": "user", "content": "agreed", "actor": "carol"},
    ]))
    assert await app.jobs.run_once()
    assert db.count("SELECT count(*) FROM memories WHERE kind = 'message'") == 2  # the private turn went
    assert meta(db.rows("SELECT metadata FROM conversations")[0][0])["private_turns"] is True
    carol = await app.context.build(context_request(conv.id, 10_000, participants=["carol"]))
    assert carol.summary is None and "quince" not in json.dumps(carol.messages)
    # Bob's only turn addressed to him went with it; his view is still asked for by name.
    bob = await app.context.build(context_request(conv.id, 10_000, participants=["bob"]))
    assert [m.content for m in bob.recent] == ["lunch at noon", "agreed"] and bob.summary is None


async def test_audit_only_through_mcp_shows_digests_in_the_history_after_the_end_summary(
    settings: Settings, db: Database
) -> None:
    async with connect(settings, "legacy") as client:
        conv = (await call(client, "init_conversation", name="audited", metadata={"retention": "audit-only"}))[
            "conversation_id"]
        await call(client, "add_messages", messages=[
            {"role": "user", "content": "ship the tangerine release"},
            {"role": "assistant", "content": "tangerine shipped", "tool_calls": [
                {"function": {"name": "deploy", "arguments": {"target": "tangerine"}}}]},
        ])
        await call(client, "end_conversation")

        async def summarized() -> bool:
            return db.rows("SELECT summary_status FROM conversations WHERE id = ?", conv)[0][0] == "done"

        await eventually(summarized)
        page = (await client.read_resource(f"memory://conversations/{conv}/history")).contents[0].text
        assert "tangerine" not in page and page.count("sha256:") == 2
        assert db.rows("SELECT tool_calls FROM memories WHERE role = 'assistant'") == [(None,)]
        found = await call(client, "search_all_conversations", query="tangerine release")
        assert [hit["kind"] for hit in found["results"]] == ["summary"]


async def test_a_retention_that_needs_summaries_is_refused_without_a_chat_model(
    settings: Settings, db: Database
) -> None:


    async with open_app(replace(settings, chat_model=None), background=False) as app:
        for mode in ("audit-only", "ephemeral"):
            with pytest.raises(InvalidInputError, match=f"^metadata.retention: is '{mode}', but no chat model"):
                await app.conversations.start(new_conversation("x", {"retention": mode}))
        assert db.count("SELECT count(*) FROM conversations") == 0
        assert (await app.conversations.start(new_conversation("kept whole", {"retention": "full"}))).metadata[
            "retention"
        ] == "full"


async def test_audit_only_forgets_the_times_a_redacted_turn_named(app: App, db: Database) -> None:
    conv = await app.conversations.start(
        new_conversation("dates", {"retention": "audit-only", "compact_after_messages": 4})
    )
    turns: list[Memory] = []
    for i in range(5):
        turns += (await app.transcript.add_messages(conv.id, parse_turns("messages", [
            {"role": "user", "content": f"kumquat{i} arrived yesterday", "actor": "ann"}
        ])))[0]
    await backfill(app)
    spoken = "SELECT spoken_of FROM memories WHERE seq = ?"
    assert db.rows(spoken, turns[0].seq)[0][0].count("/") == 1  # the day before it was said
    assert await app.jobs.run_once()
    assert db.rows(spoken, turns[0].seq) == [("",)]  # a search naming that day no longer lifts it
    assert db.rows(spoken, turns[4].seq)[0][0].count("/") == 1  # not covered: kept


@pytest.mark.parametrize(("retention", "action"), [
    ("full", "compact"), ("audit-only", "compact_and_redact_turns"), ("ephemeral", "compact_and_delete_turns"),
])
async def test_a_compaction_and_its_redactions_or_deletions_are_audited_through_the_background_door(
    app: App, db: Database, retention: str, action: str
) -> None:
    conv, _, _ = await transcript(app, retention)
    before = db.count("SELECT count(*) FROM write_audit")
    assert await app.jobs.run_once()
    [summary] = db.rows("SELECT id FROM memories WHERE kind = 'summary'")
    assert db.rows("SELECT door, action, conversation_id, memory_id FROM write_audit ORDER BY id")[before:] == [
        ("background", action, conv, summary[0])]


async def test_an_end_summary_and_a_similar_conversations_link_are_audited_through_the_background_door(
    app: App, db: Database
) -> None:
    ids = []
    for name in ("first", "second"):
        conversation = await app.conversations.start(new_conversation(name))
        await app.memories.store(new_note("We chose PostgreSQL for billing because of row locks", conversation.id))
        await app.conversations.end(conversation.id)
        ids.append(conversation.id)
    while await app.jobs.run_once():
        await backfill(app)
    rows = db.rows("SELECT action, conversation_id FROM write_audit WHERE door = 'background' ORDER BY id")
    assert sorted(rows) == sorted([("summarize", ids[0]), ("summarize", ids[1]), ("relate", ids[0]),
                                   ("relate", ids[1])])
    summaries = {c: m for m, c in db.rows("SELECT id, conversation_id FROM memories WHERE kind = 'summary'")}
    audited = db.rows("SELECT conversation_id, memory_id FROM write_audit WHERE action = 'summarize'")
    assert set(audited) == set(summaries.items())

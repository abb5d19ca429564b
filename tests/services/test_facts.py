"""Facts, opt-in (``metadata.facts`` or OLLAMA_MCP_FACTS): extracted by the chat model (scripted
replies of the fake Ollama) under a JSON schema, redacted before anything is stored, stored as
memories of kind ``fact`` beside the memory each came from, searched, listed by build_context when
asked, exported, deleted with their source, and superseded by a newer contradicting fact; on both
backends."""

from __future__ import annotations

import json
import sqlite3
from dataclasses import replace
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp.shared.exceptions import MCPError

from ollama_mcp.app import App, open_app
from ollama_mcp.config import Settings
from ollama_mcp.errors import ConfigError, InvalidInputError, OllamaMcpError
from ollama_mcp.inputs.context import context_request
from ollama_mcp.inputs.conversations import new_conversation
from ollama_mcp.inputs.memories import note as new_note
from ollama_mcp.inputs.memories import note_change
from ollama_mcp.inputs.search import search_request
from ollama_mcp.inputs.turns import parse_turns
from ollama_mcp.services import export
from ollama_mcp.services.context import FACTS_NOTICE
from ollama_mcp.services.export import read_document
from ollama_mcp.services.facts import FACTS_SCHEMA, redaction
from ollama_mcp.services.transfer import copy_store
from ollama_mcp.storage.backends import open_backend
from ollama_mcp.storage.sqlite.store import Store
from tests.conftest import Database, connect, eventually, sqlite_store_at
from tests.support.facts import ended_with_facts, fact, fact_rows, facts_jobs, reply, run_jobs
from tests.support.fake_ollama import FakeOllama
from tests.support.mcp_client import call, error
from tests.support.view import view

pytestmark = pytest.mark.anyio


async def test_a_conversation_asking_for_facts_has_them_extracted_at_its_end_beside_their_source(
    app: App, db: Database, fake_ollama: FakeOllama
) -> None:
    conv, turns = await ended_with_facts(
        app, fake_ollama, reply(fact("Caroline", "moved to", "Boston", 1, exclusive=True),
                                fact("Caroline", "adopted", "a beagle named Ziggy", 3)),
        "I moved to Boston last spring", "How is it going?", "Great, and I adopted a beagle named Ziggy",
    )
    assert facts_jobs(db) == [("done", None)]
    request = fake_ollama.chat_requests()[-1].body
    assert request["format"] == FACTS_SCHEMA
    assert (
        "[1] [" in request["messages"][-1]["content"]
        and "user (caroline): I moved to Boston" in request["messages"][-1]["content"]
    )
    found = fact_rows(db)
    assert [(content, m["source"], m["confidence"], m["exclusive"]) for content, m, _, _ in found] == [
        ("Caroline moved to Boston", turns[0], 0.9, True),
        ("Caroline adopted a beagle named Ziggy", turns[2], 0.9, False),
    ]
    sources = {seq for (seq,) in db.rows("SELECT seq FROM memories WHERE id IN (?, ?)", turns[0], turns[2])}
    assert {source for _, _, source, _ in found} == sources
    assert all(m["written_by"] == app.settings.chat_model and m["fact_key"] for _, m, _, _ in found)
    # A fact is dated when it was said, and found by search like a note.
    said = db.rows("SELECT created_at FROM memories WHERE id = ?", turns[0])[0][0]
    assert db.rows("SELECT created_at FROM memories WHERE content = 'Caroline moved to Boston'")[0][0] == said
    while await app.indexer.backfill_once():
        pass
    outcome = await app.recall.search(search_request("Caroline moved to Boston", everywhere=True))
    assert ("fact", "Caroline moved to Boston") in [(h.memory.kind, h.memory.content) for h in outcome.hits]
    assert db.count("SELECT facts_through FROM conversations WHERE id = ?", conv) == max(
        seq for (seq,) in db.rows("SELECT seq FROM memories WHERE conversation_id = ? AND kind = 'message'", conv)
    )


async def test_conversations_that_do_not_ask_get_no_facts_job_and_no_facts(
    settings: Settings, db: Database, fake_ollama: FakeOllama
) -> None:
    async with open_app(replace(settings, facts=True), background=False) as app:  # the server's default: on
        kept_out = await app.conversations.start(new_conversation("private", {"facts": False}))
        default = await app.conversations.start(new_conversation("default"))
        for conv in (kept_out, default):
            await app.memories.store(new_note("Caroline moved to Boston", conv.id))
            await app.conversations.end(conv.id, summary="a move")
        jobs = db.rows("SELECT conversation_id FROM jobs WHERE kind = 'facts'")
        assert jobs == [(default.id,)]
    async with open_app(settings, background=False) as app:  # the default: off
        plain = await app.conversations.start(new_conversation("plain"))
        await app.memories.store(new_note("Melanie paints sunsets", plain.id))
        await app.conversations.end(plain.id, summary="painting")
        await run_jobs(app)
    assert db.count("SELECT count(*) FROM jobs WHERE kind = 'facts' AND conversation_id = ?", plain.id) == 0
    assert db.count("SELECT count(*) FROM memories WHERE kind = 'fact'") == 0


async def test_secrets_and_contact_details_are_dropped_before_anything_is_stored(
    app: App, db: Database, fake_ollama: FakeOllama
) -> None:
    await ended_with_facts(
        app, fake_ollama, reply(
            fact("Caroline", "has the email address", "caro@example.org", 1),
            fact("Caroline", "can be reached at", "+1 415 555 0132", 1),
            fact("Caroline's wifi", "password is", "hunter2", 1),
            fact("the deploy key", "is", "sk-live-4f9a8b7c6d5e4f3a2b1c0d9e", 1),
            fact("Caroline", "card", "4111 1111 1111 1111", 1),
            fact("Caroline", "moved to Boston on", "2023-05-08", 1, exclusive=True),
            fact("Caroline", "likes", "hiking", 1, confidence=0.3),
        ),
        "I moved to Boston on 2023-05-08; mail me at caro@example.org or call +1 415 555 0132",
    )
    assert [content for content, _, _, _ in fact_rows(db)] == ["Caroline moved to Boston on 2023-05-08"]
    for secret in ("caro@example.org", "555 0132", "hunter2", "sk-live", "4111"):
        assert (
            db.count(
                "SELECT count(*) FROM memories WHERE kind = 'fact' AND (content LIKE ? OR CAST(metadata AS TEXT)"
                " LIKE ?)",
                f"%{secret}%",
                f"%{secret}%",
            )
            == 0
        ), secret


@pytest.mark.parametrize(("parts", "why"), [
    (("Ann", "email", "ann at home"), "a secret or contact detail named"),
    (("Ann", "writes to", "ann.lee@mail.co.uk"), "an email address"),
    (("Ann", "uses", "ghp_abcdefghijklmnopqrstuvwxyz012345"), "a secret"),
    (("Ann", "pushes to", "https://ann:s3cret@git.example.com/x"), "a secret"),
    (("Ann", "uses the token", "Zm9vYmFyYmF6cXV4MTIzNDU2Nzg5MGFiY2RlZg"), "a secret"),
    (("Ann", "is on", "(415) 555-0132 ext 9"), "a phone number"),
    (("Ann", "pays with", "4111-1111-1111-1111"), "a card number"),
    (("Ann", "banks at", "DE89 3704 0044 0532 0130 00"), "a bank account number"),
    (("Ann", "was born on", "1990-04-12"), None),
    (("Ann", "ran", "10 km in 52:30 on 2024-06-01 at 07:15"), None),
    (("Ann", "paid", "1,250 euros in 2023"), None),
    (("Ann", "lives in", "Lisbon"), None),
])
def test_redaction_names_what_makes_a_fact_unfit_and_keeps_dates_and_amounts(
    parts: tuple[str, ...], why: str | None
) -> None:
    assert redaction(*parts) == why


async def test_a_malformed_reply_leaves_the_job_waiting_with_its_reason_and_stores_nothing(
    app: App, db: Database, fake_ollama: FakeOllama
) -> None:
    conv, _ = await ended_with_facts(app, fake_ollama, "Caroline moved to Boston", "I moved to Boston")
    state, reason = facts_jobs(db)[0]
    assert state == "queued" and "did not reply with JSON for the facts" in (reason or "")
    assert db.count("SELECT count(*) FROM memories WHERE kind = 'fact'") == 0
    assert db.count("SELECT facts_through FROM conversations WHERE id = ?", conv) == 0
    fake_ollama.enqueue_chat(json.dumps({"facts": [{"subject": "Caroline", "predicate": "moved to", "object": 3}]}))
    db.rows("UPDATE jobs SET run_after = '2000-01-01' WHERE kind = 'facts'")
    await run_jobs(app)
    state, reason = facts_jobs(db)[0]
    assert state == "queued" and "malformed fact (facts[0])" in (reason or "")
    fake_ollama.enqueue_chat(reply(fact("Caroline", "moved to", "Boston", 1), fact("Ghost", "is", "unattributed", 7)))
    db.rows("UPDATE jobs SET run_after = '2000-01-01' WHERE kind = 'facts'")
    await run_jobs(app)
    assert [state for state, _ in facts_jobs(db)] == ["done"]
    assert [content for content, _, _, _ in fact_rows(db)] == ["Caroline moved to Boston"]  # line 7 is not there


async def test_a_fact_goes_with_the_memory_it_came_from_and_leaves_search_at_once(
    app: App, db: Database, fake_ollama: FakeOllama
) -> None:
    conv = await app.conversations.start(new_conversation("notes", {"facts": True}))
    note = (await app.memories.store(new_note("Melanie signed up for a pottery class", conv.id))).memory
    other = (await app.memories.store(new_note("Melanie runs on Sundays", conv.id))).memory
    fake_ollama.enqueue_chat(
        reply(fact("Melanie", "signed up for", "a pottery class", 1), fact("Melanie", "runs on", "Sundays", 2))
    )
    await app.facts.catch_up(conv.id)
    while await app.indexer.backfill_once():
        pass
    hits = await app.recall.search(search_request("pottery class", everywhere=True))
    # The fact says what its note says, word for word: one hit, the fact folded into it.
    assert {m.kind for h in hits.hits for m in (h.memory, *h.also)} == {"note", "fact"}
    await app.memories.delete(note.id)
    assert [content for content, _, _, _ in fact_rows(db)] == ["Melanie runs on Sundays"]
    hits = await app.recall.search(search_request("pottery class", everywhere=True))
    assert not [h for h in hits.hits if "pottery" in h.memory.content]
    assert db.count("SELECT count(*) FROM memory_embeddings WHERE memory_seq NOT IN (SELECT seq FROM memories)") == 0
    assert other.id in {m["source"] for _, m, _, _ in fact_rows(db)}
    # Deleting the conversation deletes the rest.
    await app.conversations.delete(conv.id)
    assert db.count("SELECT count(*) FROM memories WHERE kind = 'fact'") == 0


async def test_a_newer_contradicting_fact_supersedes_the_older_and_the_older_returns_when_it_goes(
    app: App, db: Database, fake_ollama: FakeOllama
) -> None:
    first = await app.conversations.start(new_conversation("spring", {"facts": True}))
    paris = (await app.memories.store(new_note("I live in Paris and I like pizza", first.id))).memory
    fake_ollama.enqueue_chat(reply(fact("the user", "lives in", "Paris", 1, exclusive=True),
                                   fact("the user", "likes", "pizza", 1)))
    await app.facts.catch_up(first.id)
    second = await app.conversations.start(new_conversation("autumn", {"facts": True}))
    berlin = (await app.memories.store(new_note("I moved: I live in Berlin now, and I like hiking", second.id))).memory
    fake_ollama.enqueue_chat(reply(fact("The User", "lives  in", "Berlin", 1, exclusive=True),
                                   fact("the user", "likes", "hiking", 1), fact("the user", "likes", "Pizza", 1)))
    await app.facts.catch_up(second.id)
    by_content = {content: (m, superseded) for content, m, _, superseded in fact_rows(db)}
    assert set(by_content) == {"the user lives in Paris", "the user likes pizza", "The User lives in Berlin",
                               "the user likes hiking"}  # pizza once: the same fact again is not stored
    berlin_fact = db.rows("SELECT id FROM memories WHERE content = 'The User lives in Berlin'")[0][0]
    assert by_content["the user lives in Paris"][1] == berlin_fact
    assert by_content["the user likes pizza"][1] is None and by_content["the user likes hiking"][1] is None
    while await app.indexer.backfill_once():
        pass
    hits = await app.recall.search(search_request("the user lives in", everywhere=True))
    assert "the user lives in Paris" not in [h.memory.content for h in hits.hits]
    assert "The User lives in Berlin" in [h.memory.content for h in hits.hits]
    # The memory that said Berlin is deleted, so is its fact: Paris is current again.
    await app.memories.delete(berlin.id)
    assert db.rows("SELECT superseded_by FROM memories WHERE content = 'the user lives in Paris'") == [(None,)]
    assert paris.id in {m["source"] for _, m, _, _ in fact_rows(db)}


async def test_a_fact_said_earlier_but_extracted_later_is_stored_already_superseded(
    app: App, db: Database, fake_ollama: FakeOllama
) -> None:
    old = await app.conversations.start(new_conversation("old", {"facts": True}))
    await app.memories.store(new_note("I work at Acme", old.id))
    new = await app.conversations.start(new_conversation("new", {"facts": True}))
    await app.memories.store(new_note("I work at Globex now", new.id))
    fake_ollama.enqueue_chat(reply(fact("the user", "works at", "Globex", 1, exclusive=True)))
    await app.facts.catch_up(new.id)
    fake_ollama.enqueue_chat(reply(fact("the user", "works at", "Acme", 1, exclusive=True)))
    await app.facts.catch_up(old.id)
    current = db.rows("SELECT content FROM memories WHERE kind = 'fact' AND superseded_by IS NULL")
    assert current == [("the user works at Globex",)]


async def test_audit_only_retention_extracts_facts_before_compaction_redacts_the_turns(
    app: App, db: Database, fake_ollama: FakeOllama
) -> None:
    conv = await app.conversations.start(
        new_conversation("audit", {"facts": True, "retention": "audit-only", "compact_after_messages": 4})
    )
    for i in range(5):
        await app.transcript.add_messages(
            conv.id, parse_turns("messages", [{"role": "user", "content": f"turn {i}: my sister Ana lives in Porto"}])
        )
    fake_ollama.enqueue_chat(reply(fact("Ana", "lives in", "Porto", 1, exclusive=True)))
    assert await app.jobs.run_once()  # compaction: facts first, then the summary (the fake's default)
    first = db.rows("SELECT id FROM memories WHERE kind = 'message' ORDER BY seq LIMIT 1")[0][0]
    assert [(c, m["source"]) for c, m, _, _ in fact_rows(db)] == [("Ana lives in Porto", first)]
    # redacted, fact kept
    assert db.rows("SELECT content FROM memories WHERE id = ?", first)[0][0].startswith("sha256:")
    assert db.count("SELECT count(*) FROM jobs WHERE kind = 'facts'") == 0  # done inline, nothing queued


async def test_ephemeral_retention_deletes_the_facts_of_the_turns_it_deletes(
    app: App, db: Database, fake_ollama: FakeOllama
) -> None:
    conv = await app.conversations.start(
        new_conversation("gone", {"facts": True, "retention": "ephemeral", "compact_after_messages": 4})
    )
    await app.memories.store(new_note("Ana's favourite colour is green", conv.id))
    await app.transcript.add_messages(
        conv.id, parse_turns("messages", [{"role": "user", "content": "Ana lives in Porto"}])
    )
    fake_ollama.enqueue_chat(reply(fact("Ana", "likes the colour", "green", 1), fact("Ana", "lives in", "Porto", 2)))
    await app.facts.catch_up(conv.id)
    for i in range(4):
        await app.transcript.add_messages(
            conv.id, parse_turns("messages", [{"role": "user", "content": f"more talk {i}"}])
        )
    await run_jobs(app)
    assert [c for c, _, _, _ in fact_rows(db)] == ["Ana likes the colour green"]  # the note's fact stays


async def test_build_context_lists_facts_only_when_asked(app: App, db: Database, fake_ollama: FakeOllama) -> None:
    await ended_with_facts(app, fake_ollama, reply(fact("Caroline", "moved to", "Boston", 1, exclusive=True)),
                           "I moved to Boston last spring")
    while await app.indexer.backfill_once():
        pass
    conv = await app.conversations.start(new_conversation("later"))
    await app.transcript.add_messages(
        conv.id, parse_turns("messages", [{"role": "user", "content": "Where did Caroline move to?"}])
    )
    plain = await app.context.build(context_request(conv.id))
    assert not any(FACTS_NOTICE in m["content"] for m in plain.messages) and plain.facts == []
    built = await app.context.build(context_request(conv.id, facts=True))
    assert [m.content for m in built.facts] == ["Caroline moved to Boston"]
    block = next(m["content"] for m in built.messages if FACTS_NOTICE in m["content"])
    assert 'kind="fact"' in block and "Caroline moved to Boston" in block
    assert all(m.kind != "fact" for m in built.recalled)  # not twice
    with pytest.raises(InvalidInputError, match="facts: must be true or false"):
        await app.context.build(context_request(conv.id, facts="yes"))


async def test_the_build_context_prompt_takes_facts_and_refuses_other_values(
    settings: Settings, fake_ollama: FakeOllama
) -> None:
    async with connect(settings) as client:
        conv = await call(client, "init_conversation", name="x", metadata={"facts": True})
        await call(client, "store_memory", content="Caroline moved to Boston", conversation_id=conv["conversation_id"])
        async with open_app(settings, background=False) as app:
            fake_ollama.enqueue_chat(reply(fact("Caroline", "moved to", "Boston", 1)))
            await app.facts.catch_up(conv["conversation_id"])
        prompt = await client.get_prompt("build_context", {"conversation_id": conv["conversation_id"], "facts": "true"})
        texts = [m.content.text for m in prompt.messages]
        assert any(FACTS_NOTICE in t and "Caroline moved to Boston" in t for t in texts)
        with pytest.raises(MCPError, match="facts: must be true or false"):
            await client.get_prompt("build_context", {"conversation_id": conv["conversation_id"], "facts": "maybe"})


async def test_metadata_facts_is_checked_and_needs_a_chat_model(settings: Settings, db: Database) -> None:
    async with connect(settings) as client:
        text = await error(client, "init_conversation", name="x", metadata={"facts": "yes"})
        assert "metadata.facts: is 'yes', not true or false" in text and "OLLAMA_MCP_FACTS" in text
        text = await error(client, "init_conversation", name="x", metadata={"fact": True})
        assert "metadata.fact: is not a setting" in text and "did you mean facts?" in text
    async with connect(replace(settings, chat_model=None)) as client:
        text = await error(client, "init_conversation", name="x", metadata={"facts": True})
        assert "metadata.facts: is true, but no chat model is configured" in text
    assert db.count("SELECT count(*) FROM conversations") == 0


def test_the_server_default_is_a_switch_that_needs_a_chat_model() -> None:
    assert Settings.from_env({"OLLAMA_MCP_FACTS": "on"}).facts is True
    assert Settings.from_env({}).facts is False
    with pytest.raises(ConfigError, match="OLLAMA_MCP_FACTS must be on or off"):
        Settings.from_env({"OLLAMA_MCP_FACTS": "sometimes"})
    with pytest.raises(ConfigError, match="OLLAMA_MCP_FACTS=on asks the chat model.*OLLAMA_MCP_CHAT_MODEL=none"):
        Settings.from_env({"OLLAMA_MCP_FACTS": "on", "OLLAMA_MCP_CHAT_MODEL": "none"})


async def test_update_memory_refuses_a_fact(app: App, db: Database, fake_ollama: FakeOllama) -> None:
    await ended_with_facts(app, fake_ollama, reply(fact("Caroline", "moved to", "Boston", 1)), "I moved to Boston")
    fact_id = db.rows("SELECT id FROM memories WHERE kind = 'fact'")[0][0]
    with pytest.raises(InvalidInputError, match="memory_id: names a fact the chat model extracted"):
        await app.memories.update(note_change(fact_id, "Caroline moved to Denver"))
    assert db.count("SELECT count(*) FROM memories WHERE kind = 'fact'") == 1


async def test_facts_are_exported_and_imported_beside_their_source(
    app: App, db: Database, fake_ollama: FakeOllama, another_database: Any
) -> None:
    conv, turns = await ended_with_facts(
        app, fake_ollama, reply(fact("Caroline", "moved to", "Boston", 1)), "I moved to Boston"
    )
    document = await app.archive.export_all(conv)
    exported = [m for m in document["conversations"][0]["memories"] if m["kind"] == "fact"]
    assert [(m["content"], m["metadata"]["source"]) for m in exported] == [("Caroline moved to Boston", turns[0])]
    target = another_database()
    async with open_app(target.settings(app.settings), background=False) as other:
        assert await other.archive.import_document(document) == (1, 3)  # the turn, the summary, the fact
        assert await other.archive.import_document(document) == (0, 0)
    rows = target.rows(
        "SELECT f.content, s.id FROM memories f JOIN memories s ON s.seq = f.source_seq WHERE f.kind = 'fact'"
    )
    assert rows == [("Caroline moved to Boston", turns[0])]
    assert target.count("SELECT facts_through FROM conversations") == target.count(
        "SELECT seq FROM memories WHERE id = ?", turns[0])


def test_an_export_whose_fact_lost_its_source_is_refused_naming_the_field() -> None:
    base = {"format": "ollama-mcp-export", "version": 1, "conversations": [{
        "id": "6f1c3b8e-2d4a-4b7e-9a51-3c2e1d0f9a8b", "status": "completed", "created_at": "2026-01-01T00:00:00Z",
        "memories": [{"id": "0b8e7f6a-5d4c-4b3a-9e2d-1c0b9a8f7e6d", "kind": "fact", "content": "Ann likes tea",
                      "created_at": "2026-01-01T00:00:00Z",
                      "metadata": {"subject": "Ann", "predicate": "likes", "object": "tea",
                                   "source": "1a2b3c4d-5e6f-4a7b-8c9d-0e1f2a3b4c5d"}}],
    }]}
    base["format"], base["version"] = export.FORMAT, export.VERSION
    with pytest.raises(
        InvalidInputError, match=r"conversations\[0\]\.memories\[0\]\.metadata\.source: names no note or"
    ):
        read_document(base)
    del base["conversations"][0]["memories"][0]["metadata"]["subject"]  # type: ignore[index]
    with pytest.raises(InvalidInputError, match=r"memories\[0\]\.metadata\.subject: is missing from a fact"):
        read_document(base)


@pytest.mark.sqlite_only
async def test_the_memories_table_rebuilt_for_facts_keeps_every_row_vector_tag_and_keyword(db_path: Path) -> None:
    sqlite_store_at(db_path, 9)
    with sqlite3.connect(db_path, isolation_level=None) as conn:
        conn.execute("PRAGMA foreign_keys = ON")
        conn.execute("INSERT INTO conversations (id, created_at) VALUES ('c1', '2026-01-01')")
        conn.execute(
            "INSERT INTO memories (seq, id, conversation_id, kind, content, content_hash, context, tags, created_at)"
            " VALUES (7, 'm7', 'c1', 'note', 'the quince jam recipe', 'h7', 'the quince jam recipe', '[\"food\"]',"
            " '2026-01-01')"
        )
        conn.execute("INSERT INTO memory_tags VALUES (7, 'food')")
        conn.execute("INSERT INTO memory_embeddings (memory_seq, model, facet, chunk_index, dim, vector, created_at)"
                     " VALUES (7, 'm', 'content', 0, 1, x'0000803f', '2026-01-01')")
    store = await Store.open(db_path)
    await store.aclose()
    with sqlite3.connect(db_path) as conn:
        conn.execute("PRAGMA foreign_keys = ON")
        assert conn.execute("SELECT seq, id, kind FROM memories").fetchall() == [(7, "m7", "note")]
        assert conn.execute("SELECT memory_seq FROM memory_embeddings").fetchall() == [(7,)]
        assert conn.execute("SELECT memory_seq, tag FROM memory_tags").fetchall() == [(7, "food")]
        assert conn.execute("SELECT rowid FROM memories_fts WHERE memories_fts MATCH 'quince'").fetchall() == [(7,)]
        assert conn.execute("PRAGMA foreign_key_check").fetchall() == []
        assert conn.execute("PRAGMA foreign_keys").fetchone() == (1,)
        conn.execute(
            "INSERT INTO memories (id, conversation_id, conversation_key, kind, content, created_at,"
            " metadata, source_seq) VALUES ('f1', 'c1', 1, 'fact', 'jam is quince', 'x', '{}', 7)"
        )
        with pytest.raises(sqlite3.IntegrityError, match="CHECK"):  # a fact needs its source
            conn.execute("INSERT INTO memories (id, conversation_id, conversation_key, kind, content,"
                         " created_at) VALUES ('f2', 'c1', 1, 'fact', 'orphan', 'x')")
        conn.execute("DELETE FROM memories WHERE seq = 7")
        assert conn.execute("SELECT count(*) FROM memories").fetchone() == (0,)  # the fact went with its source
        assert conn.execute("SELECT count(*) FROM memories_fts WHERE memories_fts MATCH 'quince'").fetchone() == (0,)


async def test_the_conversation_page_lists_its_current_facts_with_their_source(
    app: App, db: Database, fake_ollama: FakeOllama
) -> None:
    conv = await app.conversations.start(new_conversation("jobs", {"facts": True}))
    note = (await app.memories.store(new_note("I worked at Acme, now I work at Globex", conv.id))).memory
    fake_ollama.enqueue_chat(reply(fact("the user", "works at", "Acme", 1, exclusive=True),
                                   fact("the user", "works at", "Globex", 1, exclusive=True, confidence=0.8)))
    await app.facts.catch_up(conv.id)
    async with view(app) as client:
        page = (await client.get(f"/conversations/{conv.id}")).text
    assert "<h2>Facts</h2>" in page and "the user works at Globex" in page and "confidence 0.8" in page
    assert f'href="#m-{note.id}"' in page
    assert "the user works at Acme" not in page  # superseded (the same source, said later in the batch)


@pytest.mark.sqlite_only
async def test_migrate_copies_facts_beside_their_sources_with_their_versions(
    app: App, settings: Settings, fake_ollama: FakeOllama, postgres_url: str
) -> None:
    first = await app.conversations.start(new_conversation("spring", {"facts": True}))
    await app.memories.store(new_note("I live in Paris", first.id))
    fake_ollama.enqueue_chat(reply(fact("the user", "lives in", "Paris", 1, exclusive=True)))
    await app.facts.catch_up(first.id)
    second = await app.conversations.start(new_conversation("autumn", {"facts": True}))
    berlin = (await app.memories.store(new_note("I live in Berlin now", second.id))).memory
    fake_ollama.enqueue_chat(reply(fact("the user", "lives in", "Berlin", 1, exclusive=True)))
    await app.facts.catch_up(second.id)
    target, _ = await open_backend(settings.with_database(postgres_url, "url"))
    try:
        report = await copy_store(app.store, target)
    finally:
        await target.aclose()
    assert report.totals["memories"] == 4
    copied = Database("postgres", postgres_url)
    rows = copied.rows("SELECT f.content, s.content, f.superseded_by IS NULL FROM memories f"
                       " JOIN memories s ON s.seq = f.source_seq WHERE f.kind = 'fact' ORDER BY f.content")
    assert rows == [("the user lives in Berlin", "I live in Berlin now", True),
                    ("the user lives in Paris", "I live in Paris", False)]
    assert copied.rows("SELECT facts_through > 0 FROM conversations") == [(True,), (True,)]
    copied.rows("DELETE FROM memories WHERE id = ?", berlin.id)  # the copy keeps the rules: Paris comes back
    assert copied.rows("SELECT content FROM memories WHERE kind = 'fact' AND superseded_by IS NULL") == [
        ("the user lives in Paris",)]


async def test_a_long_conversation_is_read_in_batches_whose_facts_stay_when_a_later_request_fails(
    app: App, db: Database, fake_ollama: FakeOllama
) -> None:
    conv = await app.conversations.start(new_conversation("long", {"facts": True}))
    notes = [(await app.memories.store(new_note(f"note {i} " + f"word{i} " * 300, conv.id))).memory for i in range(10)]
    # Two notes a request (1,800 characters each, a request 4,000), four requests a batch: 4 + 1 requests.
    fake_ollama.enqueue_chat(*[reply(fact(f"note {2 * r}", "is", f"number {2 * r}", 1)) for r in range(4)])
    fake_ollama.enqueue_chat({"_status": (500, "model runner crashed")})
    with pytest.raises(OllamaMcpError, match="failed to chat .*HTTP 500.*It will be retried"):
        await app.facts.catch_up(conv.id)
    assert db.count("SELECT facts_through FROM conversations WHERE id = ?", conv.id) == notes[7].seq
    assert db.count("SELECT count(*) FROM memories WHERE kind = 'fact'") == 4
    assert [len(r.body["messages"][-1]["content"].splitlines()) for r in fake_ollama.chat_requests()] == [2, 2, 2, 2, 2]
    fake_ollama.enqueue_chat(reply(fact("note 9", "is", "number 9", 2)))
    assert await app.facts.catch_up(conv.id) == 1  # the rest only
    sources = [m["source"] for _, m, _, _ in fact_rows(db)]
    assert sources == [notes[0].id, notes[2].id, notes[4].id, notes[6].id, notes[9].id]


async def test_facts_reach_an_mcp_client_through_search_with_their_kind(
    settings: Settings, fake_ollama: FakeOllama
) -> None:
    async with connect(settings) as client:
        conv = await call(client, "init_conversation", name="pets", metadata={"facts": True})
        await call(
            client, "store_memory", content="We adopted a beagle called Ziggy", conversation_id=conv["conversation_id"]
        )
        fake_ollama.enqueue_chat(reply(fact("the family", "adopted", "a beagle called Ziggy", 1)))
        await call(client, "end_conversation", conversation_id=conv["conversation_id"], summary="a new dog")

        async def found() -> list[tuple[str, str]]:
            hits = (await call(client, "search_all_conversations", query="beagle Ziggy"))["results"]
            return [(h["kind"], h["content"]) for h in hits if h["kind"] == "fact"]

        assert await eventually(found) == [("fact", "the family adopted a beagle called Ziggy")]


async def test_two_processes_catching_up_the_same_conversation_store_its_facts_once(
    settings: Settings, db: Database, fake_ollama: FakeOllama
) -> None:
    async with open_app(settings, background=False) as one, open_app(settings, background=False) as two:
        conv = await one.conversations.start(new_conversation("shared", {"facts": True}))
        await one.memories.store(new_note("Ana plays the cello", conv.id))
        # The two readings differ (small models are not deterministic): one of them is kept, whole.
        fake_ollama.enqueue_chat(reply(fact("Ana", "plays", "the cello", 1)), reply(fact("Ana", "plays", "a cello", 1)))
        fake_ollama.chat_delay = 0.2  # both read before either stores
        async with anyio.create_task_group() as tasks:
            for app in (one, two):
                tasks.start_soon(app.facts.catch_up, conv.id)
    assert len(fake_ollama.chat_requests()) == 2
    assert [c for c, _, _, _ in fact_rows(db)] in (["Ana plays the cello"], ["Ana plays a cello"])


async def test_facts_extracted_in_the_background_leave_an_audit_row_naming_the_conversation(
    app: App, db: Database, fake_ollama: FakeOllama
) -> None:
    conv, _ = await ended_with_facts(
        app, fake_ollama, reply(fact("Caroline", "moved to", "Boston", 1, exclusive=True)), "I moved to Boston",
    )
    assert db.rows("SELECT door, action, conversation_id FROM write_audit WHERE action = 'extract_facts'") == [
        ("background", "extract_facts", conv)]

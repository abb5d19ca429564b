"""`ollama-mcp migrate --to`: a whole store copied between SQLite and PostgreSQL, ids kept,
idempotent, resumable, and counted at the end."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import anyio
import pytest

from ollama_mcp.app import open_app
from ollama_mcp.cli import admin
from ollama_mcp.config import Settings
from ollama_mcp.domain import AuditRow, ConversationShare, utc_now
from ollama_mcp.errors import StorageError
from ollama_mcp.inputs.conversations import new_conversation
from ollama_mcp.inputs.memories import note as new_note
from ollama_mcp.inputs.memories import note_change, notes_to_import
from ollama_mcp.inputs.search import search_request
from ollama_mcp.inputs.turns import parse_turns
from ollama_mcp.services import tokens
from ollama_mcp.services.transfer import check_counts, copy_store
from ollama_mcp.storage.backends import open_backend
from tests.conftest import Database
from tests.support.fake_ollama import FakeOllama

# The source of each copy is the settings' SQLite file; the other side is PostgreSQL.
pytestmark = [pytest.mark.anyio, pytest.mark.sqlite_only]

SCRIPT = Path(sys.executable).parent / "ollama-mcp"
QUERIES = ["lisbon flights", "what did we decide about the database", "hotel", "painted crane", "tuesday"]


def cli(database: str, fake: FakeOllama, *args: str) -> subprocess.CompletedProcess[str]:
    env = {"PATH": os.environ.get("PATH", ""), "HOME": "/nonexistent", "OLLAMA_HOST": fake.url,
           "OLLAMA_MCP_DB": database, "OLLAMA_MCP_EMBED_TIMEOUT": "2"}
    return subprocess.run([str(SCRIPT), *args], capture_output=True, text=True, timeout=120, env=env, cwd="/")


async def fill(settings: Settings) -> None:
    """Every kind of row: notes with tags and versions, messages, a given and a pending summary,
    an audit trail, queued jobs, a follow-up, and vectors of every memory."""
    async with open_app(settings, background=False) as app:
        trip = await app.conversations.start(new_conversation("trip", {"ttl_hours": 1000}))
        first = await app.memories.store(new_note("Flights to Lisbon on May 3", trip.id, ["travel"]))
        await app.memories.update(note_change(first.memory.id, content="Flights to Lisbon on May 4"))
        await app.transcript.add_message(trip.id, "user", "book the hotel too", actor="ana")
        await app.transcript.add_message(trip.id, "assistant", "Booked the hotel by the river")
        await app.store.insert_audit([AuditRow("r1", trip.id, 1, "search_memories", "ab" * 32, "low", "ran", "ok", 3.5,
                                               utc_now())])
        await app.conversations.end(trip.id)  # queues a summary job (never run here)
        work = await app.conversations.start(new_conversation("work", follows=trip.id))
        await app.memories.import_notes(
            notes_to_import(
                work.id,
                ["We chose PostgreSQL for billing", "the crane is painted orange", "the zeppelin arrives tuesday"],
            )
        )
        await app.conversations.end(work.id, "Database decided")
        # trip also recorded work as related: the pair has a row each way, the score on trip's only.
        await app.store.set_similar(trip.id, [(work.id, "related", 0.8)], utc_now())
        while await app.indexer.backfill_once():
            pass


async def picture(settings: Settings) -> tuple[dict[str, object], list[list[str]], list[tuple[object, ...]]]:
    """What a store holds as a user sees it: its export, the hits of fixed queries, jobs and audit."""
    async with open_app(settings, background=False) as app:
        document = await app.archive.export_all()
        document["exported_at"] = None
        hits = [[h.memory.id for h in (await app.recall.search(search_request(q, everywhere=True, top_k=5))).hits]
                for q in QUERIES]
        extras: list[tuple[object, ...]] = []
        for conversation_id in await app.store.conversation_ids():
            jobs, audit = await app.store.conversation_extras(conversation_id)
            extras += [(j.kind, j.state, j.attempts, j.run_after, j.created_at) for j in jobs]
            extras += [(a.request_id, a.step, a.tool, a.decision, a.duration_ms) for a in audit]
            extras += [(conversation_id, r.conversation_id, r.kind, r.score, r.follows, r.created_at)
                       for r in await app.store.relations(conversation_id)]
    return document, hits, extras


async def test_a_round_trip_sqlite_postgresql_sqlite_keeps_every_row_and_every_search_result(
    settings: Settings, tmp_path: Path, postgres_url: str, fake_ollama: FakeOllama
) -> None:
    first, back = str(tmp_path / "a" / "memory.db"), str(tmp_path / "b" / "memory.db")
    await fill(settings.with_database(first, "path"))
    done = await anyio.to_thread.run_sync(lambda: cli(first, fake_ollama, "migrate", "--to", postgres_url))
    assert done.returncode == 0, done.stderr
    # trip: two versions of a note and two messages; work: three notes and the given summary
    assert ("2 new conversation(s), 8 new memories, 16 new vectors; counts match (2 conversations, 8 memories,"
            " 16 vectors, 2 jobs, 1 audit rows, 2 relations)") in done.stdout
    assert "postgres:" not in done.stdout.replace("PostgreSQL at", "")  # no password or user printed
    again = await anyio.to_thread.run_sync(lambda: cli(first, fake_ollama, "migrate", "--to", postgres_url))
    assert "0 new conversation(s), 0 new memories, 0 new vectors; counts match" in again.stdout
    home = await anyio.to_thread.run_sync(lambda: cli(postgres_url, fake_ollama, "migrate", "--to", back))
    assert home.returncode == 0, home.stderr
    original = await picture(settings.with_database(first, "path"))
    assert await picture(settings.with_database(back, "path")) == original
    on_postgres = await picture(settings.with_database(postgres_url, "url"))
    assert on_postgres[0] == original[0] and on_postgres[2] == original[2]
    assert [hits[:1] for hits in on_postgres[1]] == [hits[:1] for hits in original[1]]  # (the best hit, if any)


async def test_an_interrupted_copy_is_resumed_by_running_it_again(
    settings: Settings, db_path: Path, postgres_url: str
) -> None:
    await fill(settings)
    source, _ = await open_backend(settings)
    target, _ = await open_backend(settings.with_database(postgres_url, "url"))
    try:
        def die_after_the_first(done: int, total: int) -> None:
            raise KeyboardInterrupt  # as a kill between two conversations

        hnsw = "SELECT count(*) FROM pg_indexes WHERE starts_with(indexname, 'memory_embeddings_hnsw_')"
        with pytest.raises(KeyboardInterrupt):
            await copy_store(source, target, die_after_the_first)
        # the vector indexes are built once the copy completes (the next vector written builds them too)
        assert Database("postgres", postgres_url).rows(hnsw) == [(0,)]
        ids = await source.conversation_ids()
        # trip was copied but not its link (links go last); work not at all
        with pytest.raises(StorageError, match=f"conversation {ids[0]} has 1 relations rows in the source and 0"):
            await check_counts(source, target, ids)
        with pytest.raises(StorageError, match=f"conversation {ids[1]} has 4 memories rows in the source and 0"):
            await check_counts(source, target, ids[1:])
        report = await copy_store(source, target)
        assert (report.conversations, report.memories) == (1, 4)
        assert report.totals == {
            "conversations": 2,
            "memories": 8,
            "vectors": 16,
            "jobs": 2,
            "audit": 1,
            "relations": 2,
        }
        assert report.relations == 2
        assert Database("postgres", postgres_url).rows(hnsw) == [(2,)]  # content and context
    finally:
        await source.aclose()
        await target.aclose()


async def test_a_difference_after_the_copy_fails_loudly_naming_the_conversation_and_table(
    settings: Settings, postgres_url: str, fake_ollama: FakeOllama
) -> None:
    await fill(settings)
    source, _ = await open_backend(settings)
    target, _ = await open_backend(settings.with_database(postgres_url, "url"))
    try:
        await copy_store(source, target)
        Database("postgres", postgres_url).rows(
            "DELETE FROM memory_embeddings WHERE id = (SELECT max(id) FROM memory_embeddings)"
        )
        with pytest.raises(StorageError, match=r"has 8 vectors rows in the source and 7 in the target"):
            await check_counts(source, target, await source.conversation_ids())
    finally:
        await source.aclose()
        await target.aclose()


async def a_shared_server(settings: Settings) -> dict[str, str]:
    """What a team's HTTP server holds: alice's and bob's memory, their tokens (one revoked) and a
    conversation of alice's shared with bob. Returns the secrets by token name."""
    secrets = {}
    for name, principal in (("alice-laptop", "alice"), ("bob-old", "bob"), ("bob-phone", "bob")):
        secrets[name] = (await admin.create_token(settings, name, principal))[1]
    await admin.revoke_token(settings, "bob-old")
    async with open_app(settings.for_principal("alice"), background=False) as app:
        plans = await app.conversations.start(new_conversation("plans"))
        await app.memories.store(new_note("the offsite is in Porto in June", plans.id))
    async with open_app(settings.for_principal("bob"), background=False) as app:
        await app.memories.store(
            new_note("bob prefers the window seat", (await app.conversations.start(new_conversation("bob"))).id)
        )
    local, _ = await open_backend(settings)
    try:
        await local.set_share(ConversationShare(plans.id, "bob", "alice", "write", utc_now()))
    finally:
        await local.aclose()
    return secrets


async def whole(settings: Settings) -> tuple[object, ...]:
    """A shared server's database as its users see it: every principal's export, the tokens, the shares."""
    exports = []
    for principal in ("alice", "bob"):
        async with open_app(settings.for_principal(principal), background=False) as app:
            document = await app.archive.export_all()
            exports.append({**document, "exported_at": None})
    local, _ = await open_backend(settings)
    try:
        return *exports, await local.list_tokens(), await local.all_shares()
    finally:
        await local.aclose()


async def test_migrate_copies_every_principals_memory_the_tokens_that_keep_working_and_the_shares(
    settings: Settings, tmp_path: Path, postgres_url: str, fake_ollama: FakeOllama
) -> None:
    first, back = settings.with_database(str(tmp_path / "a" / "memory.db"), "path"), str(tmp_path / "b" / "memory.db")
    secrets = await a_shared_server(first)
    done = await anyio.to_thread.run_sync(lambda: cli(str(first.db_path), fake_ollama, "migrate", "--to", postgres_url))
    assert done.returncode == 0, done.stderr
    assert "(principal alice): 1 new conversation(s), 1 new memories" in done.stdout
    assert "(principal bob): 1 new conversation(s), 1 new memories" in done.stdout
    assert "copied 3 new token(s) and 1 new share(s); the target holds all 3 token(s) and 1 share(s)" in done.stdout
    on_postgres = settings.with_database(postgres_url, "url")
    assert await whole(on_postgres) == await whole(first)
    target, _ = await open_backend(on_postgres)
    try:  # the secrets people hold open the same principals' memory there; the revoked one nothing
        assert (await tokens.verify(target, secrets["alice-laptop"])).principal == "alice"
        assert (await tokens.verify(target, secrets["bob-phone"])).principal == "bob"
        assert await tokens.verify(target, secrets["bob-old"]) is None
    finally:
        await target.aclose()
    # a token revoked at the source after the copy is revoked by the next run, which adds nothing else
    await admin.revoke_token(first, "bob-phone")
    again = await anyio.to_thread.run_sync(
        lambda: cli(str(first.db_path), fake_ollama, "migrate", "--to", postgres_url)
    )
    assert again.returncode == 0, again.stderr
    assert "(principal alice): 0 new conversation(s), 0 new memories" in again.stdout
    assert "copied 0 new token(s) and 0 new share(s)" in again.stdout
    assert [t.revoked_at is None for t in await admin.list_tokens(on_postgres)] == [True, False, False]
    home = await anyio.to_thread.run_sync(lambda: cli(postgres_url, fake_ollama, "migrate", "--to", back))
    assert home.returncode == 0, home.stderr
    assert await whole(settings.with_database(back, "path")) == await whole(first)


async def test_a_target_holding_a_token_name_with_another_secret_gets_no_tokens_and_says_which(
    settings: Settings, tmp_path: Path, fake_ollama: FakeOllama
) -> None:
    first, other = settings.with_database(str(tmp_path / "a" / "memory.db"), "path"), tmp_path / "b" / "memory.db"
    await a_shared_server(first)
    await admin.create_token(settings.with_database(str(other), "path"), "alice-laptop", "alice")
    done = await anyio.to_thread.run_sync(lambda: cli(str(first.db_path), fake_ollama, "migrate", "--to", str(other)))
    assert done.returncode != 0
    assert "already has an active token named 'alice-laptop' with another secret" in done.stderr
    assert "ollama-mcp token revoke" in done.stderr
    assert [t.name for t in await admin.list_tokens(settings.with_database(str(other), "path"))] == ["alice-laptop"]


def test_migrate_to_itself_or_to_a_bad_address_is_refused(db_path: Path, fake_ollama: FakeOllama) -> None:
    same = cli(str(db_path), fake_ollama, "migrate", "--to", str(db_path))
    assert same.returncode == 2 and "--to: names the store being copied" in same.stderr
    relative = cli(str(db_path), fake_ollama, "migrate", "--to", "copy.db")
    assert relative.returncode == 2 and "--to must be an absolute path" in relative.stderr
    other = cli(str(db_path), fake_ollama, "migrate", "--to", "mysql://u:pw@h/db")
    assert other.returncode == 2 and "--to is a mysql:// URL" in other.stderr and "pw" not in other.stderr
    assert same.stdout == relative.stdout == other.stdout == ""


async def test_a_chat_apps_tool_call_and_its_answer_are_migrated_with_the_call(
    settings: Settings, tmp_path: Path, postgres_url: str, fake_ollama: FakeOllama
) -> None:
    call_ = {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Lisbon"}'}}
    first = str(tmp_path / "a" / "memory.db")
    async with open_app(settings.with_database(first, "path"), background=False) as app:
        weather = await app.conversations.start(new_conversation("weather"))
        await app.transcript.add_messages(weather.id, parse_turns("messages", [
            {"role": "user", "content": "What is the weather in Lisbon?"},
            {"role": "assistant", "content": None, "tool_calls": [call_]},
            {"role": "tool", "tool_call_id": "call_1", "content": "18 degrees and sunny"},
        ]))
    done = await anyio.to_thread.run_sync(lambda: cli(first, fake_ollama, "migrate", "--to", postgres_url))
    assert done.returncode == 0, done.stderr
    async with open_app(settings.with_database(postgres_url, "url"), background=False) as app:
        turns = await app.store.messages(weather.id, 10)
    assert [(t.role, t.content, t.tool_calls, t.tool_call_id) for t in turns] == [
        ("user", "What is the weather in Lisbon?", (), None),
        ("assistant", "", (call_,), None),
        ("tool", "18 degrees and sunny", (), "call_1"),
    ]

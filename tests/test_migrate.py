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
from ollama_mcp.backends import open_backend
from ollama_mcp.config import Settings
from ollama_mcp.domain import AuditRow, utc_now
from ollama_mcp.errors import StorageError
from ollama_mcp.inputs import search_request
from ollama_mcp.transfer import check_counts, copy_store
from tests.conftest import Database
from tests.fake_ollama import FakeOllama

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
        svc = app.service
        trip = await svc.init_conversation("trip", {"ttl_hours": 1000})
        first = await svc.store_memory("Flights to Lisbon on May 3", trip.id, ["travel"])
        await svc.update_memory(first.memory.id, content="Flights to Lisbon on May 4")
        await app.lifecycle.add_message(trip.id, "user", "book the hotel too", actor="ana")
        await app.lifecycle.add_message(trip.id, "assistant", "Booked the hotel by the river")
        await app.store.insert_audit([AuditRow("r1", trip.id, 1, "search_memories", "ab" * 32, "low", "ran", "ok", 3.5,
                                               utc_now())])
        await svc.end_conversation(trip.id)  # queues a summary job (never run here)
        work = await svc.init_conversation("work", follows=trip.id)
        await svc.import_memories(work.id, ["We chose PostgreSQL for billing", "the crane is painted orange",
                                            "the zeppelin arrives tuesday"])
        await svc.end_conversation(work.id, "Database decided")
        # trip also recorded work as related: the pair has a row each way, the score on trip's only.
        await app.store.set_similar(trip.id, [(work.id, "related", 0.8)], utc_now())
        while await app.indexer.backfill_once():
            pass


async def picture(settings: Settings) -> tuple[dict[str, object], list[list[str]], list[tuple[object, ...]]]:
    """What a store holds as a user sees it: its export, the hits of fixed queries, jobs and audit."""
    async with open_app(settings, background=False) as app:
        document = await app.lifecycle.export_all()
        document["exported_at"] = None
        hits = [[h.memory.id for h in (await app.service.search(search_request(q, everywhere=True, top_k=5))).hits]
                for q in QUERIES]
        extras = []
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
        assert report.totals == {"conversations": 2, "memories": 8, "vectors": 16, "jobs": 2, "audit": 1, "relations": 2}
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


def test_migrate_to_itself_or_to_a_bad_address_is_refused(db_path: Path, fake_ollama: FakeOllama) -> None:
    same = cli(str(db_path), fake_ollama, "migrate", "--to", str(db_path))
    assert same.returncode == 2 and "--to: names the store being copied" in same.stderr
    relative = cli(str(db_path), fake_ollama, "migrate", "--to", "copy.db")
    assert relative.returncode == 2 and "--to must be an absolute path" in relative.stderr
    other = cli(str(db_path), fake_ollama, "migrate", "--to", "mysql://u:pw@h/db")
    assert other.returncode == 2 and "--to is a mysql:// URL" in other.stderr and "pw" not in other.stderr
    assert same.stdout == relative.stdout == other.stdout == ""

"""What only a shared PostgreSQL store has to get right: several instances on one database at
once, and a database server that is down at start or restarts mid-session."""

from __future__ import annotations

import gc
import os
import signal
import time
from dataclasses import replace
from pathlib import Path

import anyio
import numpy as np
import psycopg
import pytest

from ollama_mcp.app import open_app
from ollama_mcp.config import Settings
from ollama_mcp.domain import EmbeddingRow
from ollama_mcp.inputs.conversations import new_conversation
from ollama_mcp.inputs.memories import note as new_note
from ollama_mcp.inputs.search import search_request
from tests.conftest import Database, connect
from tests.support.fake_ollama import FakeOllama
from tests.support.mcp_client import call, error

pytestmark = [pytest.mark.anyio, pytest.mark.postgres_only]


async def test_the_same_note_stored_by_two_instances_at_once_is_stored_once(settings: Settings, db: Database) -> None:
    async with open_app(settings, background=False) as one, open_app(settings, background=False) as two:
        conv = await one.conversations.start(new_conversation("shared"))
        results = []

        async def store(app_index: int) -> None:
            app = (one, two)[app_index % 2]
            results.append(await app.memories.store(new_note("we meet at nine on fridays", conv.id)))

        async with anyio.create_task_group() as tasks:
            for i in range(20):
                tasks.start_soon(store, i)
    assert {r.memory.id for r in results} == {results[0].memory.id}
    assert sum(not r.duplicate for r in results) == 1
    assert db.rows("SELECT count(*), max(memory_count) FROM memories, conversations WHERE kind = 'note'") == [(1, 1)]


async def test_two_instances_backfilling_at_once_never_embed_a_memory_twice(
    settings: Settings, db: Database, fake_ollama: FakeOllama
) -> None:
    fake_ollama.stop()
    async with open_app(settings, background=False) as one, open_app(settings, background=False) as two:
        conv = await one.conversations.start(new_conversation("c"))
        for i in range(60):
            await one.memories.store(new_note(f"pending memory number {i}", conv.id))
        fake_ollama.start()
        before = len(fake_ollama.embed_requests())

        async def drain(app_index: int) -> None:
            app = (one, two)[app_index]
            while await app.indexer.backfill_once():
                pass

        async with anyio.create_task_group() as tasks:
            tasks.start_soon(drain, 0)
            tasks.start_soon(drain, 1)
        texts = [text for r in fake_ollama.embed_requests()[before:] for text in r.body["input"]]
    # 60 contents and 60 contexts (the first context is its content again: sent once when both
    # land in one batch): no text is sent twice
    assert len(texts) == len(set(texts)) and len(set(texts)) in (119, 120)
    assert db.count("SELECT count(*) FROM memory_embeddings") == 120
    assert db.count("SELECT count(*) FROM embedding_leases") == 0  # given back as the vectors arrived


async def test_an_instance_sees_at_once_what_another_stored_and_deleted(settings: Settings) -> None:
    async with open_app(settings, background=False) as one, open_app(settings, background=False) as two:
        stored = await one.memories.store(new_note("the harbour crane is painted orange"))
        await one.indexer.backfill_once()
        found = await two.recall.search(search_request("what colour is the crane", everywhere=True))
        assert [h.memory.id for h in found.hits] == [stored.memory.id] and found.hits[0].similarity
        await two.memories.delete(stored.memory.id)
        assert (await one.recall.search(search_request("crane", everywhere=True))).hits == []


async def test_connections_the_server_ended_while_idle_are_never_lent_even_just_after_use(
    settings: Settings, db: Database
) -> None:
    """The pool skips its round-trip check for a connection given back a moment ago, unless the
    server has said something on it since: ended sessions must still be found and replaced."""
    from ollama_mcp.storage.postgres.base import APPLICATION_PREFIX  # noqa: PLC0415

    async with open_app(settings, background=False) as app:
        first = await app.memories.store(new_note("the ferry leaves at noon"))
        name = APPLICATION_PREFIX + app.store.holder  # type: ignore[attr-defined]
        ended = db.rows("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = ?", name)
        assert ended and all(row[0] for row in ended)
        with anyio.fail_after(5):  # well inside the pool's idle time, so only the socket tells
            while db.count("SELECT count(*) FROM pg_stat_activity WHERE application_name = ?", name):
                await anyio.sleep(0.02)
            second = await app.memories.store(new_note("the ferry returns at six"))
            found = await app.recall.search(search_request("ferry", everywhere=True, top_k=5))
    assert {h.memory.id for h in found.hits} == {first.memory.id, second.memory.id}


async def test_the_pool_round_trips_only_connections_never_seen_or_idle_for_a_while(
    db: Database,
) -> None:
    from ollama_mcp.storage.postgres.base import _Liveness  # noqa: PLC0415

    liveness = _Liveness(idle_check_s=0.2)
    async with await psycopg.AsyncConnection.connect(db.url, autocommit=True) as conn:
        pid = conn.info.backend_pid

        def last_round_trip() -> object:  # the server stamps each statement's start and end
            return db.rows("SELECT state_change FROM pg_stat_activity WHERE pid = ?", pid)[0][0]

        before = last_round_trip()
        await liveness.check(conn)  # never given back through it: checked
        assert last_round_trip() != before
        before = last_round_trip()
        liveness.returned(conn)
        await liveness.check(conn)  # given back a moment ago, nothing to read: lent as it is
        assert last_round_trip() == before
        liveness.returned(conn)
        await anyio.sleep(0.3)
        await liveness.check(conn)  # idle longer than the bound: checked
        assert last_round_trip() != before


async def test_an_unreachable_server_still_answers_initialize_and_each_call_names_the_host(
    settings: Settings,
) -> None:
    down = replace(settings, postgres_url="postgresql://team:s3cret@127.0.0.1:9/memory")
    with anyio.fail_after(30):
        async with connect(down) as client:  # initialize answered
            for _ in range(2):
                text = await error(client, "store_memory", content="lost?")
                assert "PostgreSQL at 127.0.0.1:9/memory" in text and "unreachable" in text
                assert "s3cret" not in text and "team" not in text


@pytest.fixture
def private_server(tmp_path: Path) -> tuple[object, str]:
    """A PostgreSQL server of this test's own, which it may stop and start."""
    if os.environ.get("OLLAMA_MCP_TEST_POSTGRES_URL"):
        pytest.skip("restarts a server of its own, which an external OLLAMA_MCP_TEST_POSTGRES_URL is not")
    import pgserver  # noqa: PLC0415

    server = pgserver.get_server(tmp_path / "own", cleanup_mode="stop")
    return server, server.get_uri()


async def test_a_database_restarted_mid_session_fails_calls_clearly_then_recovers_without_a_restart(
    settings: Settings, private_server: tuple[object, str]
) -> None:
    server, url = private_server
    own = replace(settings, postgres_url=url)
    async with connect(own) as client:
        first = await call(client, "store_memory", content="stored before the restart")
        pid = server.get_pid()  # type: ignore[attr-defined]
        os.kill(pid, signal.SIGINT)  # PostgreSQL's fast shutdown: open connections are cut
        with anyio.fail_after(30):
            while Path(f"/proc/{pid}").exists():
                await anyio.sleep(0.05)
            text = await error(client, "store_memory", content="while it is down")
        assert "PostgreSQL at" in text and "running" in text
        server.ensure_postgres_running()  # type: ignore[attr-defined]
        second = await call(client, "store_memory", content="stored after the restart")
        found = await call(client, "search_all_conversations", query="stored restart", top_k=5)
    assert {h["memory_id"] for h in found["results"]} == {first["memory_id"], second["memory_id"]}


@pytest.mark.slow
async def test_after_a_long_outage_the_first_call_once_the_database_is_back_succeeds(
    settings: Settings, private_server: tuple[object, str]
) -> None:
    """While the database is down, the pool's reconnection attempts back off (1, 2, 4, 8, 16 s):
    the first calls after it is back used to wait out that backoff and fail ("no connection")."""
    server, url = private_server
    own = replace(settings, postgres_url=url)
    async with connect(own) as client:
        first = await call(client, "store_memory", content="stored before the outage")
        pid = server.get_pid()  # type: ignore[attr-defined]
        os.kill(pid, signal.SIGINT)
        with anyio.fail_after(60):
            while Path(f"/proc/{pid}").exists():
                await anyio.sleep(0.05)
            down_since = time.monotonic()
            while time.monotonic() - down_since < 16:  # long enough for the backoff to reach 8-16 s
                assert "PostgreSQL at" in await error(client, "store_memory", content="while it is down")
        server.ensure_postgres_running()  # type: ignore[attr-defined]
        with anyio.fail_after(30):
            back = [await call(client, "store_memory", content=f"stored after the outage {i}") for i in range(3)]
        found = await call(client, "search_all_conversations", query="stored outage", top_k=10)
    assert {h["memory_id"] for h in found["results"]} == {first["memory_id"], *(b["memory_id"] for b in back)}


async def test_a_burst_that_keeps_every_connection_busy_queues_instead_of_reporting_the_server_down(
    settings: Settings,
) -> None:
    from ollama_mcp.storage.postgres.base import POOL_MAX, POOL_TIMEOUT_S  # noqa: PLC0415

    async with open_app(settings, background=False) as app:
        conv = await app.conversations.start(new_conversation("busy"))
        store = app.store

        async def hold() -> None:
            async with store.reading("hold a connection") as conn:  # type: ignore[attr-defined]
                await conn.execute("SELECT pg_sleep(%s)", (POOL_TIMEOUT_S + 1.5,))

        with anyio.fail_after(30):
            async with anyio.create_task_group() as tasks:
                for _ in range(POOL_MAX):
                    tasks.start_soon(hold)
                await anyio.sleep(0.5)  # every connection is taken now
                started = anyio.current_time()
                stored = await app.memories.store(new_note("stored after the burst", conv.id))
                waited = anyio.current_time() - started
    assert stored.memory.content == "stored after the burst"
    assert waited > POOL_TIMEOUT_S  # it queued past the unreachable-server limit, and then succeeded


@pytest.mark.slow
async def test_a_batch_write_cancelled_midway_leaves_the_store_working_and_nothing_half_cleaned(
    settings: Settings, db: Database
) -> None:
    """A server shutting down cancels the indexer while it writes vectors. psycopg writes a batch
    in pipeline mode; cancelled there, it used to break the connection and leave a pipeline whose
    cleanup raised when garbage-collected ("Exception ignored in BasePipeline._exit_gen")."""
    async with open_app(settings, background=False) as app:
        conv = await app.conversations.start(new_conversation("c"))
        stored = [await app.memories.store(new_note(f"memory number {i}", conv.id)) for i in range(3)]
        seqs = [seq for (seq,) in db.rows("SELECT seq FROM memories ORDER BY seq")]
        vector = np.ones(8, dtype="<f4").tobytes()
        rows = [EmbeddingRow(seqs[i % 3], "content", i, "big", vector, 8) for i in range(3000)]
        for attempt in range(40):
            async with anyio.create_task_group() as tasks:  # cancelled the way open_app stops its loops
                tasks.start_soon(app.store.insert_embeddings, rows)
                await anyio.sleep(0.001 * attempt)
                tasks.cancel_scope.cancel()
            gc.collect()
        # Every connection the pool hands out still works, and whole batches still commit.
        assert await app.store.insert_embeddings(rows[:30]) in (0, 30)
        found = await app.recall.search(search_request("memory number", conversation_id=conv.id))
        assert {h.memory.id for h in found.hits} == {s.memory.id for s in stored}
    assert db.count("SELECT count(*) FROM memory_embeddings WHERE model = 'big'") in (30, 3000)

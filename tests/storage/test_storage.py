"""The SQLite file: migrations, concurrent first opens, refusing newer schemas, permissions, and the
vector index noticing what another connection did."""

from __future__ import annotations

import os
import sqlite3
import stat
import subprocess
import sys
from pathlib import Path

import anyio
import numpy as np
import pytest

import ollama_mcp.storage.sqlite.matrix as vectors
from ollama_mcp.app import App
from ollama_mcp.config import Settings
from ollama_mcp.domain import EmbeddingRow, Facet, Memory, Scope, utc_now
from ollama_mcp.errors import SchemaError, StorageError
from ollama_mcp.inputs.conversations import new_conversation
from ollama_mcp.inputs.memories import note as new_note
from ollama_mcp.inputs.memories import notes_to_import
from ollama_mcp.inputs.search import search_request
from ollama_mcp.storage.sqlite import db
from ollama_mcp.storage.sqlite.store import Store
from ollama_mcp.storage.sqlite.vector_index import Ranking, VectorIndex
from tests.conftest import Database, connect, sqlite_store_at
from tests.support.fake_ollama import FakeOllama
from tests.support.sqlite_parts import sqlite_ranker

pytestmark = pytest.mark.anyio


def tables(path: Path) -> set[str]:
    with sqlite3.connect(path) as conn:
        return {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type IN ('table', 'trigger')")}


async def test_opening_twice_applies_each_migration_once(db_path: Path) -> None:
    for _ in range(2):
        store = await Store.open(db_path)
        await store.aclose()
    with sqlite3.connect(db_path) as conn:
        versions = conn.execute("SELECT version, name FROM schema_migrations").fetchall()
        assert conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    assert versions == [(m.version, m.name) for m in db.migrations()]
    assert {"memories", "memories_fts", "memory_embeddings", "memories_ai", "memories_ad"} <= tables(db_path)


async def test_a_new_file_another_connection_is_writing_opens_in_wal_once_the_writer_is_done(
    db_path: Path,
) -> None:
    # Converting to WAL needs the file to itself and SQLite does not wait for it with the busy
    # handler: two servers opening one new file at once failed with "database is locked".
    db_path.parent.mkdir(parents=True)
    holder = sqlite3.connect(db_path, isolation_level=None, check_same_thread=False)
    holder.execute("BEGIN IMMEDIATE")
    holder.execute("CREATE TABLE other_writer (x)")

    async def finish_writing() -> None:
        await anyio.sleep(0.3)
        holder.execute("COMMIT")

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(finish_writing)
        started = anyio.current_time()
        conn = await db.connect(db_path)
        waited = anyio.current_time() - started
    try:
        assert await (await conn.execute("PRAGMA journal_mode")).fetchone() == ("wal",)
        assert waited >= 0.25  # it waited for the writer instead of failing at once
    finally:
        await conn.close()
        holder.close()
    assert {"memories", "other_writer"} <= tables(db_path)


async def test_the_jobs_table_rebuilt_for_new_kinds_keeps_every_job_and_its_rules(db_path: Path) -> None:
    sqlite_store_at(db_path, 8)
    with sqlite3.connect(db_path, isolation_level=None) as conn:
        conn.execute("INSERT INTO conversations (id, created_at) VALUES ('c1', '2026-01-01')")
        conn.execute(
            "INSERT INTO conversations (id, created_at, status, summary) VALUES ('c2', '2026-01-01', 'completed',"
            " 'we chose the blue tiles')"
        )
        conn.execute("INSERT INTO jobs (kind, conversation_id, state, attempts, run_after, last_error, created_at)"
                     " VALUES ('summarize', 'c1', 'queued', 2, '2026-01-02', 'Ollama is down', '2026-01-01')")
        conn.execute("INSERT INTO jobs (kind, conversation_id, state, run_after, created_at, finished_at)"
                     " VALUES ('compact', 'c1', 'done', '2026-01-01', '2026-01-01', '2026-01-01')")
    store = await Store.open(db_path)
    try:
        assert await store.enqueue_job("relate", "c1", utc_now())
        assert not await store.enqueue_job("summarize", "c1", utc_now())  # still open once per kind
    finally:
        await store.aclose()
    with sqlite3.connect(db_path) as conn:
        conn.execute("PRAGMA foreign_keys = ON")
        kept = conn.execute("SELECT id, kind, state, attempts, last_error FROM jobs ORDER BY id").fetchall()
        with pytest.raises(sqlite3.IntegrityError, match="CHECK"):
            conn.execute(
                "INSERT INTO jobs (kind, conversation_id, run_after, created_at) VALUES ('dance', 'c1', 'x', 'x')"
            )
        conn.execute("DELETE FROM conversations WHERE id = 'c1'")
        assert conn.execute("SELECT conversation_id FROM jobs").fetchall() == [("c2",)]  # c1's went with it
    # c2, which ended with a summary before there were relations, is queued to be linked.
    assert kept == [(1, "summarize", "queued", 2, "Ollama is down"), (2, "compact", "done", 0, None),
                    (3, "relate", "queued", 0, None), (4, "relate", "queued", 0, None)]


def test_four_processes_creating_the_same_new_database_at_once_all_succeed(db_path: Path) -> None:
    code = (
        "import anyio, sys; from pathlib import Path; from ollama_mcp.storage.sqlite.store import Store\n"
        "async def main():\n"
        "    s = await Store.open(Path(sys.argv[1])); await s.aclose()\n"
        "anyio.run(main)\n"
    )
    procs = [subprocess.Popen([sys.executable, "-c", code, str(db_path)], stderr=subprocess.PIPE) for _ in range(4)]
    errors = [p.communicate(timeout=60)[1].decode() for p in procs]
    assert [p.returncode for p in procs] == [0, 0, 0, 0], errors
    with sqlite3.connect(db_path) as conn:
        assert conn.execute("SELECT count(*) FROM schema_migrations").fetchone()[0] == len(db.migrations())


async def test_a_database_from_a_newer_version_is_refused_and_left_untouched(db_path: Path) -> None:
    store = await Store.open(db_path)
    await store.aclose()
    with sqlite3.connect(db_path) as conn:
        conn.execute("INSERT INTO schema_migrations VALUES (9999, 'future', 'later')")
    before = tables(db_path)
    with pytest.raises(SchemaError, match="newer ollama-mcp .*schema version 9999.*Upgrade") as refused:
        await Store.open(db_path)
    assert str(refused.value).startswith(f"The database {db_path} was written by a newer ollama-mcp")
    assert tables(db_path) == before


async def test_database_and_folder_are_created_owner_only(tmp_path: Path) -> None:
    path = tmp_path / "fresh" / "nested" / "memory.db"
    store = await Store.open(path)
    await store.aclose()
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(path.parent).st_mode) == 0o700


async def test_an_unusable_path_is_a_clear_storage_error(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    with pytest.raises(StorageError, match="Could not create the database .* OLLAMA_MCP_DB"):
        await Store.open(blocker / "memory.db")


def test_migration_scripts_split_into_whole_statements() -> None:
    statements = db.split_statements(db.migrations()[0].sql)
    triggers = [s for s in statements if s.startswith("CREATE TRIGGER")]
    assert len(triggers) == 4 and all(s.rstrip().endswith("END;") for s in triggers)
    assert all(sqlite3.complete_statement(s) for s in statements)


async def _memory(store: Store, conversation_id: str, text: str) -> Memory:
    memory = Memory(id=f"00000000-0000-4000-8000-{abs(hash(text)) % 10**12:012d}", seq=0,
                    conversation_id=conversation_id, kind="note", content=text, tags=(), metadata={},
                    created_at=utc_now())
    stored, _ = await store.insert_memory(memory)
    return stored


def _row(seq: int, axis: int, dim: int = 8, facet: Facet = "content") -> EmbeddingRow:
    vector = np.zeros(dim, dtype="<f4")
    vector[axis] = 1.0
    return EmbeddingRow(seq, facet, 0, "m", vector.tobytes(), dim)


def _axis(axis: int, dim: int = 8) -> np.ndarray:
    vector = np.zeros(dim, dtype=np.float32)
    vector[axis] = 1.0
    return vector


async def test_search_ranks_by_context_vectors_or_else_by_a_stand_in_mixed_from_own_vectors(
    db_path: Path,
) -> None:
    store = await Store.open(db_path)
    try:
        conv = await store.create_conversation("44444444-4444-4444-8444-444444444444", None, {}, False, utc_now())
        both, own_only = await _memory(store, conv.id, "both"), await _memory(store, conv.id, "own only")
        await store.insert_embeddings([
            _row(both.seq, 0), _row(both.seq, 1, facet="context"),  # own meaning 0, in context 1
            _row(own_only.seq, 2),  # no context vector yet
        ])
        index = VectorIndex(store, "m")
        await index.refresh()
        assert index.size == 3 and index.ranked_rows == 2  # the query meets one row per memory
        by_context = await _ranked(index, _axis(1), 5, Scope())
        assert by_context.ranked[0] == (both.seq, pytest.approx(1.0))
        assert by_context.similarity[both.seq] == pytest.approx(0.0)  # its own text is about something else
        # "own only" waits for its context vector: its context is "both" then itself, so it ranks by
        # its own vector and the one of "both", weighted by their characters (8 and 4)
        stand_in = (await _ranked(index, _axis(2), 5, Scope())).ranked
        assert stand_in[0] == (own_only.seq, pytest.approx(8 / 80**0.5))
        assert dict((await _ranked(index, _axis(0), 5, Scope())).ranked)[own_only.seq] == pytest.approx(4 / 80**0.5)
        # its own vector never competes while it has a context vector, but still gives its similarity
        by_own = await _ranked(index, _axis(0), 5, Scope(), candidates=[both.seq])
        assert dict(by_own.ranked)[both.seq] == pytest.approx(0.0) and by_own.similarity[both.seq] == pytest.approx(1.0)

        await index.remove([both.seq], facet="context")  # its context was rewritten: falls back to its own
        assert index.ranked_rows == 2
        assert (await _ranked(index, _axis(0), 5, Scope())).ranked[0] == (both.seq, pytest.approx(1.0))
        await store.insert_embeddings([_row(own_only.seq, 3, facet="context")])  # the backfill catches up
        index.mark_dirty()
        assert (await _ranked(index, _axis(3), 5, Scope())).ranked[0] == (own_only.seq, pytest.approx(1.0))
        assert (await _ranked(index, _axis(2), 1, Scope())).ranked[0][1] == pytest.approx(0.0)
        # ... and one ranked by its own vector and then deleted is gone from the ranking at once
        await index.remove([both.seq])
        assert both.seq not in dict((await _ranked(index, _axis(0), 5, Scope())).ranked)
        assert index.ranked_rows == 1
    finally:
        await store.aclose()


async def test_vector_index_notices_inserts_and_deletes_made_by_another_connection(db_path: Path) -> None:
    mine, theirs = await Store.open(db_path), await Store.open(db_path)
    try:
        conv = await mine.create_conversation("11111111-1111-4111-8111-111111111111", None, {}, False, utc_now())
        first = await _memory(mine, conv.id, "first")
        await mine.insert_embeddings([_row(first.seq, 0)])
        index = VectorIndex(mine, "m")
        await index.refresh()
        assert index.size == 1

        other = await _memory(theirs, conv.id, "other")  # another process's write
        await theirs.insert_embeddings([_row(other.seq, 1)])
        await index.refresh()
        query = np.zeros(8, dtype=np.float32)
        query[1] = 1.0
        ranked = (await _ranked(index, query, 5, Scope())).ranked
        assert ranked[0][0] == other.seq  # (by a stand-in for its context vector: "first" then "other")

        await theirs.delete_memory(other.id)  # and its delete
        await index.refresh()
        assert index.size == 1
        assert [seq for seq, _ in (await _ranked(index, query, 5, Scope())).ranked] == [first.seq]
    finally:
        await mine.aclose()
        await theirs.aclose()


@pytest.mark.sqlite_only
async def test_vector_index_follows_this_processs_own_writes_and_forgetting_its_vectors(
    app: App, db_path: Path
) -> None:
    for text in ("first note", "second note"):
        await app.memories.store(new_note(text))
    await app.indexer.backfill_once()
    await app.recall.search(search_request("note", everywhere=True))  # loads the matrices

    def rows_in_database() -> int:
        with sqlite3.connect(db_path) as conn:
            return conn.execute("SELECT count(*) FROM memory_embeddings").fetchone()[0]

    await app.memories.store(new_note("third note"))  # this process's write: fetched by id
    await app.indexer.backfill_once()
    await app.recall.search(search_request("note", everywhere=True))
    assert sqlite_ranker(app).vectors.size == rows_in_database() == 6  # own and context vector of each
    await app.memories.forget_vectors()  # deletes every row without naming them (reembed --force)
    while await app.indexer.backfill_once():
        pass
    await app.recall.search(search_request("note", everywhere=True))
    assert sqlite_ranker(app).vectors.size == rows_in_database() == 6  # rebuilt, not the old rows plus the new


async def test_vectors_of_another_size_under_the_same_model_are_left_out_of_the_matrix(db_path: Path) -> None:
    store = await Store.open(db_path)
    try:
        conv = await store.create_conversation("22222222-2222-4222-8222-222222222222", None, {}, False, utc_now())
        a, b = await _memory(store, conv.id, "a"), await _memory(store, conv.id, "b")
        await store.insert_embeddings([_row(a.seq, 0, dim=8), _row(b.seq, 0, dim=4)])
        index = VectorIndex(store, "m")
        await index.refresh()
        await index.refresh()  # and the skipped row does not cause endless reloads
        assert index.size == 1 and index.dim == 8
    finally:
        await store.aclose()


async def test_an_unwritable_database_path_is_reported_by_each_tool_and_retried_once_fixed(
    tmp_path: Path, fake_ollama: FakeOllama
) -> None:
    blocker = tmp_path / "data"
    blocker.write_text("a file where the folder should be")
    settings = Settings.from_env({"OLLAMA_MCP_DB": str(blocker / "memory.db"), "OLLAMA_HOST": fake_ollama.url})
    async with connect(settings) as client:
        for _ in range(2):
            failed = await client.call_tool("store_memory", {"content": "lost?"})
            assert failed.is_error and "Could not create the database" in failed.content[0].text
        blocker.unlink()  # the user fixes it; no restart
        stored = await client.call_tool("store_memory", {"content": "kept"})
        assert not stored.is_error
        assert stored.structured_content["embedding_status"] == "embedded"


async def test_bulk_import_keeps_the_rules_of_single_stores(app: App, db: Database) -> None:
    conv = await app.conversations.start(new_conversation("import"))
    await app.memories.store(new_note("already here", conv.id))
    added = await app.memories.import_notes(notes_to_import(conv.id, ["one", "two", "already here", "three", "two"]))
    assert added == 3  # duplicates of stored and of earlier imported notes are skipped
    contexts = dict(db.rows("SELECT m.content, x.context FROM memories m JOIN memory_contexts x ON x.seq = m.seq"))
    assert contexts["three"] == "one\ntwo\nthree" and contexts["one"] == "already here\none"
    assert db.keyword_matches("context", "three") == 1
    assert await app.indexer.backfill_once() == 3  # imported without vectors: embedded in the background
    outcome = await app.recall.search(search_request("two", conv.id))
    assert outcome.hits[0].memory.content == "two"


async def test_vector_index_spanning_several_blocks_ranks_and_compacts_correctly(db_path: Path) -> None:

    store = await Store.open(db_path)
    old = vectors.BLOCK_ROWS
    vectors.BLOCK_ROWS = 4  # small blocks: the same code paths as 8192-row blocks, on 10 rows
    try:
        seqs = []
        for i in range(10):  # one conversation each: each is its own context, ranked by its own vector alone
            conv_id = f"33333333-3333-4333-8333-33333333333{i}"
            conv = await store.create_conversation(conv_id, None, {}, False, utc_now())
            seqs.append((await _memory(store, conv.id, f"m{i}")).seq)
        await store.insert_embeddings([_row(seq, i % 8) for i, seq in enumerate(seqs)])
        index = VectorIndex(store, "m")
        await index.refresh()
        assert index.size == 10
        query = np.zeros(8, dtype=np.float32)
        query[1] = 1.0
        assert {seq for seq, _ in (await _ranked(index, query, 2, Scope())).ranked} == {seqs[1], seqs[9]}
        await index.remove([seqs[0], seqs[1], seqs[5]])  # rows move across block boundaries
        assert index.size == 7
        ranked = (await _ranked(index, query, 10, Scope())).ranked
        assert ranked[0] == (seqs[9], pytest.approx(1.0))
        assert sorted(seq for seq, _ in ranked) == sorted(set(seqs) - {seqs[0], seqs[1], seqs[5]})
        query[:] = 0
        query[6] = 1.0
        assert (await _ranked(index, query, 1, Scope())).ranked[0] == (seqs[6], pytest.approx(1.0))
    finally:
        vectors.BLOCK_ROWS = old
        await store.aclose()


async def _ranked(
    index: VectorIndex, query: np.ndarray, k: int, scope: Scope, candidates: list[int] | None = None
) -> Ranking:
    await index.refresh()
    return await index.rank(query, k, scope, candidates or [])


async def test_a_read_while_another_task_writes_sees_only_what_is_committed(db_path: Path) -> None:
    # One connection serves every task: a read issued while another task's transaction is open must
    # not run inside it (it would see that transaction's uncommitted rows, here a summary that is
    # then rolled back, or an old snapshot). The transaction is opened directly: no public call
    # holds one open across an await a test can pause in.
    store = await Store.open(db_path)
    try:
        await store.create_conversation("c1", None, {}, False, utc_now())
        read: list[str | None] = []
        drafted = anyio.Event()

        async def reader() -> None:
            await drafted.wait()
            read.append((await store.get_conversation("c1")).rolling_summary)

        async with anyio.create_task_group() as tasks:
            tasks.start_soon(reader)
            with pytest.raises(RuntimeError):
                async with store._transaction("draft a summary") as conn:
                    await conn.execute("UPDATE conversations SET rolling_summary = 'draft' WHERE id = 'c1'")
                    drafted.set()
                    await anyio.sleep(0.2)  # the reader runs meanwhile
                    assert read == []  # it waits for the transaction
                    raise RuntimeError("the write fails: rolled back")
        assert read == [None]
    finally:
        await store.aclose()

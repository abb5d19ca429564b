"""Each vector is kept once: written as a row, folded by the upkeep into a block, read back by a new
process from its blocks. Nothing is lost or kept twice by a crash mid-fold, two processes folding at
once, deletions (here or in another process), compaction or an upgrade; rankings do not change."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, closing
from dataclasses import replace
from pathlib import Path

import anyio
import numpy as np
import pytest

from ollama_mcp.app import App, open_app
from ollama_mcp.config import Settings
from ollama_mcp.domain import Scope, SearchFilters
from ollama_mcp.head_start import HeadStart
from ollama_mcp.inputs.conversations import new_conversation
from ollama_mcp.inputs.memories import note as new_note
from ollama_mcp.inputs.memories import notes_to_import
from ollama_mcp.storage.sqlite import block_read, vector_blocks
from ollama_mcp.storage.sqlite import db as sqlite_db
from ollama_mcp.storage.sqlite import matrix as vectors
from ollama_mcp.storage.sqlite.store import FACET_CODES, Store
from tests.conftest import Database, sqlite_store_at
from tests.support.sqlite_parts import sqlite_ranker

pytestmark = [pytest.mark.anyio, pytest.mark.sqlite_only]  # the SQLite backend's vector blocks

DIM = 256  # the fake Ollama's nomic-embed-text
BLOCK = 64  # rows a block holds in these tests


def unit_vectors(seed: int, count: int) -> list[np.ndarray]:
    vectors = np.random.default_rng(seed).standard_normal((count, DIM)).astype(np.float32)
    return list(vectors / np.linalg.norm(vectors, axis=1, keepdims=True))


def store_of(app: App) -> Store:
    assert isinstance(app.store, Store)
    return app.store


async def fill(app: App, count: int, seed: int) -> str:
    conversation = await app.conversations.start(new_conversation(f"batch {seed}"))
    texts = [f"memory {seed}-{i}" for i in range(count)]
    await app.memories.import_notes(notes_to_import(conversation.id, texts, unit_vectors(seed, count)))
    while await app.indexer.backfill_once():  # the context vectors, from the fake Ollama
        pass
    return conversation.id


async def fold(app: App) -> int:
    return await store_of(app).fold_vectors(app.settings.embed_model, BLOCK)


async def ranking(app: App) -> list[list[tuple[str, float]]]:
    await sqlite_ranker(app).vectors.refresh()
    out = []
    for query in unit_vectors(99, 5):
        hits = await app.ranker.search("", query, SearchFilters(), None, 10, None)
        out.append([(hit.memory.id, round(hit.similarity or 0.0, 6)) for hit in hits])
    return out


async def conversations_found(app: App) -> list[str]:
    """The conversations of the hits of five searches by meaning."""
    return [hit.memory.conversation_id for query in unit_vectors(99, 5)
            for hit in await app.ranker.search("", query, SearchFilters(), None, 10, None)]


@asynccontextmanager
async def opened(settings: Settings, head_start: bool) -> AsyncIterator[App]:
    """The app, opened as a server opens it (``head_start``: with the vectors read meanwhile) or not."""
    if not head_start:
        async with open_app(settings, background=False) as app:
            yield app
        return
    async with HeadStart.running(settings) as head, open_app(settings, background=False, head_start=head) as app:
        yield app


def layout(db: Database) -> tuple[int, int, int, int]:
    """(rows holding their vector, rows folded, live slots by the blocks' counts, blocks)."""
    unfolded = db.count("SELECT count(*) FROM memory_embeddings WHERE vector IS NOT NULL AND block_id IS NULL")
    folded = db.count("SELECT count(*) FROM memory_embeddings WHERE vector IS NULL AND block_id IS NOT NULL")
    live = db.count("SELECT coalesce(sum(n), 0) FROM vector_blocks") - db.count(
        "SELECT count(*) FROM vector_block_dead"
    )
    return unfolded, folded, live, db.count("SELECT count(*) FROM vector_blocks")


def assert_each_vector_once(db: Database) -> None:
    """Every row holds its vector or points at a slot of an existing block (never both, never
    neither), no two rows share a slot, and each slot of a block has a row or is listed dead, never
    both (the count on the block itself is no longer kept: it stays 0)."""
    assert db.count("SELECT count(*) FROM memory_embeddings WHERE (vector IS NULL) = (block_id IS NULL)") == 0
    assert db.count(
        "SELECT count(*) FROM memory_embeddings e WHERE e.block_id IS NOT NULL"
        " AND NOT EXISTS (SELECT 1 FROM vector_blocks b WHERE b.id = e.block_id AND e.slot BETWEEN 0 AND b.n - 1)"
    ) == 0
    assert db.count(
        "SELECT count(*) FROM (SELECT block_id, slot FROM memory_embeddings WHERE block_id IS NOT NULL"
        " GROUP BY block_id, slot HAVING count(*) > 1)"
    ) == 0
    assert db.rows(
        "SELECT b.id FROM vector_blocks b"
        " WHERE b.n - (SELECT count(*) FROM vector_block_dead d WHERE d.block_id = b.id)"
        " != (SELECT count(*) FROM memory_embeddings e WHERE e.block_id = b.id)"
    ) == []
    assert db.count(
        "SELECT count(*) FROM vector_block_dead d"
        " WHERE EXISTS (SELECT 1 FROM memory_embeddings e WHERE e.block_id = d.block_id AND e.slot = d.slot)"
        " OR NOT EXISTS (SELECT 1 FROM vector_blocks b WHERE b.id = d.block_id AND d.slot BETWEEN 0 AND b.n - 1)"
    ) == 0
    assert db.count("SELECT count(*) FROM vector_blocks WHERE dead <> 0") == 0


@pytest.mark.parametrize("head_start", [False, True], ids=["read by the index", "read by the head start"])
@pytest.mark.parametrize(
    "block_rows", [None, BLOCK, 96], ids=["copied into one block", "held as read", "copied across blocks"]
)
async def test_a_new_process_ranks_from_blocks_as_the_writer_did_from_rows_and_catches_up(
    settings: Settings, db: Database, monkeypatch: pytest.MonkeyPatch, head_start: bool, block_rows: int | None
) -> None:
    if block_rows is not None:
        monkeypatch.setattr(vectors, "BLOCK_ROWS", block_rows)
    async with open_app(settings, background=False) as first:
        await fill(first, 300, 1)
        assert await fold(first) == 2 * 256  # 300 rows a facet: four blocks each, 44 left in rows
        await fill(first, 40, 2)  # after the fold
        expected = await ranking(first)  # from the matrices it read out of rows, before the fold
        size = sqlite_ranker(first).vectors.size
    assert layout(db) == (2 * 44 + 2 * 40, 2 * 256, 2 * 256, 8)
    assert_each_vector_once(db)
    async with opened(settings, head_start) as second:
        assert await ranking(second) == expected
        assert sqlite_ranker(second).vectors.loaded_from == "blocks" and sqlite_ranker(second).vectors.size == size


async def test_a_fold_keeps_context_vectors_exact_and_own_vectors_at_search_precision(
    settings: Settings, db: Database
) -> None:
    async with open_app(settings, background=False) as app:
        conversation = await fill(app, 128, 3)
        before = {(seq, facet): vector for seq, facet, vector in db.rows(
            "SELECT memory_seq, facet, vector FROM memory_embeddings")}
        assert await fold(app) == 256
        exported = await store_of(app).conversation_vectors(conversation)
    assert db.count("SELECT count(*) FROM memory_embeddings WHERE vector IS NOT NULL") == 0
    held = dict(db.rows("SELECT facet, dtype FROM vector_blocks GROUP BY facet"))
    assert held == {"content": "<f2", "context": "<f4"}
    assert len(exported) == 256
    for _, row in exported:
        stored = np.frombuffer(before[(row.memory_seq, row.facet)], dtype="<f4")
        read = np.frombuffer(row.vector, dtype="<f4")
        if row.facet == "context":
            assert read.tobytes() == stored.tobytes()
        else:
            assert read.tobytes() == stored.astype(np.float16).astype(np.float32).tobytes()
            assert np.abs(read - stored).max() < 1e-3


async def test_only_whole_blocks_are_folded_and_a_second_fold_finds_nothing(settings: Settings, db: Database) -> None:
    async with open_app(settings, background=False) as app:
        await fill(app, 100, 4)
        assert await fold(app) == 2 * 64
        assert await fold(app) == 0
    assert layout(db) == (2 * 36, 2 * 64, 2 * 64, 2)


def blocks_of(db: Database) -> list[tuple[str, int]]:
    """(facet, slots) of each block, oldest first."""
    return [(str(facet), int(n)) for facet, n in db.rows("SELECT facet, n FROM vector_blocks ORDER BY id")]


@pytest.mark.parametrize("head_start", [False, True], ids=["read by the index", "read by the head start"])
async def test_a_quiet_stores_last_rows_fold_into_a_partial_block_the_next_fold_fills(
    settings: Settings, db: Database, head_start: bool
) -> None:
    async with open_app(settings, background=False) as app:
        await fill(app, 100, 5)
        assert await fold(app) == 2 * 64  # whole blocks only: 36 rows a facet wait
        expected = await ranking(app)
        assert await store_of(app).fold_vectors(app.settings.embed_model, BLOCK, tail=40) == 0  # fewer than 40
        assert await store_of(app).fold_vectors(app.settings.embed_model, BLOCK, tail=8) == 2 * 36
        assert blocks_of(db) == [("content", 64), ("context", 64), ("content", 36), ("context", 36)]
        assert layout(db) == (0, 2 * 100, 2 * 100, 4)
        assert_each_vector_once(db)
        assert await ranking(app) == expected
        assert await store_of(app).fold_vectors(app.settings.embed_model, BLOCK, tail=8) == 0  # nothing waits

        await fill(app, 40, 6)  # 36 in the partial block and 40 new: a whole block and 12
        assert await fold(app) == 2 * 64
        assert blocks_of(db) == [("content", 64), ("context", 64), ("content", 64), ("context", 64)]
        assert layout(db) == (2 * 12, 2 * 128, 2 * 128, 4)
        assert await store_of(app).fold_vectors(app.settings.embed_model, BLOCK, tail=8) == 2 * 12
        assert blocks_of(db)[-2:] == [("content", 12), ("context", 12)]
        assert_each_vector_once(db)
        expected = await ranking(app)
        size = sqlite_ranker(app).vectors.size
    async with opened(settings, head_start) as second:
        assert await ranking(second) == expected
        assert sqlite_ranker(second).vectors.size == size


async def test_an_idle_stores_upkeep_folds_its_last_rows_and_gives_back_pages_and_log(
    settings: Settings, db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(vector_blocks, "BLOCK_ROWS", BLOCK)
    monkeypatch.setattr(vector_blocks, "TAIL_ROWS", 8)
    async with open_app(settings, background=False) as app:
        await fill(app, 100, 7)
        await app.ranker.upkeep()  # the first fold of this process: whole blocks
        assert layout(db) == (2 * 36, 2 * 64, 2 * 64, 2)
        assert db.count("PRAGMA freelist_count") > 0  # the emptied rows' pages, kept for the next writes
        await app.memories.store(new_note("one more", (await app.conversations.start(new_conversation("later"))).id))
        await app.indexer.backfill_once()
        await app.ranker.upkeep()  # a vector came since: the rows wait
        assert layout(db) == (2 * 37, 2 * 64, 2 * 64, 2)
        await app.ranker.upkeep()  # none came since
        assert layout(db) == (0, 2 * 101, 2 * 101, 4)
        assert db.count("PRAGMA freelist_count") == 0  # a quiet store gives every free page back
        assert Path(f"{settings.db_path}-wal").stat().st_size == 0  # and truncates its write-ahead log


async def test_memories_deleted_after_a_fold_leave_dead_slots_never_ranked_anywhere(
    settings: Settings, db: Database
) -> None:
    async with open_app(settings, background=False) as app:
        keep = await fill(app, 64, 5)
        gone = await fill(app, 64, 6)
        assert await fold(app) == 256
        await app.conversations.delete(gone)
        assert sorted(db.rows(
            "SELECT facet, n, (SELECT count(*) FROM vector_block_dead d WHERE d.block_id = b.id) FROM vector_blocks b"
        )) == [
            ("content", 64, 0), ("content", 64, 64), ("context", 64, 0), ("context", 64, 64),
        ]
        assert_each_vector_once(db)
        here = await conversations_found(app)
    async with open_app(settings, background=False) as fresh:
        await sqlite_ranker(fresh).vectors.refresh()
        assert sqlite_ranker(fresh).vectors.loaded_from == "blocks" and sqlite_ranker(fresh).vectors.size == 128
        there = await conversations_found(fresh)
    assert here and set(here) == set(there) == {keep}


async def test_memories_deleted_by_a_process_holding_read_blocks_are_dropped_and_the_rest_ranked_alike(
    settings: Settings, db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(vectors, "BLOCK_ROWS", BLOCK)  # each block read is held as it was read
    async with open_app(settings, background=False) as app:
        keep = await fill(app, 128, 50)
        gone = await fill(app, 64, 51)
        assert await fold(app) == 2 * 192
    async with open_app(settings, background=False) as app:
        await ranking(app)
        context = sqlite_ranker(app).vectors._matrices[FACET_CODES["context"]]
        assert sqlite_ranker(app).vectors.loaded_from == "blocks" and not context.blocks[0].flags.writeable
        await app.conversations.delete(gone)
        assert sqlite_ranker(app).vectors.size == 2 * 128
        expected = await ranking(app)
        hits = await conversations_found(app)
    assert hits and set(hits) == {keep}
    async with open_app(settings, background=False) as fresh:
        assert await ranking(fresh) == expected


@pytest.mark.parametrize("head_start", [False, True], ids=["read by the index", "read by the head start"])
async def test_a_new_process_reads_candidates_own_vectors_from_disk_until_the_warm_up(
    settings: Settings, db: Database, monkeypatch: pytest.MonkeyPatch, head_start: bool
) -> None:
    monkeypatch.setattr(vectors, "BLOCK_ROWS", BLOCK)
    async with open_app(settings, background=False) as first:
        await fill(first, 200, 60)
        assert await fold(first) == 2 * 192
        expected = await ranking(first)  # from the rows, before the fold
    async with opened(settings, head_start) as app:
        got = await ranking(app)
        index = sqlite_ranker(app).vectors
        content = index._matrices[FACET_CODES["content"]]
        assert index.loaded_from == "blocks" and content.on_disk() == [0, 1, 2]
        # the searches read their candidates' rows, never a whole block
        assert all(isinstance(block, vectors.DiskBlock) and block.held is None for block in content.blocks[:3])
        assert got == expected
        assert store_of(app).blobs._conn is not None
        await app.ranker.warm_up()
        assert content.on_disk() == [] and not content.blocks[0].flags.writeable  # held as read
        assert store_of(app).blobs._conn is None  # nothing more to read from disk
        assert await ranking(app) == expected
    async with open_app(settings, background=False) as again:  # closed before the warm-up read them
        assert await ranking(again) == expected
        reading = store_of(again).blobs._conn
        assert reading is not None
    with pytest.raises(sqlite3.ProgrammingError, match="closed"):
        reading.execute("SELECT 1")  # closed with the store


async def test_a_block_another_process_compacted_meanwhile_is_loaded_anew_not_misread(
    settings: Settings, db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(vectors, "BLOCK_ROWS", BLOCK)
    async with open_app(settings, background=False) as first:
        await fill(first, 64, 65)
        doomed = await fill(first, 40, 66)
        await fill(first, 24, 67)
        assert await fold(first) == 256
    query = unit_vectors(99, 1)[0]
    async with open_app(settings, background=False) as mine, open_app(settings, background=False) as theirs:
        index = sqlite_ranker(mine).vectors
        await index.refresh()
        content = index._matrices[FACET_CODES["content"]]
        assert content.on_disk() == [0, 1]
        doomed_seqs = {seq for (seq,) in db.rows("SELECT seq FROM memories WHERE conversation_id = ?", doomed)}
        # Between this process's refresh and its ranking, the other deletes a conversation and
        # compacts the blocks it emptied a quarter of (the second of each facet), then folds anew.
        await theirs.conversations.delete(doomed)
        assert await store_of(theirs).compact_vector_blocks(theirs.settings.embed_model) == 2
        await fill(theirs, 40, 68)
        assert await fold(theirs) == 2 * 64
        got = await index.rank(query, 10, Scope())
        assert index._matrices[FACET_CODES["content"]].on_disk() == []  # loaded anew, own vectors whole
        await sqlite_ranker(theirs).vectors.refresh()
        expected = await sqlite_ranker(theirs).vectors.rank(query, 10, Scope())
    assert len(doomed_seqs) == 40 and not doomed_seqs & {seq for seq, _ in got.ranked}
    assert got.ranked == expected.ranked
    assert {seq: round(value, 6) for seq, value in got.similarity.items()} == {
        seq: round(value, 6) for seq, value in expected.similarity.items()
    }


def mapped(path: Path) -> bool:
    """Whether pages of the file at ``path`` are mapped into this process."""
    return str(path) in Path("/proc/self/maps").read_text()


def test_the_disk_reader_refuses_gone_or_mismatched_blocks_and_unmaps_whole_reads(
    tmp_path: Path,
) -> None:
    path = tmp_path / "blocks.db"
    conn = sqlite3.connect(path)
    schema = (Path(vector_blocks.__file__).parent / "migrations" / "0018_vector_blocks.sql").read_text()
    conn.executescript(schema.split("-- `vector` may now be NULL")[0])  # the table alone
    held = np.arange(8, dtype="<f2").reshape(4, 2)
    conn.execute(
        "INSERT INTO vector_blocks (id, model, facet, dim, dtype, n, slots, vectors)"
        " VALUES (7, 'm', 'content', 2, '<f2', 4, ?, ?)",
        (vector_blocks.encode_slots([10, 11, 12, 13], [1, 2, 3, 4], [1, 1, 1, 1], [0, 0, 0, 0]), held.tobytes()),
    )
    conn.commit()
    disk = block_read.Blobs(path)
    try:
        assert disk.rows(7, [1, 3], [11, 13], 4) == held[[1, 3]].tobytes()
        assert mapped(path)  # (read through the memory map)
        assert disk.whole(7, np.array([10, 11, 12, 13], dtype="<i8").tobytes(), 4) == held.tobytes()
        assert not mapped(path)  # a block read whole leaves none of its pages counted in the process
        with pytest.raises(block_read.StaleBlock):
            disk.rows(7, [1], [99], 4)  # the slot holds another row now (the block's id reused)
        with pytest.raises(block_read.StaleBlock):
            disk.whole(7, np.array([10, 11, 12, 99], dtype="<i8").tobytes(), 4)
        conn.execute("DELETE FROM vector_blocks")
        conn.commit()
        with pytest.raises(block_read.StaleBlock):
            disk.rows(7, [1], [11], 4)  # compacted or dropped
    finally:
        disk.close()
        conn.close()


async def test_a_new_process_never_ranks_a_memory_another_process_deleted_after_it_loaded(
    settings: Settings, db: Database
) -> None:
    async with open_app(settings, background=False) as mine, open_app(settings, background=False) as theirs:
        keep = await fill(mine, 64, 7)
        gone = await fill(mine, 64, 8)
        assert await fold(mine) == 256
        await ranking(mine)  # loaded, from the blocks
        await theirs.conversations.delete(gone)
        hits = await conversations_found(mine)
    assert hits and set(hits) == {keep}


async def test_a_block_that_lost_a_quarter_of_its_slots_is_refolded_without_changing_rankings(
    settings: Settings, db: Database
) -> None:
    async with open_app(settings, background=False) as app:
        await fill(app, 64, 9)
        doomed = await fill(app, 40, 10)
        await fill(app, 24, 11)
        assert await fold(app) == 256  # two blocks a facet, the second holding 40 doomed of 64
        await app.conversations.delete(doomed)
        store = store_of(app)
        assert await store.compact_vector_blocks(app.settings.embed_model) == 2  # the second of each facet
        assert layout(db) == (2 * 24, 2 * 64, 2 * 64, 2)
        assert_each_vector_once(db)
        assert await fold(app) == 0  # 24 rows a facet: not a block's worth
        await fill(app, 40, 12)
        assert await fold(app) == 2 * 64
        assert_each_vector_once(db)
        expected_after = await ranking(app)
    assert db.count("SELECT count(*) FROM vector_block_dead") == 0
    async with open_app(settings, background=False) as fresh:
        assert await ranking(fresh) == expected_after


async def test_a_process_that_folded_meanwhile_leaves_the_new_rows_readable_from_their_blocks(
    settings: Settings, db: Database
) -> None:
    async with open_app(settings, background=False) as mine, open_app(settings, background=False) as theirs:
        await fill(mine, 64, 13)
        await ranking(mine)
        await fill(theirs, 64, 14)  # written and folded by the other process before this one looked
        assert await fold(theirs) == 256
        assert db.count("SELECT count(*) FROM memory_embeddings WHERE vector IS NOT NULL") == 0
        assert await ranking(mine) == await ranking(theirs)
        assert sqlite_ranker(mine).vectors.size == 256


async def test_two_processes_folding_at_once_fold_each_row_once(settings: Settings, db: Database) -> None:
    async with open_app(settings, background=False) as one, open_app(settings, background=False) as two:
        await fill(one, 640, 15)
        folded: list[int] = []

        async def run(app: App) -> None:
            folded.append(await fold(app))

        async with anyio.create_task_group() as group:
            group.start_soon(run, one)
            group.start_soon(run, two)
        assert sum(folded) == 2 * 640
        assert layout(db) == (0, 1280, 1280, 20)
        assert_each_vector_once(db)
        expected = await ranking(one)
    async with open_app(settings, background=False) as fresh:
        assert await ranking(fresh) == expected


_FOLDER = """
import sys, anyio
from pathlib import Path
from ollama_mcp.storage.sqlite.store import Store

async def main():
    store = await Store.open(Path(sys.argv[1]))
    print("open", flush=True)
    while True:
        await store.fold_vectors(sys.argv[2], 8)
        await store.compact_vector_blocks(sys.argv[2])

anyio.run(main)
"""


async def test_a_process_killed_mid_fold_leaves_every_vector_once_and_rankings_unchanged(
    settings: Settings, db: Database
) -> None:
    async with open_app(settings, background=False) as app:
        await fill(app, 400, 16)
        expected: list[list[tuple[str, float]]] | None = await ranking(app)
    for attempt in range(4):
        folder = subprocess.Popen(  # folds 8 rows a block, over and over, until killed
            [sys.executable, "-c", _FOLDER, str(settings.db_path), settings.embed_model],
            stdout=subprocess.PIPE, env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])},
        )
        assert folder.stdout is not None and folder.stdout.readline() == b"open\n"
        time.sleep(0.05 + 0.07 * attempt)
        folder.send_signal(signal.SIGKILL)
        folder.wait(timeout=10)
        assert_each_vector_once(db)
        if attempt == 1:  # deletions between crashes leave dead slots for compaction to meet
            db.rows("DELETE FROM memories WHERE seq IN (SELECT seq FROM memories ORDER BY seq LIMIT 3 OFFSET 40)")
            expected = None
    assert db.count("SELECT count(*) FROM vector_blocks") > 0  # it did fold before it was killed
    async with open_app(settings, background=False) as fresh:
        got = await ranking(fresh)
        assert sqlite_ranker(fresh).vectors.size == db.count("SELECT count(*) FROM memory_embeddings")
    if expected is not None:
        assert got == expected


async def test_reembedding_from_scratch_drops_the_blocks_with_the_rows(settings: Settings, db: Database) -> None:
    async with open_app(settings, background=False) as app:
        await fill(app, 64, 17)
        assert await fold(app) == 128
        assert await store_of(app).delete_vectors(app.settings.embed_model) == 128
    assert layout(db) == (0, 0, 0, 0)


async def test_ended_conversations_are_compared_by_their_summaries_vectors_once_folded(
    settings: Settings, db: Database
) -> None:
    async with open_app(settings, background=False) as app:
        store, model = store_of(app), app.settings.embed_model
        ids = []
        for seed in range(3):
            conversation = await fill(app, 30, 20 + seed)
            ids.append(conversation)
            await app.conversations.end(conversation, summary=f"summary of batch {seed} about walruses")
        while await app.indexer.backfill_once():
            pass
        before = await store.similar_summaries(ids[0], model, 5)
        assert await store.fold_vectors(model, 8) > 0
        assert db.count(
            "SELECT count(*) FROM memory_embeddings e JOIN memories m ON m.seq = e.memory_seq"
            " WHERE m.kind = 'summary' AND e.vector IS NULL"
        ) > 0
        after = await store.similar_summaries(ids[0], model, 5)
    assert before is not None and after is not None and [c for c, _ in after] == [c for c, _ in before]
    for (_, was), (_, now) in zip(before, after, strict=True):
        assert now == pytest.approx(was, abs=1e-3)


async def test_a_store_upgraded_beside_a_vector_file_loses_the_file_and_keeps_every_vector(
    settings: Settings, db: Database
) -> None:
    leftover = settings.db_path.with_name(f"{settings.db_path.name}-vectors-{settings.embed_model}")
    async with open_app(settings, background=False) as app:
        await fill(app, 64, 30)
        expected = await ranking(app)
    leftover.write_bytes(b"OMCPVEC1 as an older version wrote it")
    async with open_app(settings, background=False) as app:
        assert not leftover.exists()
        assert await ranking(app) == expected


def test_the_block_reader_waits_for_a_busy_store_and_holds_every_facet() -> None:
    assert block_read.BUSY_TIMEOUT_MS == sqlite_db.BUSY_TIMEOUT_MS  # (twice: block_read imports nothing of ours)
    assert set(vector_blocks.HELD) == set(FACET_CODES)


def test_the_row_index_finds_the_rows_of_memories_with_one_chunk_and_with_several() -> None:
    index = vectors._RowIndex()
    index.add([5, 2, 9], 0)  # one row each, in one array
    index.add([7, 7, 7], 3)  # a memory in three chunks
    index.add([2], 6)  # a second row for memory 2
    rows_of = [sorted(index.lookup(np.array([seq]))[0].tolist()) for seq in (5, 7, 2, 4, 10**6)]
    assert rows_of == [[0], [3, 4, 5], [1, 6], [], []]
    rows, owners = index.lookup(np.array([2, 7, 5, 4, 10**6]))
    assert sorted(zip(owners.tolist(), rows.tolist(), strict=True)) == [(2, 1), (2, 6), (5, 0), (7, 3), (7, 4), (7, 5)]
    assert index.holds(np.array([9, 4, 7, -1, 10**6])).tolist() == [True, False, True, False, False]
    assert index.without(vectors._RowIndex()) == {2, 5, 7, 9} and 9 in index and 4 not in index
    index.add(np.array([11, 12]), 7)  # (a load hands over arrays)
    assert index.lookup(np.array([12]))[0].tolist() == [8]


def test_a_row_index_tells_the_memories_it_holds_that_another_lacks_whatever_their_lengths() -> None:
    content, context = vectors._RowIndex(), vectors._RowIndex()
    content.add(np.array([1, 2, 3, 40, 41]), 0)
    content.add([3], 5)  # memory 3 in two chunks: still one memory
    context.add(np.array([2, 3]), 0)
    assert content.without(context) == {1, 40, 41}
    context.add(np.array([1, 500]), 2)  # context's array now the longer one
    assert content.without(context) == {40, 41}
    assert context.without(content) == {500}
    assert vectors._RowIndex().without(content) == set() and content.without(vectors._RowIndex()) == {1, 2, 3, 40, 41}


def test_a_matrix_counts_its_rows_per_conversation_and_kind_as_they_come_and_go() -> None:
    matrix = vectors.Matrix(2, np.dtype(np.float32))
    convs, kinds = np.array([3, 3, 7, 0, 3]), np.array([0, 2, 0, 0, 1])
    matrix.extend(np.arange(1, 6), np.arange(10, 15), convs, kinds, np.ones((5, 2), dtype=np.float32))
    assert dict(matrix.per_conversation) == {3: 3, 7: 1, 0: 1} and dict(matrix.per_kind) == {0: 3, 2: 1, 1: 1}
    matrix.extend(np.array([6]), np.array([15]), np.array([7]), np.array([2]), np.ones((1, 2), dtype=np.float32))
    matrix.remove(np.array([10, 11]))  # two of conversation 3's rows
    assert +matrix.per_conversation == {3: 1, 7: 2, 0: 1} and +matrix.per_kind == {0: 2, 1: 1, 2: 1}


@pytest.mark.parametrize("conversations", [1, 2, 5, 40], ids=["every row", "half", "a fifth", "a fortieth"])
def test_a_scope_of_few_rows_is_scored_by_them_alone_exactly_as_by_every_row(
    conversations: int,
) -> None:
    """Rows of a conversation spread over three blocks (a part one), with a kind filter and a list of
    memories on top: every row in scope gets the score a plain product gives, every other -inf."""
    rng = np.random.default_rng(conversations)
    n = 2 * vectors.BLOCK_ROWS + 300
    held = rng.standard_normal((n, 16)).astype(np.float32)
    convs, kinds = rng.integers(0, conversations, n), rng.integers(0, 2, n).astype(np.int8)
    matrix = vectors.Matrix(16, np.dtype(np.float32))
    matrix.extend(np.arange(n), np.arange(100, 100 + n), convs, kinds, held)
    query = rng.standard_normal(16).astype(np.float32)
    seqs = frozenset(range(100, 100 + n, 3))
    for scope, inside in [
        (Scope(conversation_key=0), convs == 0),
        (Scope(conversation_key=0, kind_codes=(1,)), (convs == 0) & (kinds == 1)),
        (Scope(conversation_key=0, memory_seqs=seqs), (convs == 0) & (np.arange(n) % 3 == 0)),
        (Scope(conversation_key=conversations), np.zeros(n, dtype=bool)),  # a conversation with no row
    ]:
        scores = matrix.scores(query, scope)
        assert np.array_equal(np.isfinite(scores), inside)
        assert np.allclose(scores[inside], held[inside] @ query, atol=1e-5)


def test_a_large_matrix_multiplied_in_two_halves_gives_every_row_its_own_product() -> None:
    """From ``SPLIT_ROWS`` on, a helper thread multiplies half of the blocks (17 here, the last one
    part full): every row gets the score a plain product gives, and a scope over half the rows
    keeps the others at -inf."""
    rng = np.random.default_rng(7)
    n = vectors.SPLIT_ROWS + 300
    held = rng.standard_normal((n, 16)).astype(np.float32)
    convs = rng.integers(0, 2, n)
    matrix = vectors.Matrix(16, np.dtype(np.float32))
    matrix.extend(np.arange(n), np.arange(n), convs, np.zeros(n, dtype=np.int8), held)
    for _ in range(3):
        query = rng.standard_normal(16).astype(np.float32)
        assert np.allclose(matrix.scores(query, Scope()), held @ query, atol=1e-5)
        half = matrix.scores(query, Scope(conversation_key=1))
        assert np.array_equal(np.isfinite(half), convs == 1)
        assert np.allclose(half[convs == 1], (held @ query)[convs == 1], atol=1e-5)


async def test_a_store_from_before_blocks_upgrades_in_place_and_ranks_as_before(
    settings: Settings, tmp_path: Path
) -> None:
    path = tmp_path / "upgraded.db"
    path.write_bytes((Path(__file__).parents[1] / "fixtures" / "schema_0017.db").read_bytes())
    upgraded = replace(settings, db_path=path)
    async with open_app(upgraded, background=False) as app:
        store, model = store_of(app), upgraded.embed_model
        expected = await ranking(app)
        assert any(expected)  # (its vectors are the model's and the query's size)
        rows = await store._fetchall("SELECT count(*) FROM memory_embeddings WHERE model = ?", (model,), "count")
        assert rows[0][0] == 8
        assert await store.fold_vectors(model, 2) == 8
    async with open_app(upgraded, background=False) as app:
        assert await ranking(app) == expected and sqlite_ranker(app).vectors.loaded_from == "blocks"
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        assert conn.execute("SELECT count(*) FROM memory_embeddings WHERE vector IS NULL").fetchone() == (8,)


async def test_a_store_upgraded_from_counted_dead_slots_lists_them_and_ranks_as_before(
    settings: Settings, tmp_path: Path
) -> None:
    """Schema 19 counted a block's dead slots on the block (and kept a creation time per row);
    schema 20 lists them in ``vector_block_dead``. The upgrade finds which slots were dead from
    the rows left, and keeps AUTOINCREMENT's counter above the deleted newest rows' ids."""
    path = tmp_path / "old" / "memory.db"
    sqlite_store_at(path, 19)
    model, own, conversation = settings.embed_model, unit_vectors(21, 7), "0e5c4a1e-0000-4000-8000-000000000001"
    with closing(sqlite3.connect(path, isolation_level=None)) as conn:
        conn.execute("PRAGMA foreign_keys = ON")
        conn.execute("INSERT INTO conversations (id, name, created_at) VALUES (?, 'c', '2026-01-01')", (conversation,))
        for n in range(1, 8):
            conn.execute(
                "INSERT INTO memories (seq, id, conversation_id, kind, content, content_hash, created_at)"
                " VALUES (?, ?, ?, 'note', ?, ?, '2026-01-01')", (n, f"m{n}", conversation, f"memory {n}", f"h{n}"),
            )
        for facet, first in (("content", 1), ("context", 7)):  # ids 1-6 and 7-12 for m1-m6
            conn.executemany(
                "INSERT INTO memory_embeddings (id, memory_seq, model, facet, chunk_index, dim, vector, created_at)"
                " VALUES (?, ?, ?, ?, 0, ?, ?, '2026-01-01')",
                [(first + i, i + 1, model, facet, DIM, own[i].tobytes()) for i in range(6)],
            )
            dtype = vector_blocks.HELD[facet]
            block = conn.execute(
                "INSERT INTO vector_blocks (model, facet, dim, dtype, n, slots, vectors) VALUES (?, ?, ?, ?, 6, ?, ?)",
                (model, facet, DIM, dtype,
                 vector_blocks.encode_slots(range(first, first + 6), range(1, 7), [1] * 6, [0] * 6),
                 vector_blocks.encode_vectors([v.tobytes() for v in own[:6]], dtype)),
            ).lastrowid
            conn.executemany(
                "UPDATE memory_embeddings SET vector = NULL, block_id = ?, slot = ? WHERE id = ?",
                [(block, i, first + i) for i in range(6)],
            )
        conn.executemany(  # m7's two vectors, not folded: ids 13 and 14
            "INSERT INTO memory_embeddings (memory_seq, model, facet, chunk_index, dim, vector, created_at)"
            " VALUES (7, ?, ?, 0, ?, ?, '2026-01-01')",
            [(model, facet, DIM, own[6].tobytes()) for facet in FACET_CODES],
        )
        conn.execute("DELETE FROM memories WHERE id IN ('m5', 'm7')")  # slot 4 of each block dies; 13, 14 go
        assert conn.execute("SELECT facet, n, dead FROM vector_blocks ORDER BY id").fetchall() == [
            ("content", 6, 1), ("context", 6, 1),
        ]
    upgraded = replace(settings, db_path=path)
    async with open_app(upgraded, background=False) as app:
        firsts = [[hit.memory.id for hit in await app.ranker.search("", own[i], SearchFilters(), None, 10, None)][:1]
                  for i in range(6)]
        assert sqlite_ranker(app).vectors.loaded_from == "blocks" and sqlite_ranker(app).vectors.size == 10
        assert firsts == [["m1"], ["m2"], ["m3"], ["m4"], [], ["m6"]]  # m5's slots are dead
        stored = await app.memories.store(new_note("a memory after the upgrade", conversation))
    db = Database("sqlite", str(path))
    assert db.rows("SELECT b.facet, d.slot FROM vector_block_dead d JOIN vector_blocks b ON b.id = d.block_id"
                   " ORDER BY 1") == [("content", 4), ("context", 4)]
    assert_each_vector_once(db)
    assert "created_at" not in {row[1] for row in db.rows("PRAGMA table_info(memory_embeddings)")}
    assert db.rows(  # the first vector after the upgrade is given 15: 13 and 14 are never given again
        "SELECT min(e.id) FROM memory_embeddings e JOIN memories m ON m.seq = e.memory_seq WHERE m.id = ?",
        stored.memory.id,
    ) == [(15,)]


async def test_a_new_store_gives_pages_a_fold_emptied_back_and_an_older_one_keeps_them(
    settings: Settings, db: Database, tmp_path: Path
) -> None:
    async with open_app(settings, background=False) as app:
        await fill(app, 640, 40)
        store = store_of(app)
        assert await fold(app) == 1280
        await store.give_back_free_pages(at_least=10**9)  # (nothing: fewer free pages than that)
        free = db.count("PRAGMA freelist_count")
        assert free > 100  # what 1,280 rows of 1 KB left, less the pages the blocks took of it
        before = db.count("PRAGMA page_count")
        assert await store.give_back_free_pages(at_least=0) == free
        assert db.count("PRAGMA freelist_count") == 0 and db.count("PRAGMA page_count") == before - free
        await ranking(app)
    db.rows("PRAGMA wal_checkpoint(TRUNCATE)")  # (whenever the last connection closes, SQLite does this)
    assert settings.db_path.stat().st_size == (before - free) * db.count("PRAGMA page_size")
    async with open_app(settings, background=False) as app:
        await ranking(app)
        assert sqlite_ranker(app).vectors.size == 1280
    older = tmp_path / "older.db"
    older.write_bytes((Path(__file__).parents[1] / "fixtures" / "schema_0017.db").read_bytes())
    async with open_app(replace(settings, db_path=older), background=False) as app:
        assert await store_of(app).fold_vectors(app.settings.embed_model, 2) == 8
        assert await store_of(app).give_back_free_pages(at_least=0) == 0  # auto_vacuum is off there


async def test_a_head_start_reads_the_blocks_once_while_the_app_imports_and_creates_no_store(
    settings: Settings, db: Database, tmp_path: Path
) -> None:
    async with open_app(settings, background=False) as first:
        await fill(first, 100, 41)
        assert await fold(first) == 128
        await ranking(first)
        size = sqlite_ranker(first).vectors.size
    async with HeadStart.running(settings) as head:
        early = await head.vectors(settings.db_path, settings.embed_model)
        assert early is not None and early.rows == size == 200
        assert {code: len(rows.ids) for code, rows in early.facets.items()} == {0: 100, 1: 100}
        assert {part.dtype for part in early.facets[FACET_CODES["content"]].vectors} == {np.dtype(np.float16)}
        assert await head.vectors(settings.db_path, settings.embed_model) is None  # taken once
    async with HeadStart.running(settings) as head:
        assert await head.vectors(settings.db_path, "another-model") is None
    nowhere = replace(settings, db_path=tmp_path / "not-yet.db")
    async with HeadStart.running(nowhere) as head:
        assert await head.vectors(nowhere.db_path, nowhere.embed_model) is None
    assert not nowhere.db_path.exists()

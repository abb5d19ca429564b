"""A new process starts ranking from the vector file the last one wrote, never from a file that
is not this database's current state: one from an older state is caught up, one from another
database, a damaged one or one holding deleted memories is rebuilt from the database."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from ollama_mcp.app import App, open_app
from ollama_mcp.config import Settings
from ollama_mcp.domain import SearchFilters
from ollama_mcp.head_start import HeadStart
from ollama_mcp.storage.sqlite import matrix as vectors
from ollama_mcp.storage.sqlite import vector_file
from ollama_mcp.storage.sqlite.store import FACET_CODES
from tests.conftest import Database

pytestmark = [pytest.mark.anyio, pytest.mark.sqlite_only]  # the SQLite backend's in-memory vectors

DIM = 256  # the fake Ollama's nomic-embed-text


@pytest.fixture(autouse=True)
def small_stores_get_a_file_too(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(vector_file, "MIN_ROWS", 1)


def unit_vectors(seed: int, count: int) -> list[np.ndarray]:
    vectors = np.random.default_rng(seed).standard_normal((count, DIM)).astype(np.float32)
    return list(vectors / np.linalg.norm(vectors, axis=1, keepdims=True))


async def fill(app: App, count: int, seed: int) -> str:
    conversation = await app.service.init_conversation(f"batch {seed}")
    texts = [f"memory {seed}-{i}" for i in range(count)]
    await app.service.import_memories(conversation.id, texts, unit_vectors(seed, count))
    while await app.indexer.backfill_once():  # the context vectors, from the fake Ollama
        pass
    return conversation.id


async def write_file(app: App) -> None:
    """The app's vectors, loaded and written to its vector file."""
    await app.ranker.vectors.refresh()
    assert await app.ranker.vectors.save()


async def ranking(app: App) -> list[list[str]]:
    await app.ranker.vectors.refresh()
    out = []
    for query in unit_vectors(99, 5):
        hits = await app.ranker.search("", query, SearchFilters(), None, 10, None)
        out.append([hit.memory.id for hit in hits])
    return out


@asynccontextmanager
async def opened(settings: Settings, head_start: bool) -> AsyncIterator[App]:
    """The app, opened as a server opens it (``head_start``: with the file read meanwhile) or not."""
    if not head_start:
        async with open_app(settings, background=False) as app:
            yield app
        return
    async with HeadStart.running(settings) as head, open_app(settings, background=False, head_start=head) as app:
        yield app


def file_of(settings: Settings) -> Path:
    return vector_file.path_for(settings.db_path, settings.embed_model)


@pytest.mark.parametrize("block_rows", [None, 64], ids=["one partly filled block", "mapped blocks and a copied tail"])
async def test_a_new_process_ranks_from_the_file_and_catches_up_on_rows_written_after_it(
    settings: Settings, monkeypatch: pytest.MonkeyPatch, block_rows: int | None
) -> None:
    if block_rows is not None:
        monkeypatch.setattr(vectors, "BLOCK_ROWS", block_rows)
    async with open_app(settings, background=False) as first:
        await fill(first, 300, 1)
        await write_file(first)
        await fill(first, 40, 2)  # after the file was written
        expected = await ranking(first)
        size = first.ranker.vectors.size
    assert file_of(settings).stat().st_mode & 0o777 == 0o600  # vectors of private notes
    async with open_app(settings, background=False) as second:
        assert await ranking(second) == expected
        assert second.ranker.vectors.loaded_from == "file" and second.ranker.vectors.size == size


@pytest.mark.parametrize("head_start", [False, True], ids=["read by the index", "read by the head start"])
@pytest.mark.parametrize("damage", ["a flipped byte", "cut short", "another database's"])
async def test_a_file_that_is_not_this_databases_is_rebuilt_from_the_database(
    settings: Settings, db: Database, damage: str, head_start: bool
) -> None:
    async with open_app(settings, background=False) as first:
        await fill(first, 200, 3)
        await write_file(first)
        expected = await ranking(first)
    path = file_of(settings)
    data = bytearray(path.read_bytes())
    if damage == "a flipped byte":
        data[len(data) // 2] ^= 0x40
        path.write_bytes(bytes(data))
    elif damage == "cut short":
        path.write_bytes(bytes(data[:-100]))
    else:  # the same ids, other vectors: a database restored from elsewhere under the same name
        db.rows("UPDATE memory_embeddings SET vector = zeroblob(length(vector)) WHERE id % 2 = 0")
        expected = None
    async with opened(settings, head_start) as second:
        got = await ranking(second)
        assert second.ranker.vectors.loaded_from == "database"
        if expected is not None:
            assert got == expected
        assert not path.exists()  # removed, and written anew by the next upkeep
        assert await second.ranker.vectors.save() and vector_file.read(path, settings.embed_model) is not None


async def test_a_head_start_reads_and_checks_the_file_while_the_app_imports_and_the_index_starts_from_it(
    settings: Settings,
) -> None:
    async with open_app(settings, background=False) as first:
        await fill(first, 300, 7)
        await write_file(first)
        expected, size = await ranking(first), first.ranker.vectors.size
    async with HeadStart.running(settings) as head:
        early = await head.vector_file(file_of(settings), settings.embed_model)
        assert early is not None and early.rows == size
        assert early.scanned == (FACET_CODES["context"],)  # what every search reads: mapped in early
        assert await head.vector_file(file_of(settings), settings.embed_model) is None  # taken once
    async with HeadStart.running(settings) as head:
        assert await head.vector_file(file_of(settings), "another-model") is None
    async with opened(settings, head_start=True) as second:
        assert await ranking(second) == expected
        assert second.ranker.vectors.loaded_from == "file" and second.ranker.vectors.size == size


async def test_own_vectors_are_held_at_half_size_and_similarities_stay_within_a_ten_thousandth(
    settings: Settings,
) -> None:
    async with open_app(settings, background=False) as first:
        conversation = await fill(first, 300, 8)
        texts = [f"uncovered {i}" for i in range(300)]  # no context vectors yet: ranked by their own
        await first.service.import_memories(conversation, texts, unit_vectors(10, 300))
        await write_file(first)
        expected = await ranking(first)
    found = vector_file.read(file_of(settings), settings.embed_model)
    assert found is not None
    content, context = found.facets[FACET_CODES["content"]], found.facets[FACET_CODES["context"]]
    assert isinstance(content.vectors, np.ndarray) and content.vectors.dtype == np.float16
    assert isinstance(context.vectors, np.ndarray) and context.vectors.dtype == np.float32  # multiplied whole
    own = dict(zip([f"memory 8-{i}" for i in range(300)], unit_vectors(8, 300), strict=True))
    own |= dict(zip([f"uncovered {i}" for i in range(300)], unit_vectors(10, 300), strict=True))
    async with open_app(settings, background=False) as second:
        assert await ranking(second) == expected and second.ranker.vectors.loaded_from == "file"
        query = np.sum(unit_vectors(10, 10), axis=0)  # near the first ten uncovered memories' own vectors
        query /= np.linalg.norm(query)
        hits = await second.ranker.search("", query, SearchFilters(conversation_ids=(conversation,)), None, 10, None)
    assert {hit.memory.content for hit in hits} == {f"uncovered {i}" for i in range(10)}
    for hit in hits:
        assert hit.similarity == pytest.approx(float(own[hit.memory.content] @ query), abs=1.5e-4)


async def test_a_file_holding_own_vectors_as_float32_as_older_versions_wrote_is_rebuilt(settings: Settings) -> None:
    async with open_app(settings, background=False) as first:
        await fill(first, 200, 9)
        await write_file(first)
        expected = await ranking(first)
    path = file_of(settings)
    found = vector_file.read(path, settings.embed_model)
    assert found is not None
    older = {
        code: replace(rows, vectors=np.asarray(rows.vectors, dtype=np.float32)) for code, rows in found.facets.items()
    }
    vector_file.write(path, replace(found, facets=older))
    async with open_app(settings, background=False) as second:
        assert await ranking(second) == expected
        assert second.ranker.vectors.loaded_from == "database"
        assert not path.exists()  # written anew, at half size, by the next upkeep
        assert await second.ranker.vectors.save()
    rewritten = vector_file.read(path, settings.embed_model)
    assert rewritten is not None
    assert rewritten.facets[FACET_CODES["content"]].vectors.dtype == np.float16  # type: ignore[union-attr]


async def test_deleting_memories_removes_the_file_that_holds_their_vectors(settings: Settings, db: Database) -> None:
    async with open_app(settings, background=False) as app:
        conversation = await fill(app, 100, 4)
        await write_file(app)
        await app.service.delete_conversation(conversation)
        assert not file_of(settings).exists()


async def test_a_file_written_before_another_process_deleted_rows_is_not_trusted(settings: Settings) -> None:
    async with open_app(settings, background=False) as mine, open_app(settings, background=False) as theirs:
        keep = await fill(mine, 150, 5)
        gone = await fill(mine, 150, 6)
        await write_file(mine)
        saved = file_of(settings).read_bytes()
        await theirs.service.delete_conversation(gone)
    file_of(settings).write_bytes(saved)  # as if the deleting process had died before removing it
    async with open_app(settings, background=False) as fresh:
        await fresh.ranker.vectors.refresh()
        assert fresh.ranker.vectors.loaded_from == "database"
        hits = [hit for query in unit_vectors(99, 5)
                for hit in await fresh.ranker.search("", query, SearchFilters(), None, 10, None)]
    assert hits and {hit.memory.conversation_id for hit in hits} == {keep}


def _resident_file_kb() -> int:
    return next(int(line.split()[1]) for line in Path("/proc/self/status").read_text().splitlines()
                if line.startswith("RssFile:"))


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads Linux's /proc")
def test_rows_copied_out_of_a_mapped_file_leave_the_process_and_read_back_unchanged(tmp_path: Path) -> None:
    n = 6000  # 6 MB of vectors
    stored = np.random.default_rng(5).standard_normal((n, DIM)).astype(np.float32)
    rows = vector_file.FacetRows(np.arange(n, dtype=np.int64), np.arange(n, dtype=np.int64),
                                 np.zeros(n, dtype=np.int64), np.zeros(n, dtype=np.int8), stored)
    path = tmp_path / "vectors"
    vector_file.write(path, vector_file.VectorFile("m", DIM, n, 0, {0: rows}, scanned=(0,)))
    found = vector_file.read(path, "m")
    assert found is not None
    mapped = found.facets[0].vectors
    assert isinstance(mapped, np.ndarray)
    before = _resident_file_kb()  # every page mapped in: the facet is scanned
    vector_file.release_rows(mapped, 2000)
    released = _resident_file_kb()
    assert before - released >= 3500  # 4 MB of rows 2000 on, less the page shared with row 1999
    assert np.array_equal(mapped, stored)  # read again from the file
    vector_file.release_rows(stored, 0)  # an array not mapped from a file: nothing happens
    assert np.array_equal(mapped[:10], stored[:10])


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

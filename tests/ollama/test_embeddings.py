"""Embedding through the real client: task prefixes, batching, and long text that is chunked so no
part of it falls out of search."""

from __future__ import annotations

from dataclasses import replace

import pytest

from ollama_mcp.app import App, open_app
from ollama_mcp.config import Settings
from ollama_mcp.inputs.memories import note as new_note
from ollama_mcp.inputs.search import search_request
from ollama_mcp.ollama.embedding_text import chunk_text, prefixes_for
from ollama_mcp.services import indexer
from tests.conftest import Database, backfill
from tests.support.fake_ollama import FakeModel, FakeOllama

pytestmark = pytest.mark.anyio


def test_chunks_cover_the_whole_text_with_overlap() -> None:
    text = " ".join(f"word{i}" for i in range(500))
    chunks = chunk_text(text, 400)
    assert chunks[0].start == 0 and chunks[-1].end == len(text)
    for before, after in zip(chunks, chunks[1:], strict=False):
        assert after.start < before.end  # overlap: nothing falls between two chunks
    assert all(c.end - c.start <= 400 for c in chunks)
    assert chunk_text("short", 400) == [chunk_text("short", 400)[0]] and chunk_text("short", 400)[0].end == 5


def test_model_task_prefixes_are_known_per_family() -> None:
    assert prefixes_for("nomic-embed-text") == ("search_document: ", "search_query: ")
    assert prefixes_for("nomic-embed-text:v1.5") == ("search_document: ", "search_query: ")
    assert prefixes_for("all-minilm") == ("", "")


async def test_documents_and_queries_get_the_nomic_prefixes(app: App, fake_ollama: FakeOllama) -> None:
    await app.memories.store(new_note("prefix check"))
    await app.recall.search(search_request("prefix"))
    inputs = [text for r in fake_ollama.embed_requests() for text in r.body["input"]]
    assert inputs == ["search_document: prefix check", "search_query: prefix"]
    assert all(r.body["truncate"] is False for r in fake_ollama.embed_requests())


async def test_a_long_memory_is_chunked_and_a_late_chunks_hit_returns_the_whole_memory(
    settings: Settings, db: Database, fake_ollama: FakeOllama
) -> None:
    fake_ollama.models["nomic-embed-text"] = FakeModel(context=200)  # 600-character chunks
    fake_ollama.concepts.update({"zeppelin": "airship", "dirigible": "airship"})
    filler = " ".join(f"filler{i}" for i in range(400))
    content = filler + " the last part mentions a zeppelin"
    async with open_app(settings, background=False) as app:
        stored = await app.memories.store(new_note(content))
        await app.memories.store(new_note("a short unrelated memory"))
        outcome = await app.recall.search(search_request("dirigible"))  # no shared keyword
    assert outcome.hits[0].memory.id == stored.memory.id
    assert outcome.hits[0].memory.content == content
    chunks = db.count(
        "SELECT count(*) FROM memory_embeddings e JOIN memories m ON m.seq = e.memory_seq WHERE m.id = ?",
        stored.memory.id,
    )
    assert chunks > 3


async def test_text_over_the_model_context_is_split_until_it_fits_never_truncated(
    settings: Settings, db: Database, fake_ollama: FakeOllama
) -> None:
    fake_ollama.models["nomic-embed-text"] = FakeModel(context=20)  # far below our chunk estimate
    content = " ".join(f"w{i}" for i in range(300))
    async with open_app(settings, background=False) as app:
        stored = await app.memories.store(new_note(content))
    assert stored.embedding_status == "embedded"
    too_long = [r for r in fake_ollama.embed_requests() if any(len(t.split()) > 21 for t in r.body["input"])]
    assert too_long  # the server refused those ...
    assert db.count("SELECT count(*) FROM memory_embeddings") >= 300 // 20  # ... and the pieces that fit were stored


async def store_pending(app: App, fake_ollama: FakeOllama, texts: list[str]) -> None:
    """Store memories while Ollama is down: each waits for the backfill."""
    fake_ollama.stop()
    for text in texts:
        await app.memories.store(new_note(text))
    fake_ollama.start()


async def test_many_pending_memories_are_embedded_in_batches(
    settings: Settings, fake_ollama: FakeOllama
) -> None:
    async with open_app(settings, background=False) as app:
        await store_pending(app, fake_ollama, [f"pending number {i}" for i in range(40)])
        before = len(fake_ollama.embed_requests())
        assert await app.indexer.backfill_once() == 32
        assert await app.indexer.backfill_once() == 8
        assert await app.indexer.backfill_once() == 0
        batches = fake_ollama.embed_requests()[before:]
    # 40 contents and 40 contexts, less the first context, which is its content again
    assert sum(len(r.body["input"]) for r in batches) == 79
    assert max(len(r.body["input"]) for r in batches) == 32


async def test_background_requests_take_about_a_tenth_of_a_second_so_searches_never_wait_long(
    settings: Settings, fake_ollama: FakeOllama
) -> None:
    async with open_app(settings, background=False) as app:
        await store_pending(app, fake_ollama, [f"pending number {i}" for i in range(30)])
        fake_ollama.delay_per_text = 0.02  # a CPU: 32 texts would hold Ollama for 0.64 s
        before = len(fake_ollama.embed_requests())
        await backfill(app)
        slow = [len(r.body["input"]) for r in fake_ollama.embed_requests()[before:]]
        await store_pending(app, fake_ollama, [f"more number {i}" for i in range(40)])
        fake_ollama.delay_per_text = 0.0  # a GPU
        before = len(fake_ollama.embed_requests())
        await backfill(app)
        fast = [len(r.body["input"]) for r in fake_ollama.embed_requests()[before:]]
        assert await app.indexer.pending_count() == 0
    assert slow[0] == 4 and max(slow[1:]) <= 5  # 0.1 s / 0.02 s a text
    assert max(fast) == 32


async def test_the_backfill_looks_through_a_large_store_a_range_of_memories_at_a_time(
    settings: Settings, db: Database, fake_ollama: FakeOllama, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(indexer, "SCAN_SEQS", 4)  # a store of 30 memories is eight ranges
    async with open_app(settings, background=False) as app:
        await store_pending(app, fake_ollama, [f"pending number {i}" for i in range(30)])
        first = db.count("SELECT min(seq) FROM memories")
        in_range = await app.store.pending_memories(app.indexer.model, 32, first - 1, first + 3)
        assert [memory.content for memory, _ in in_range] == [f"pending number {i}" for i in range(4)]
        await backfill(app)
        assert await app.indexer.pending_count() == 0


async def test_a_memory_left_pending_behind_the_backfill_is_embedded_by_its_next_pass(
    settings: Settings, db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with open_app(settings, background=False) as app:
        for i in range(5):
            await app.memories.store(new_note(f"remembered number {i}"))
        await backfill(app)
        # As another process's reembed or delete leaves it: the first memory lacks its context vector.
        db.rows(
            "DELETE FROM memory_embeddings WHERE facet = 'context'"
            " AND memory_seq = (SELECT min(seq) FROM memories) AND memory_seq <> (SELECT max(seq) FROM memories)"
        )
        assert await app.indexer.pending_count() == 1
        assert await app.indexer.backfill_once() == 0  # a pass over the store started a moment ago
        await app.memories.store(new_note("stored after it"))
        assert await app.indexer.backfill_once() == 1  # the new one's context, after the cursor
        monkeypatch.setattr(indexer, "BACKFILL_POLL_SECONDS", 0.0)  # as a minute later
        assert await app.indexer.backfill_once() == 1
        assert await app.indexer.pending_count() == 0


async def test_no_embedding_model_means_no_vectors_from_anything_else(settings: Settings, db: Database) -> None:
    async with open_app(replace(settings, embed_model="missing-model"), background=False) as app:
        stored = await app.memories.store(new_note("stays pending"))
        assert stored.embedding_status == "pending"
    assert db.count("SELECT count(*) FROM memory_embeddings") == 0


async def test_the_start_up_warm_up_gives_way_to_a_query_that_came_first(app: App, fake_ollama: FakeOllama) -> None:
    embedder = app.indexer.embedder
    await embedder.embed_query("asked before the model was warmed")
    before = len(fake_ollama.embed_requests())
    await embedder.warm()  # the query loaded the model: a warm-up now would only queue before the next call
    assert len(fake_ollama.embed_requests()) == before == 1

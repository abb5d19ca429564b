"""The in-memory keyword index ranks exactly as FTS5 does, and stays exact while this process
and others insert, delete and rewrite memories on the same file."""

from __future__ import annotations

import random
import sqlite3
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, closing
from dataclasses import replace
from pathlib import Path
from typing import Any

import anyio
import pytest

from ollama_mcp.app import App, open_app
from ollama_mcp.config import Settings
from ollama_mcp.domain import Scope, SearchFilters
from ollama_mcp.inputs.conversations import new_conversation
from ollama_mcp.inputs.memories import note as new_note
from ollama_mcp.inputs.memories import note_change, notes_to_import
from ollama_mcp.inputs.search import search_request
from ollama_mcp.storage.ranker import QueryVector
from ollama_mcp.storage.ranking import SearchTuning, query_terms
from ollama_mcp.storage.sqlite import keywords as store_keywords
from ollama_mcp.storage.sqlite.db import connect_reader, migrations
from ollama_mcp.storage.sqlite.keyword_index import KeywordIndex
from ollama_mcp.storage.sqlite.store import FACET_CODES, KEYWORD_TABLES, TOKENIZER
from tests.support.fake_ollama import FakeOllama
from tests.support.sqlite_parts import sqlite_ranker, sqlite_store

pytestmark = [pytest.mark.anyio, pytest.mark.sqlite_only]  # the SQLite backend's in-memory keyword index

# Inflections FTS5's porter stemmer folds together, diacritics it strips, capitals, digits.
VOCABULARY = (
    "running runs runner ran Café cafe naïve naive harbour harbours crane cranes invoice INV-7781 2026 "
    "meeting meetings met decide decided decision queue queued zeppelin tuesday Tuesday red house garden "
    "gardening painted blue car cars engine engines budget budgets report reported reporting"
).split()
KEYWORDS_ONLY = SearchTuning(vector_weight=0, vector_context_weight=0)
# Keywords in the memories' own text only: a memory's context holds its neighbours' words too.
CONTENT_ONLY = replace(KEYWORDS_ONLY, keyword_context_weight=0)


def sentence(rng: random.Random) -> str:
    return " ".join(rng.choice(VOCABULARY) for _ in range(rng.randint(1, 12)))


def fts5_scores(db_path: Path, table: str, words: list[str]) -> dict[int, float]:
    """FTS5's own BM25 score of every memory matching any of ``words`` (higher is better)."""
    match = " OR ".join('"' + w.replace('"', '""') + '"' for w in words)
    with sqlite3.connect(db_path) as conn:
        found = conn.execute(f"SELECT rowid, rank FROM {table} WHERE {table} MATCH ?", (match,)).fetchall()
    return {seq: -rank for seq, rank in found}


async def assert_ranks_as_fts5(index: KeywordIndex, db_path: Path, queries: list[list[str]], k: int = 15) -> None:
    await index.refresh()
    for query in queries:
        words = query_terms(" ".join(query))  # as a search splits its text
        tokens = [t for word_tokens in await index.tokens(words) for t in word_tokens]
        for facet, table in KEYWORD_TABLES.items():
            expected = fts5_scores(db_path, table, words)
            ranked = index.rank(facet, tokens, k, Scope())
            best = sorted(expected.values(), reverse=True)[:k]
            # the same memories as FTS5's top k (up to ties at the cut), in FTS5's order
            assert len(ranked) == len(best), (words, facet)
            got = [expected.get(seq) for seq in ranked]
            assert None not in got, (words, facet, "a memory FTS5 does not match")
            assert got == pytest.approx(best, rel=1e-9), (words, facet)


async def test_the_in_memory_keyword_index_ranks_every_query_as_fts5_does(app: App, db_path: Path) -> None:
    rng = random.Random(5)
    first, second = (
        await app.conversations.start(new_conversation("one")),
        await app.conversations.start(new_conversation("two")),
    )
    await app.memories.import_notes(notes_to_import(first.id, [sentence(rng) for _ in range(150)]))
    index = KeywordIndex(sqlite_store(app))
    queries = [rng.sample(VOCABULARY, rng.randint(1, 4)) for _ in range(40)]
    await assert_ranks_as_fts5(index, db_path, queries)  # loaded from FTS5's own postings
    for _ in range(40):  # one at a time: each tokenized by the scratch tables
        await app.memories.store(new_note(sentence(rng), second.id))
    await app.memories.import_notes(notes_to_import(second.id, [sentence(rng) for _ in range(60)]))
    await assert_ranks_as_fts5(index, db_path, queries)
    with sqlite3.connect(db_path) as conn:
        assert index.size == conn.execute("SELECT count(*) FROM memories").fetchone()[0] > 240


async def test_a_load_read_in_small_steps_ranks_as_fts5_and_leaves_the_store_free(
    app: App, db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(store_keywords, "_SNAPSHOT_TERMS", 3)  # dozens of parts, not one
    rng = random.Random(8)
    conv = await app.conversations.start(new_conversation("one"))
    await app.memories.import_notes(notes_to_import(conv.id, [sentence(rng) for _ in range(120)]))
    with sqlite3.connect(db_path) as conn:
        stored = conn.execute("SELECT count(*) FROM memories").fetchone()[0]  # (a repeated sentence is one)
    async with sqlite_store(app).keyword_snapshot() as snapshot:
        first = snapshot.memories
        assert len(first.memories) == stored > 100 and not first.postings
        # The snapshot's reads are open on connections of their own: the store still writes and reads.
        with anyio.fail_after(5):
            late = await app.memories.store(new_note("the zeppelin crane arrived late", conv.id))
            assert late.memory.id in [
                h.memory.id for h in (await app.recall.search(search_request("zeppelin late", conv.id))).hits
            ]
        facets = []
        for postings in snapshot.postings:
            parts = [part async for part in postings]
            assert len(parts) > 5 and all(not part.memories and part.state == first.state for part in parts)
            facets.append({facet for part in parts for facet in part.postings})
    assert facets == [{code} for code in KEYWORD_TABLES]  # one index each
    assert late.memory.seq not in {seq for seq, _, _ in first.memories}  # as of the snapshot's start
    index = KeywordIndex(sqlite_store(app))
    queries = [rng.sample(VOCABULARY, rng.randint(1, 4)) for _ in range(30)]
    await assert_ranks_as_fts5(index, db_path, [*queries, ["zeppelin", "late"]])  # the load, then the catch-up
    assert index.size == stored + 1


def wal_pinned(db_path: Path) -> bool:
    """Whether a read transaction left open (by any connection) on an older state keeps part of
    the WAL from being copied into the database."""
    with sqlite3.connect(db_path) as conn:
        _, frames, copied = conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
    return bool(copied < frames)


async def test_a_load_failing_midway_raises_its_error_keeps_no_reader_and_loads_next_time(
    app: App, db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(store_keywords, "_SNAPSHOT_TERMS", 3)  # dozens of parts, not one
    rng = random.Random(9)
    conv = await app.conversations.start(new_conversation("one"))
    await app.memories.import_notes(notes_to_import(conv.id, [sentence(rng) for _ in range(120)]))
    built = 0

    class Stop(Exception):
        pass

    async def give_way() -> None:  # asked before each part is built
        nonlocal built
        built += 1
        if built == 8:
            raise Stop

    index = KeywordIndex(sqlite_store(app), give_way)
    with pytest.raises(Stop):  # itself, not in an exception group
        await index.refresh()
    assert not index.loaded
    await app.memories.store(new_note("written after the failed load", conv.id))
    assert not wal_pinned(db_path)  # the load's readers closed: none holds its read transaction
    await assert_ranks_as_fts5(index, db_path, [rng.sample(VOCABULARY, 2) for _ in range(10)])
    assert built > 8 and index.loaded


async def test_a_snapshot_whose_second_reader_began_after_a_write_reads_both_as_of_the_first(
    app: App, db_path: Path
) -> None:
    conv = await app.conversations.start(new_conversation("one"))
    await app.memories.import_notes(notes_to_import(conv.id, ["the harbour crane", "a blue zeppelin over the harbour"]))
    readers = []
    try:
        for _ in KEYWORD_TABLES:
            reader = await connect_reader(db_path)
            assert reader is not None
            readers.append(reader)
            for statement in store_keywords._POSTINGS_VIEWS:
                await reader.execute(statement)
            await reader.execute("BEGIN")
        await readers[0].execute("SELECT count(*) FROM memories")  # its read transaction starts here
        late = await app.memories.store(new_note("the zeppelin came to the harbour late", conv.id))
        snapshot = await store_keywords._snapshot(readers, db_path, begin=False)
        postings: dict[Any, Any] = {}
        for parts in snapshot.postings:
            async for part in parts:
                for facet, found in part.postings.items():
                    postings.setdefault(facet, {}).update(found)
    finally:
        for reader in readers:
            await reader.close()
    assert late.memory.seq not in {seq for seq, _, _ in snapshot.memories.memories}
    assert set(postings) == set(KEYWORD_TABLES)
    for found in postings.values():  # neither index has the memory stored after the first began
        assert str(late.memory.seq) not in found["zeppelin"].split() and "late" not in found


async def test_a_load_after_the_file_moved_away_reads_the_open_file_and_creates_none(
    app: App, db_path: Path
) -> None:
    rng = random.Random(9)
    conv = await app.conversations.start(new_conversation("one"))
    await app.memories.import_notes(notes_to_import(conv.id, [sentence(rng) for _ in range(40)]))
    with sqlite3.connect(db_path) as conn:
        stored = conn.execute("SELECT count(*) FROM memories").fetchone()[0]
    db_path.rename(db_path.with_name("moved-aside.db"))  # SQLite keeps reading the open file
    index = KeywordIndex(sqlite_store(app))
    await index.refresh()
    assert index.size == stored > 30  # the memories of the file the store has open
    assert index.rank(FACET_CODES["content"], (await index.tokens(["crane"]))[0], 5, Scope())
    assert not db_path.exists()  # no new, empty database where the old one was


@asynccontextmanager
async def two_processes(settings: Settings) -> AsyncIterator[tuple[App, App]]:
    """Two servers' services on one file (each with its own connection and indexes)."""
    async with (
        open_app(settings, background=False, tuning=CONTENT_ONLY) as mine,
        open_app(settings, background=False, tuning=CONTENT_ONLY) as theirs,
    ):
        for app in (mine, theirs):
            await sqlite_ranker(app).keywords.refresh()  # as a server over a large store holds it
        yield mine, theirs


async def test_a_search_sees_what_another_process_inserted_deleted_or_rewrote_since_it_last_looked(
    settings: Settings, db_path: Path
) -> None:
    async with two_processes(settings) as (mine, theirs):
        conv = await mine.conversations.start(new_conversation("shared"))
        a = await mine.memories.store(new_note("the harbour crane is red", conv.id))
        b = await mine.memories.store(new_note("the zeppelin lands on tuesday", conv.id))
        c = await mine.memories.store(new_note("the invoice for the crane", conv.id))
        assert [h.memory.id for h in (await mine.recall.search(search_request("zeppelin", conv.id))).hits] == [
            b.memory.id
        ]
        index = KeywordIndex(sqlite_store(mine))  # another index on my connection, loaded now
        await index.refresh()
        await theirs.memories.delete(b.memory.id)  # rewrites c's context (b was in it)
        await theirs.memories.delete(c.memory.id)  # the highest seqs gone: the next store reuses one
        d = await theirs.memories.store(new_note("the budget meeting moved", conv.id))
        assert d.memory.seq <= c.memory.seq  # so "memories past the highest seq I saw" would miss it
        assert (await mine.recall.search(search_request("zeppelin", conv.id))).hits == []
        assert (await mine.recall.search(search_request("invoice", conv.id))).hits == []
        assert [h.memory.id for h in (await mine.recall.search(search_request("budget", conv.id))).hits] == [
            d.memory.id
        ]
        crane = await mine.recall.search(search_request("crane", conv.id))
        assert [h.memory.id for h in crane.hits] == [a.memory.id]
        await assert_ranks_as_fts5(index, db_path, [["crane"], ["budget", "zeppelin"], ["red", "tuesday"]])


async def test_the_contexts_another_process_changed_by_deleting_a_memory_are_matched_as_fts5_matches_them(
    settings: Settings, db_path: Path
) -> None:
    # On SQLite a context is computed (schema 19): deleting a memory changes the contexts of the
    # next two without any row of theirs being written (the triggers log them as changed). Every
    # process's in-memory keyword index must still match them as FTS5 does.
    async with two_processes(settings) as (mine, theirs):
        conv = await mine.conversations.start(new_conversation("shared"))
        texts = ["the harbour crane is red", "the zeppelin lands on tuesday", "the invoice for the crane",
                 "the budget meeting moved", "lunch with the auditors"]
        stored = [(await mine.memories.store(new_note(text, conv.id))).memory for text in texts]
        index = KeywordIndex(sqlite_store(mine))  # another index on my connection, loaded now
        await index.refresh()
        await assert_ranks_as_fts5(index, db_path, [["zeppelin"], ["harbour"]])
        await theirs.memories.delete(stored[1].id)  # the zeppelin: in the invoice's and the budget's
        with closing(sqlite3.connect(db_path)) as conn:
            (budget,) = conn.execute("SELECT context FROM memory_contexts WHERE seq = ?", (stored[3].seq,)).fetchone()
        assert budget == "the harbour crane is red\nthe invoice for the crane\nthe budget meeting moved"
        await assert_ranks_as_fts5(index, db_path, [["zeppelin"], ["harbour"], ["invoice", "budget"]])
        assert fts5_scores(db_path, "memory_contexts_fts", ["zeppelin"]) == {}
        harbour = fts5_scores(db_path, "memory_contexts_fts", ["harbour"])
        assert set(harbour) == {stored[0].seq, stored[2].seq, stored[3].seq}  # the lunch's are the invoice and budget


async def test_a_process_that_fell_behind_a_pruned_change_log_reloads_its_keyword_index(
    settings: Settings, db_path: Path
) -> None:
    async with two_processes(settings) as (mine, theirs):
        conv = await mine.conversations.start(new_conversation("shared"))
        doomed = await mine.memories.store(new_note("the secret zeppelin plan", conv.id))
        await mine.memories.store(new_note("an unrelated note", conv.id))
        assert (await mine.recall.search(search_request("zeppelin", conv.id))).hits  # loaded
        await theirs.memories.delete(doomed.memory.id)
        with sqlite3.connect(db_path) as conn:  # what the upkeep does once 10,000 changes piled up
            conn.execute("DELETE FROM memory_changes")
        await theirs.memories.store(new_note("one more note", conv.id))
        assert (await mine.recall.search(search_request("zeppelin", conv.id))).hits == []


async def test_a_query_word_fts5_splits_in_two_matches_only_where_its_parts_stand_together(
    settings: Settings,
) -> None:
    async with open_app(settings, background=False, tuning=CONTENT_ONLY) as app:
        conv = await app.conversations.start(new_conversation("config"))
        await app.memories.store(new_note("set config_value to 3 in the file", conv.id))
        await app.memories.store(new_note("the value lives in the config file", conv.id))  # apart
        found = await app.recall.search(search_request("config_value", conv.id))
        assert [h.memory.content for h in found.hits] == ["set config_value to 3 in the file"]


async def test_a_search_while_the_keyword_index_is_rebuilt_ranks_from_fts5_instead_of_waiting(
    settings: Settings,
) -> None:
    # Term counts and lengths that differ for every memory (5 and 11 are coprime): no ties in BM25.
    texts = [" ".join(["harbour"] * (1 + i % 5) + ["crane"] * (i % 11) + [f"berth{i}"]) for i in range(50)]
    queries = ["harbour", "crane", "harbour crane", "harbour berth7"]
    async with open_app(settings, background=False, tuning=KEYWORDS_ONLY) as app:
        conv = await app.conversations.start(new_conversation("busy"))
        await app.memories.import_notes(notes_to_import(conv.id, texts))
        keywords = sqlite_ranker(app).keywords
        await keywords.refresh()

        async def ranked() -> list[list[str]]:
            return [[h.memory.content for h in (await app.recall.search(search_request(q, conv.id, 10))).hits]
                    for q in queries]

        settled = await ranked()
        async with keywords._lock:  # what a load or a rebuild holds, for seconds on a large store
            with anyio.fail_after(5):
                busy = await ranked()
    assert busy == settled and all(len(hits) == 10 for hits in settled[:3]) and settled[3][0] == texts[7]


async def test_a_keyword_index_load_waits_for_a_running_search_to_finish(
    app: App, db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(store_keywords, "_SNAPSHOT_TERMS", 3)  # dozens of parts, each a chance to give way
    rng = random.Random(12)
    conv = await app.conversations.start(new_conversation("one"))
    await app.memories.import_notes(notes_to_import(conv.id, [sentence(rng) for _ in range(120)]))
    ranker = sqlite_ranker(app)
    keywords = ranker.keywords
    done: list[str] = []

    # The ranker's search itself (what the index gives way to), its query vector 0.4 s on its way
    # as Ollama's would be: Recall's reading of changed facts after the ranking is no part of it.
    async def search() -> None:
        vector = QueryVector()

        async def embedded() -> None:
            await anyio.sleep(0.4)
            vector.set(None)

        async with anyio.create_task_group() as embedding:
            embedding.start_soon(embedded)
            await ranker.search("harbour crane", vector, SearchFilters(conversation_id=conv.id), conv.key, 5, None)
        done.append("search")

    async def load() -> None:
        await keywords.refresh()  # on its own a few milliseconds here
        done.append("load")

    with anyio.fail_after(10):
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(search)
            await anyio.sleep(0.1)  # the search waits for its query's vector
            tasks.start_soon(load)
    with sqlite3.connect(db_path) as conn:
        stored = conn.execute("SELECT count(*) FROM memories").fetchone()[0]
    assert done == ["search", "load"] and keywords.size == stored


async def test_a_keyword_index_load_finishes_while_searches_overlap_without_a_pause(
    app: App, fake_ollama: FakeOllama, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(store_keywords, "_SNAPSHOT_TERMS", 20)
    rng = random.Random(13)
    conv = await app.conversations.start(new_conversation("one"))
    await app.memories.import_notes(notes_to_import(conv.id, [sentence(rng) for _ in range(120)]))
    keywords = sqlite_ranker(app).keywords
    fake_ollama.delay = 0.2
    loaded = anyio.Event()
    searches = 0

    async def keep_searching() -> None:
        nonlocal searches
        while not loaded.is_set():  # a new query each time: a repeated one's vector is not asked for again
            await app.recall.search(search_request(f"harbour crane {searches}", conv.id))
            searches += 1

    with anyio.fail_after(10):
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(keep_searching)
            await anyio.sleep(0.1)
            tasks.start_soon(keep_searching)  # from here on one search or the other always runs
            await anyio.sleep(0.1)
            await keywords.refresh()
            loaded.set()
    assert keywords.loaded and keywords.size > 100 and searches >= 2


async def test_keyword_filters_hold_in_the_in_memory_index(settings: Settings) -> None:
    async with open_app(settings, background=False, tuning=KEYWORDS_ONLY) as app:
        await sqlite_ranker(app).keywords.refresh()
        one, two = (
            await app.conversations.start(new_conversation("one")),
            await app.conversations.start(new_conversation("two")),
        )
        note = await app.memories.store(new_note("the zeppelin budget", one.id, ["plans"]))
        await app.memories.store(new_note("the zeppelin budget, again", two.id))
        await app.transcript.add_message(one.id, "user", "a zeppelin message")
        old, newer = await app.memories.update(note_change(note.memory.id, content="the zeppelin budget doubled"))

        async def found(**filters: object) -> set[str]:
            outcome = await app.recall.search(search_request("zeppelin", **filters))  # type: ignore[arg-type]
            return {h.memory.content for h in outcome.hits}

        assert await found(conversation_id=one.id, kinds="note") == {"the zeppelin budget doubled"}
        assert await found(conversation_id=one.id) == {
            "the zeppelin budget doubled", "a zeppelin message",
        }
        assert await found(conversation_id=one.id, include_superseded=True, kinds="note") == {
            "the zeppelin budget", "the zeppelin budget doubled",
        }
        assert await found(conversation_id=two.id) == {"the zeppelin budget, again"}
        assert await found(conversation_id=one.id, tags=["plans"]) == {"the zeppelin budget doubled"}
        assert await found(conversation_id=two.id, tags=["plans"]) == set()


def test_the_scratch_tokenizer_is_the_keyword_indexes_own() -> None:
    """New memories and query words are tokenized by scratch tables: they must use the schema's
    tokenizer, or the in-memory index would match other words than FTS5."""
    schema = "".join(migration.sql for migration in migrations())
    for table in KEYWORD_TABLES.values():
        definition = schema[schema.index(f"CREATE VIRTUAL TABLE {table}"):]
        assert f"tokenize = '{TOKENIZER}'" in definition[: definition.index(");")]
    assert set(KEYWORD_TABLES) == set(FACET_CODES.values())


async def test_the_keyword_index_survives_more_deletes_than_it_keeps_masked(
    settings: Settings, db_path: Path
) -> None:
    async with open_app(settings, background=False, tuning=KEYWORDS_ONLY) as app:
        conv = await app.conversations.start(new_conversation("churn"))
        stored = [await app.memories.store(new_note(f"harbour crane number {i}", conv.id)) for i in range(80)]
        index = KeywordIndex(sqlite_store(app))
        await index.refresh()
        for memory in stored[:60]:  # three quarters deleted: the index rebuilds on the way
            await app.memories.delete(memory.memory.id)
            await index.refresh()
        await assert_ranks_as_fts5(index, db_path, [["crane"], ["number", "79"], ["harbour", "5"]])
        assert index.size == 20


async def test_after_another_process_wrote_many_memories_search_ranks_from_fts5_until_upkeep_catches_up(
    settings: Settings, db_path: Path
) -> None:
    rng = random.Random(9)
    async with two_processes(settings) as (mine, theirs):
        conv = await mine.conversations.start(new_conversation("bulk"))
        await mine.memories.store(new_note("the harbour crane", conv.id))
        assert (await mine.recall.search(search_request("crane", conv.id))).hits  # caught up with its own store
        keywords = sqlite_ranker(mine).keywords
        assert keywords.size == 1
        texts = {sentence(rng) for _ in range(100)} | {"the lighthouse crane"}
        await theirs.memories.import_notes(notes_to_import(conv.id, sorted(texts)))
        found = await mine.recall.search(search_request("lighthouse", conv.id))
        assert [h.memory.content for h in found.hits] == ["the lighthouse crane"]  # from FTS5, at once
        assert keywords.size == 1  # the search did not stop to take in a hundred memories
        await mine.ranker.upkeep()
        assert keywords.size == 1 + len(texts)
        await assert_ranks_as_fts5(keywords, db_path, [["crane"], ["lighthouse", "budget"]])

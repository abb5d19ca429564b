"""Ranking behaviour that must not regress: fusion, filters, meaning without shared words,
keyword matches for memories still waiting for their vectors."""

from __future__ import annotations

import sqlite3
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import anyio
import numpy as np
import pytest

from ollama_mcp.app import App, open_app
from ollama_mcp.config import Settings
from ollama_mcp.domain import Scope, SearchFilters
from ollama_mcp.errors import EmbeddingMismatchError, StorageError
from ollama_mcp.inputs.conversations import new_conversation
from ollama_mcp.inputs.memories import note as new_note
from ollama_mcp.inputs.memories import note_change, notes_to_import
from ollama_mcp.inputs.search import search_request
from ollama_mcp.inputs.turns import parse_turns
from ollama_mcp.storage.postgres.search import _ReadOnce, ef_search
from ollama_mcp.storage.ranking import SearchTuning, fuse, query_names_actor, query_terms, stand_in
from ollama_mcp.storage.sqlite.search import fts_any, fts_phrase
from tests.conftest import Database, eventually
from tests.support.fake_ollama import FakeModel, FakeOllama
from tests.support.sqlite_parts import sqlite_ranker, sqlite_store

pytestmark = pytest.mark.anyio


def fts_query(text: str) -> str | None:
    return fts_any(query_terms(text))


def test_fts_query_quotes_every_word_so_user_syntax_is_inert() -> None:
    assert fts_query('say "hi" NEAR(a b) OR x*') == '"say" OR "hi" OR "near" OR "b" OR "x"'
    assert fts_query('quote"inside') == '"quote" OR "inside"'
    assert fts_query("Ünïcode café") == '"ünïcode" OR "café"'
    assert fts_query("?!* ()") is None
    assert fts_query("dup dup DUP") == '"dup"'


def test_english_stop_words_are_left_out_of_keyword_queries_unless_nothing_else_is_left() -> None:
    assert fts_query("What did we decide about the queue?") == '"decide" OR "queue"'
    assert fts_query("who was it") == '"who" OR "was" OR "it"'
    assert fts_query("Wer hat die Datenbank gewählt") == '"wer" OR "hat" OR "die" OR "datenbank" OR "gewählt"'


def test_an_exact_phrase_query_also_names_its_rare_words_and_never_words_outside_the_phrase() -> None:
    # ANDing words the phrase holds anyway matches the same memories, only faster
    assert fts_phrase("The red house", ["red", "house"]) == '"the red house" AND "red" AND "house"'
    assert fts_phrase("the red house", ["elsewhere"]) == '"the red house"'
    assert fts_phrase("single", ["single"]) is None


def test_fusion_ranks_items_found_by_several_lists_first() -> None:
    fused = [item for item, _ in fuse([(1.0, [1, 2, 3]), (1.0, [3, 4, 1])], k=10)]
    assert fused[:2] == [1, 3]  # in both lists
    assert set(fused) == {1, 2, 3, 4}
    assert [i for i, _ in fuse([(1.0, [5, 6]), (1.0, [])], k=10)] == [5, 6]
    assert [i for i, _ in fuse([(0.0, [9]), (1.0, [7, 8])], k=10)] == [7, 8]  # weight 0 leaves a list out
    assert [i for i, _ in fuse([(1.0, [1, 2]), (3.0, [2, 1])], k=10)] == [2, 1]


async def test_a_memory_is_found_by_meaning_without_sharing_a_word(app: App, fake_ollama: FakeOllama) -> None:
    fake_ollama.concepts.update({"car": "vehicle", "automobile": "vehicle", "sedan": "vehicle"})
    await app.memories.store(new_note("I drive an automobile to work"))
    await app.memories.store(new_note("The cat sleeps on the sofa"))
    outcome = await app.recall.search(search_request("car"))
    assert outcome.mode == "hybrid"
    assert outcome.hits[0].memory.content == "I drive an automobile to work"
    assert outcome.hits[0].similarity and outcome.hits[0].similarity > 0.3


async def test_a_turn_waiting_for_its_context_vector_ranks_by_its_neighbours_meaning_too(
    settings: Settings,
) -> None:
    # Only the list of meaning in context counts here (keywords, own-vector re-ranking, sessions
    # and exchanges off). The two "Noted" turns wait for their context vectors (no background);
    # by their own vectors alone the second would come first (it also says "deploy": 0.67 against
    # 0.41), but the first follows a turn about the deploy credentials, which its stand-in mixes
    # in (0.51 against 0.47: ranking.stand_in, weighted by characters).
    tuning = SearchTuning(keyword_weight=0, keyword_context_weight=0, vector_weight=0, session_weight=0,
                          exchange_weight=0)
    async with open_app(settings, background=False, tuning=tuning) as app:
        first, second = (
            (await app.conversations.start(new_conversation("a"))).id,
            (await app.conversations.start(new_conversation("b"))).id,
        )
        lunch, _ = await app.transcript.add_messages(first, parse_turns("messages", [
            {"role": "user", "content": "Lunch is at noon today."},
            {"role": "assistant", "content": "Noted, tomorrow deploy."},
        ]))
        deploy, _ = await app.transcript.add_messages(second, parse_turns("messages", [
            {"role": "user", "content": "The deploy credentials live in the vault."},
            {"role": "assistant", "content": "Noted, tomorrow."},
        ]))
        assert await app.indexer.pending_count() == 2  # the two "Noted" turns' context vectors
        outcome = await app.recall.search(search_request("deploy credentials tomorrow", everywhere=True))
        ranked = [hit.memory.id for hit in outcome.hits]
        assert ranked.index(deploy[1].id) < ranked.index(lunch[1].id)


async def test_a_query_vector_of_another_dimension_is_refused_by_the_ranker_as_one_clear_error(app: App) -> None:
    await app.memories.store(new_note("stored at the first dimension"))
    with pytest.raises(EmbeddingMismatchError, match="now returns 32-dimensional vectors"):
        await app.ranker.search("first dimension", np.ones(32, dtype=np.float32), SearchFilters(), None, 5, None)


def test_a_larger_postgres_store_never_scans_narrower_nor_narrower_than_the_rows_it_yields() -> None:
    sizes = [0, 1_000, 10_000, 20_000, 20_001, 40_000, 40_001, 100_000, 1_000_000]
    widths = [ef_search(size, 100) for size in sizes]
    assert widths == sorted(widths)
    assert widths[0] == 100 and widths[-1] == 250  # 250: what keeps recall@10 at 0.96 at 1M memories
    assert ef_search(1_000, 400) == 400 and ef_search(1_000_000, 400) == 400  # a deep search gets every neighbour


async def test_postgres_keyword_lists_share_one_read_of_the_query_words_and_its_failure() -> None:
    reads: list[object] = []

    async def read(conn: object) -> list[str]:
        reads.append(conn)
        await anyio.sleep(0.01)
        if conn == "broken":
            raise StorageError("the connection broke")
        return ["lexem"]

    shared, got = _ReadOnce(read), []

    async def ask(conn: str) -> None:
        got.append(await shared.read(conn))  # type: ignore[arg-type]

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(ask, "first")
        tasks.start_soon(ask, "second")
    assert reads == ["first"] and got == [["lexem"], ["lexem"]]

    failing, failures = _ReadOnce(read), []

    async def ask_failing(conn: str) -> None:
        try:
            await failing.read(conn)  # type: ignore[arg-type]
        except StorageError as exc:
            failures.append(str(exc))

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(ask_failing, "broken")
        tasks.start_soon(ask_failing, "second")
    assert failures == ["the connection broke", "the connection broke"]  # the waiter never reads [] as a result


async def test_a_store_with_no_vector_of_the_model_is_searched_by_keywords_alone(
    app: App, fake_ollama: FakeOllama
) -> None:
    fake_ollama.stop()  # stored without vectors: Ollama is down
    await app.memories.store(new_note("the lighthouse keeper paints the stairs"))
    fake_ollama.start()
    hits = await app.ranker.search("lighthouse", np.ones(64, dtype=np.float32), SearchFilters(), None, 5, None)
    assert [hit.memory.content for hit in hits] == ["the lighthouse keeper paints the stairs"]


async def test_an_exact_keyword_match_ranks_first(app: App) -> None:
    for text in ("notes about lunch", "the invoice number is INV-7781", "general thoughts about numbers"):
        await app.memories.store(new_note(text))
    outcome = await app.recall.search(search_request("INV-7781"))
    assert outcome.hits[0].memory.content == "the invoice number is INV-7781"


async def test_a_query_that_shares_one_word_besides_stop_words_is_not_an_exact_phrase_match(app: App) -> None:
    await app.memories.store(new_note("Sam went hiking in the hills"))
    loose = await app.ranker.search("what did Sam do", None, SearchFilters(), None, 5, None)
    assert [hit.memory.content for hit in loose] == ["Sam went hiking in the hills"]
    assert loose[0].score != float("inf")
    exact = await app.ranker.search("Sam went hiking", None, SearchFilters(), None, 5, None)
    assert exact[0].score == float("inf")


async def test_keywords_alone_rank_rare_words_above_common_and_short_memories_above_long(
    app: App,
) -> None:
    for i in range(8):
        await app.memories.store(new_note(f"alpha reading number {i} from the garden station"))
    long = "a zebra came down to the river bank with the herd and drank"
    await app.memories.store(new_note(long))
    await app.memories.store(new_note("a zebra grazing"))
    hits = await app.ranker.search("alpha zebra", None, SearchFilters(), None, 10, None)
    assert [hit.memory.content for hit in hits[:2]] == ["a zebra grazing", long]


async def test_tag_filter_requires_every_given_tag(app: App) -> None:
    await app.memories.store(new_note("red apple", tags=["fruit", "red"]))
    await app.memories.store(new_note("green apple", tags=["fruit"]))
    await app.memories.store(new_note("red car", tags=["red"]))
    both = await app.recall.search(search_request("apple", tags=["fruit", "red"], top_k=10))
    assert [h.memory.content for h in both.hits] == ["red apple"]
    fruit = await app.recall.search(search_request("apple", tags=["fruit"], top_k=10))
    assert {h.memory.content for h in fruit.hits} == {"red apple", "green apple"}


async def test_time_filters_hold_for_both_keyword_and_vector_candidates(app: App) -> None:
    await app.memories.store(new_note("an early memory about tea"))
    middle = datetime.now(UTC) + timedelta(microseconds=1)
    await app.memories.store(new_note("a later memory about tea"))
    later = await app.recall.search(search_request("tea", since=middle.isoformat(), top_k=10))
    assert [h.memory.content for h in later.hits] == ["a later memory about tea"]
    earlier = await app.recall.search(search_request("tea", until=middle.isoformat(), top_k=10))
    assert [h.memory.content for h in earlier.hits] == ["an early memory about tea"]
    assert (await app.recall.search(search_request("tea", since="2999-01-01"))).hits == []


async def test_threshold_drops_weak_semantic_matches(app: App) -> None:
    await app.memories.store(new_note("blue whale facts"))
    await app.memories.store(new_note("completely unrelated text"))
    strict = await app.recall.search(search_request("blue whale facts", threshold=0.9, top_k=10))
    assert [h.memory.content for h in strict.hits] == ["blue whale facts"]


async def test_a_memory_still_waiting_for_its_vector_is_found_by_keywords(
    settings: Settings, fake_ollama: FakeOllama
) -> None:
    async with open_app(settings, background=False) as app:
        await app.memories.store(new_note("the wifi password is on the fridge"))
    # A new model: every old memory is pending for it until the backfill runs (it does not here).
    fake_ollama.models["all-minilm"] = FakeModel(dim=32, family="bert")
    async with open_app(replace(settings, embed_model="all-minilm"), background=False) as app:
        await app.memories.store(new_note("a fresh memory about bread"))
        outcome = await app.recall.search(search_request("wifi password", everywhere=True))
        assert outcome.mode == "hybrid"
        assert outcome.hits[0].memory.content == "the wifi password is on the fridge"
        assert outcome.hits[0].similarity is None


async def test_a_memory_containing_the_query_word_for_word_ranks_first(app: App) -> None:
    await app.memories.store(new_note("the house was red and the car was blue"))
    await app.memories.store(new_note("we painted the blue car near the red house"))
    await app.memories.store(new_note("a house painted red beside a blue car"))
    for query, expected in (("red house", "we painted the blue car near the red house"),
                            ("the car was blue", "the house was red and the car was blue")):
        outcome = await app.recall.search(search_request(query, top_k=3))
        assert outcome.hits[0].memory.content == expected, query
    # an exact phrase is kept even below a similarity threshold it would not pass on meaning
    strict = await app.recall.search(search_request("red house", threshold=0.99, top_k=3))
    assert [h.memory.content for h in strict.hits][:1] == ["we painted the blue car near the red house"]


async def test_a_word_in_most_memories_is_left_out_of_a_query_with_rarer_words(
    settings: Settings, fake_ollama: FakeOllama
) -> None:
    tuning = SearchTuning(common_min_docs=5, vector_weight=0, vector_context_weight=0)  # keywords only
    async with open_app(settings, background=False, tuning=tuning) as app:
        conv = await app.conversations.start(new_conversation("c"))
        await app.memories.import_notes(
            notes_to_import(conv.id, [f"status report number {i} for the project" for i in range(30)])
        )
        await app.memories.import_notes(notes_to_import(conv.id, ["the zeppelin arrives tuesday"]))
        outcome = await app.recall.search(search_request("project zeppelin", conv.id, top_k=3))
        # the common word no longer makes every memory a candidate to score
        assert [h.memory.content for h in outcome.hits] == ["the zeppelin arrives tuesday"]
        only_common = await app.recall.search(search_request("project report", conv.id, top_k=3))
        assert only_common.hits and "project" in only_common.hits[0].memory.content  # nothing rarer: kept


def _segments(db: Database, table: str) -> int:
    """How many segments an FTS5 index is split into (each has rows in its %_idx table)."""
    with sqlite3.connect(db.url) as conn:
        return conn.execute(f"SELECT count(DISTINCT segid) FROM {table}_idx").fetchone()[0]


@pytest.mark.sqlite_only
async def test_merging_the_keyword_index_leaves_one_segment_and_every_memory_findable(app: App, db: Database) -> None:
    for i in range(12):  # one write transaction each, as a chat stores them
        await app.memories.store(new_note(f"note {i} about the harbour crane number {i * 7}"))
    assert _segments(db, "memories_fts") > 1 and _segments(db, "memory_contexts_fts") > 1
    assert not await app.ranker.upkeep(min_new=64)  # only 12 new: not yet
    assert _segments(db, "memories_fts") > 1
    assert await app.ranker.upkeep()
    assert _segments(db, "memories_fts") == 1 and _segments(db, "memory_contexts_fts") == 1
    assert not await app.ranker.upkeep()  # nothing new since
    with sqlite3.connect(db.url) as conn:
        for table in ("memories_fts", "memory_contexts_fts"):
            conn.execute(f"INSERT INTO {table} ({table}) VALUES ('integrity-check')")  # raises if corrupt
    for i in (0, 5, 11):
        outcome = await app.recall.search(search_request(f"crane number {i * 7}"))
        assert outcome.hits[0].memory.content == f"note {i} about the harbour crane number {i * 7}"


@pytest.mark.sqlite_only
async def test_the_server_merges_the_keyword_index_in_the_background_once_enough_memories_arrived(
    settings: Settings, db: Database
) -> None:
    async with open_app(replace(settings, upkeep_interval=0.05, upkeep_min_new=6), background=True) as app:
        for i in range(5):
            await app.memories.store(new_note(f"first batch {i}"))
        await anyio.sleep(0.3)
        assert _segments(db, "memories_fts") > 1  # 5 new: below the bar
        await app.memories.store(new_note("the sixth"))

        async def merged() -> bool:
            return _segments(db, "memories_fts") == 1

        await eventually(merged)


@pytest.mark.sqlite_only  # (PostgreSQL mixes the stand-ins in its own query)
async def test_a_burst_of_waiting_turns_gets_stand_ins_mixed_as_ranking_stand_in_mixes(
    settings: Settings, fake_ollama: FakeOllama
) -> None:
    # Built for every waiting memory at once (one matrix operation): each must be what
    # ranking.stand_in makes of its own vector and its context's, weighted by characters.
    words = ["deploy", "vault", "lunch", "harbour", "crane", "tomato", "ferret", "rain", "sofa", "train"]
    async with open_app(settings, background=False) as app:
        said = []
        for chat in range(3):
            conversation = await app.conversations.start(new_conversation(f"chat {chat}"))
            turns, _ = await app.transcript.add_messages(conversation.id, parse_turns("messages", [
                {"role": ("user", "assistant")[i % 2],
                 "content": " ".join(words[(i * 3 + chat) % 10:][:1 + i % 4] * (1 + i))}
                for i in range(12)
            ]))
            said.extend(turns)
        assert await app.indexer.pending_count() == 33  # every turn but each chat's first waits for its context
        parts = await sqlite_store(app).context_parts([m.seq for m in said])
        own = {m.seq: np.asarray(fake_ollama.vector("nomic-embed-text", m.content), dtype=np.float32) for m in said}
        query = np.asarray(fake_ollama.vector("nomic-embed-text", "deploy vault crane ferret"), dtype=np.float32)
        expected = {
            m.seq: float(stand_in(own[m.seq], parts[m.seq][-1][1], [(own[p], c) for p, c in parts[m.seq][:-1]]) @ query)
            for m in said if len(parts.get(m.seq, [])) > 1
        }
        assert len(expected) == 33
        await sqlite_ranker(app).vectors.refresh()
        ranking = await sqlite_ranker(app).vectors.rank(query, len(said), Scope())
    scores = dict(ranking.ranked)
    off = {seq: (scores[seq], v) for seq, v in expected.items() if abs(scores[seq] - v) > 2e-3}  # (float16 rows)
    assert off == {}
    assert len({round(v, 2) for v in expected.values()}) > 10  # the mixes differ: a wrong one would show


@pytest.mark.sqlite_only  # (PostgreSQL mixes the stand-ins in its own query)
async def test_a_search_leaves_extra_stand_ins_to_the_background_and_ranks_by_own_vectors_meanwhile(
    settings: Settings, fake_ollama: FakeOllama, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ollama_mcp.storage.sqlite import vector_index  # noqa: PLC0415

    monkeypatch.setattr(vector_index, "STAND_INS_AT_ONCE", 10)
    async with open_app(settings, background=False) as app:
        conversation = await app.conversations.start(new_conversation("chat"))
        said, _ = await app.transcript.add_messages(conversation.id, parse_turns("messages", [
            {"role": "user", "content": f"turn {i} about the harbour crane and the {i % 3} ferries"} for i in range(30)
        ]))
        waiting = said[1:]  # the first is its own context
        own = {m.seq: np.asarray(fake_ollama.vector("nomic-embed-text", m.content), dtype=np.float32) for m in said}
        query = np.asarray(fake_ollama.vector("nomic-embed-text", "harbour ferries"), dtype=np.float32)
        await sqlite_ranker(app).vectors.refresh()
        before = dict((await sqlite_ranker(app).vectors.rank(query, len(said), Scope())).ranked)
        assert all(abs(before[m.seq] - float(own[m.seq] @ query)) < 2e-3 for m in waiting)  # 29 > 10: own vectors
        await sqlite_ranker(app).vectors.prepare_stand_ins()  # as the warm-up and the catch-up do
        after = dict((await sqlite_ranker(app).vectors.rank(query, len(said), Scope())).ranked)
        parts = await sqlite_store(app).context_parts([m.seq for m in waiting])
    mixed = {
        m.seq: float(stand_in(own[m.seq], parts[m.seq][-1][1], [(own[p], c) for p, c in parts[m.seq][:-1]]) @ query)
        for m in waiting
    }
    assert all(abs(after[seq] - v) < 2e-3 for seq, v in mixed.items())
    assert sum(abs(after[seq] - before[seq]) > 1e-2 for seq in mixed) > 10  # the stand-ins did change the ranking


@pytest.mark.sqlite_only  # (PostgreSQL holds no copy of the vectors in the process)
async def test_a_stored_memorys_vectors_enter_the_index_at_once_not_at_the_next_search(
    settings: Settings,
) -> None:
    async with open_app(settings, background=True) as app:
        await app.recall.search(search_request("anything"))  # the index is loaded
        before = sqlite_ranker(app).vectors.size
        stored = await app.memories.store(new_note("the harbour crane is yellow"))
        assert stored.embedding_status == "embedded"

        async def taken_in() -> bool:
            return sqlite_ranker(app).vectors.size > before

        await eventually(taken_in)  # no search ran since the store


async def test_a_memory_another_process_stored_is_found_by_meaning_at_once(
    settings: Settings, fake_ollama: FakeOllama
) -> None:
    fake_ollama.concepts.update({"car": "vehicle", "automobile": "vehicle"})
    async with open_app(settings, background=False) as mine, open_app(settings, background=False) as theirs:
        await mine.memories.store(new_note("The cat sleeps on the sofa"))
        assert [h.memory.content for h in (await mine.recall.search(search_request("car", everywhere=True))).hits] != [
            "I drive an automobile to work"
        ]  # the index is loaded now, before the other process writes
        await theirs.memories.store(new_note("I drive an automobile to work"))
        outcome = await mine.recall.search(search_request("car", everywhere=True))
        # no shared word: only a refreshed vector index can find it
        assert outcome.hits[0].memory.content == "I drive an automobile to work"
        assert outcome.hits[0].similarity and outcome.hits[0].similarity > 0.3


@pytest.mark.postgres_only  # SQLite holds its vectors in memory and knows which lack a context vector
@pytest.mark.parametrize("exactly", [1_000, 0], ids=["gaps-one-by-one", "gaps-by-index"])
async def test_memories_waiting_for_a_context_vector_rank_by_their_own_until_the_backfill_catches_up(
    app: App, db: Database, fake_ollama: FakeOllama, monkeypatch: pytest.MonkeyPatch, exactly: int
) -> None:
    from ollama_mcp.storage.postgres import search as pg_search  # noqa: PLC0415

    monkeypatch.setattr(pg_search, "GAPS_RANKED_EXACTLY", exactly)  # 0: as a large import's would be
    fake_ollama.concepts.update({"car": "vehicle", "automobile": "vehicle"})
    def gaps() -> list[str]:
        return [row[0] for row in db.rows(
            "SELECT m.content FROM context_gaps g JOIN memories m ON m.seq = g.memory_seq ORDER BY m.seq")]

    # Enough memories with both vectors that the nearest context vectors fill a search's depth (with
    # fewer, the ranker scans the filtered memories exactly and finds every memory anyway).
    filler = (await app.conversations.start(new_conversation("filler"))).id
    await app.memories.import_notes(notes_to_import(filler, [f"note {i} about the weather" for i in range(60)]))
    while await app.indexer.backfill_once():
        pass
    conv = (await app.conversations.start(new_conversation("cars"))).id
    first = (
        await app.memories.store(new_note("The cat sleeps on the sofa", conv))
    ).memory  # its own context: both vectors
    car = (await app.memories.store(new_note("I drive an automobile to work", conv))).memory  # its own vector only
    assert gaps() == ["I drive an automobile to work"]

    async def top() -> str:
        # everywhere: no filter that would make the ranker scan a conversation's vectors exactly
        hits = (await app.recall.search(search_request("car", everywhere=True))).hits
        return hits[0].memory.content if hits else "nothing found"

    assert await top() == "I drive an automobile to work"  # by its own vector
    while await app.indexer.backfill_once():
        pass
    assert gaps() == []
    assert await top() == "I drive an automobile to work"  # by its context vector
    await app.memories.delete(first.id)  # the follower's context is rewritten
    assert gaps() == ["I drive an automobile to work"]
    assert await top() == "I drive an automobile to work"
    await app.memories.forget_vectors()  # reembed --force: no vector left to rank by
    assert gaps() == []
    await app.indexer.backfill_once()
    assert gaps() == []
    await app.memories.delete(car.id)
    assert gaps() == [] and db.count("SELECT count(*) FROM memory_embeddings e JOIN memories m ON m.seq = e.memory_seq"
                                     " WHERE m.conversation_id = ?", conv) == 0


@pytest.mark.postgres_only
async def test_an_upgrade_lists_the_memories_without_a_context_vector_in_the_new_gaps_table(
    app: App, db: Database, settings: Settings
) -> None:
    conv = (await app.conversations.start(new_conversation("old"))).id
    for text in ("first turn", "second turn", "third turn"):
        await app.memories.store(new_note(text, conv))
    await app.indexer.backfill_once()  # every memory has both vectors
    await app.memories.store(new_note("fourth turn", conv))  # its own vector only
    db.rows("DROP TRIGGER context_gaps_follow ON memory_embeddings")  # as version 12 left it
    db.rows("DROP FUNCTION context_gaps_follow()")
    db.rows("DROP TABLE context_gaps")
    db.rows("DELETE FROM schema_migrations WHERE version = 13")
    async with open_app(settings, background=False):
        pass
    assert db.rows("SELECT m.content FROM context_gaps g JOIN memories m ON m.seq = g.memory_seq") == [("fourth turn",)]


@pytest.mark.sqlite_only  # PostgreSQL ranks in the database: nothing to load
async def test_the_server_loads_vectors_before_the_first_search_and_keywords_only_in_large_stores(
    settings: Settings,
) -> None:
    async with open_app(settings, background=False) as app:
        conv = await app.conversations.start(new_conversation("c"))
        await app.memories.import_notes(notes_to_import(conv.id, ["the harbour crane", "the zeppelin"]))
        await app.indexer.backfill_once()
    async with open_app(settings, background=True) as app:

        async def vectors_loaded() -> bool:
            return sqlite_ranker(app).vectors.size == 4  # own + context vectors

        await eventually(vectors_loaded)  # without any search
        await app.ranker.upkeep()
        assert not sqlite_ranker(app).keywords.loaded  # a small store: FTS5 ranks as fast
        found = await app.recall.search(search_request("harbour crane", conv.id))
        assert found.hits[0].memory.content == "the harbour crane"
    async with open_app(settings, background=True, tuning=SearchTuning(keyword_index_min_memories=2)) as app:

        async def both_loaded() -> bool:
            return sqlite_ranker(app).keywords.size == 2 and sqlite_ranker(app).vectors.size == 4

        await eventually(both_loaded)
        found = await app.recall.search(search_request("harbour crane", conv.id))
        assert found.hits[0].memory.content == "the harbour crane"


# -- sessions: memories of one day of one conversation ---------------------------------------------

_GARDEN = [
    ("lone", "tomato plants in the garden, watered daily", "2023-05-08T10:00:00Z"),
    ("first", "tomato seedlings for the garden bed", "2023-05-01T10:00:00Z"),
    ("second", "the plants of the garden need more sun", "2023-05-01T18:30:00Z"),
    ("other", "we painted the fence blue", "2023-05-03T10:00:00Z"),
]


async def _garden(app: App, apart: bool = False) -> dict[str, str]:
    """The memories of ``_GARDEN``, in one conversation (or, ``apart``, each in its own)."""
    ids, shared = {}, (await app.conversations.start(new_conversation("garden"))).id
    for key, text, when in _GARDEN:
        conversation = (await app.conversations.start(new_conversation(key))).id if apart else shared
        ids[key] = (await app.memories.store(new_note(text, conversation, occurred_at=when))).memory.id
    while await app.indexer.backfill_once():
        pass
    return ids


async def test_a_session_several_of_the_best_memories_share_rises_above_a_better_lone_memory(app: App) -> None:
    ids = await _garden(app)
    found = await app.recall.search(search_request("garden tomato plants", top_k=3))
    assert {h.memory.id for h in found.hits[:2]} == {ids["first"], ids["second"]}
    assert found.hits[2].memory.id == ids["lone"]
    app.ranker.tuning = replace(SearchTuning(), session_weight=0)
    alone = await app.recall.search(search_request("garden tomato plants", top_k=3))
    assert alone.hits[0].memory.id == ids["lone"]  # the best worded, without sessions


async def test_memories_of_one_day_in_different_conversations_are_not_one_session(app: App) -> None:
    ids = await _garden(app, apart=True)
    found = await app.recall.search(search_request("garden tomato plants", top_k=3, everywhere=True))
    assert found.hits[0].memory.id == ids["lone"]


async def test_a_memory_holding_the_query_word_for_word_stays_first_whatever_the_sessions(app: App) -> None:
    ids = await _garden(app)
    found = await app.recall.search(search_request("tomato plants", top_k=3))  # lone's words, in order
    assert [h.memory.id for h in found.hits] == [ids["lone"], ids["first"], ids["second"]]


# -- participants a query names ---------------------------------------------------------------------

_TALK = [
    ("Alex", "I put blue paint on the garden fence, bright blue"),
    ("Sam Rivera", "the fence got a coat of colour from me, a sort of blue"),
    ("Alex", "we should water the tomatoes tomorrow"),
]


async def _talk(app: App) -> dict[str, str]:
    """``_TALK`` as one conversation's turns, by id of each speaker's first line about the fence."""
    conversation = (await app.conversations.start(new_conversation("chat"))).id
    turns = [{"role": "user", "actor": who, "content": text} for who, text in _TALK]
    added, _ = await app.transcript.add_messages(conversation, parse_turns("messages", turns))
    while await app.indexer.backfill_once():
        pass
    return {"alex": added[0].id, "sam": added[1].id}


async def test_a_query_naming_a_participant_ranks_their_turn_above_the_same_words_from_another(app: App) -> None:
    ids = await _talk(app)
    request = search_request("what blue paint did Sam put on the fence", top_k=2)
    found = await app.recall.search(request)
    assert [h.memory.id for h in found.hits] == [ids["sam"], ids["alex"]]
    app.ranker.tuning = replace(SearchTuning(), actor_weight=0, exchange_weight=0)
    unnamed = await app.recall.search(request)
    assert [h.memory.id for h in unnamed.hits] == [ids["alex"], ids["sam"]]  # the better worded, by default


async def test_a_query_naming_nobody_who_spoke_ranks_as_if_no_participant_were_known(app: App) -> None:
    ids = await _talk(app)
    found = await app.recall.search(search_request("what blue paint did Rivers put on the fence"))
    assert [h.memory.id for h in found.hits[:2]] == [ids["alex"], ids["sam"]]


def test_a_participant_is_named_by_their_first_word_or_by_all_their_words() -> None:
    assert query_names_actor("Sam Rivera", frozenset({"sam", "paint"}))
    assert query_names_actor("Sam Rivera", frozenset({"rivera", "sam"}))
    assert query_names_actor("claude-code", frozenset({"claude"}))
    assert not query_names_actor("Sam Rivera", frozenset({"rivera"}))  # a surname alone names too many people
    assert not query_names_actor("The Reviewer", frozenset({"the"}))  # a function word first names nobody
    assert not query_names_actor("Sam", frozenset({"samuel"}))


async def test_a_memorys_neighbours_are_the_current_turns_of_its_own_conversation_either_side(app: App) -> None:
    chat = (await app.conversations.start(new_conversation("chat"))).id
    other = (await app.conversations.start(new_conversation("other"))).id
    first = (await app.memories.store(new_note("first", chat))).memory
    await app.memories.store(new_note("elsewhere", other))
    middle = (await app.memories.store(new_note("middle", chat))).memory
    revised = (await app.memories.update(note_change(middle.id, "middle, revised", None, None)))[1].memory
    last = (await app.memories.store(new_note("last", chat))).memory
    around = await app.store.adjacent_seqs([first.seq, revised.seq, last.seq, 10_000])
    # the revised version took a new seq; the old one, superseded, is no one's neighbour
    assert around == {first.seq: (None, revised.seq), revised.seq: (first.seq, last.seq), last.seq: (revised.seq, None)}


_EXCHANGE = [  # an afternoon's exchange, then notes of other days that match the question's words
    ("Alex", "which colour did you paint the garden fence in the end?", "2023-05-01T15:04:00Z"),
    ("Sam Rivera", "green, a deep forest one", "2023-05-01T15:05:00Z"),
    ("Sam Rivera", "the garden fence at the park is nice", "2023-05-09T09:00:00Z"),
    ("Alex", "the paint on the garden fence is peeling", "2023-05-10T09:00:00Z"),
    ("Alex", "garden fence paint is on sale, which colour though", "2023-05-11T09:00:00Z"),
]


async def test_the_reply_of_a_named_participant_rises_with_the_question_another_asked(app: App) -> None:
    conversation = (await app.conversations.start(new_conversation("chat"))).id
    added, _ = await app.transcript.add_messages(conversation, parse_turns("messages", [
        {"role": "user", "actor": who, "content": text, "occurred_at": when} for who, text, when in _EXCHANGE
    ]))
    while await app.indexer.backfill_once():
        pass
    question, reply = added[0].id, added[1].id
    request = search_request("which colour did Sam paint the garden fence", top_k=3)
    found = await app.recall.search(request)
    assert found.hits[0].memory.id == reply
    app.ranker.tuning = replace(SearchTuning(), exchange_weight=0)
    alone = await app.recall.search(request)
    assert [h.memory.id for h in alone.hits[:2]] == [question, reply]  # without it, the question's words win

"""The tools as an MCP client sees them, through the real in-memory client, in both protocol eras."""

from __future__ import annotations

import json
import sqlite3
import uuid
from pathlib import Path
from typing import Any

import anyio
import jsonschema
import numpy as np
import pytest

from ollama_mcp.config import Settings
from tests.conftest import Database, connect, eventually
from tests.support.fake_ollama import FakeOllama
from tests.support.mcp_client import call, error

pytestmark = pytest.mark.anyio

ERAS = ["legacy", "auto"]  # legacy = the initialize handshake Claude Desktop and the Inspector speak

CONTEXT_OF_ID = "SELECT x.context FROM memories m JOIN memory_contexts x ON x.seq = m.seq WHERE m.id = ?"


def rows(db: Database, sql: str, *params: Any) -> list[tuple[Any, ...]]:
    return db.rows(sql, *params)


@pytest.mark.parametrize("mode", ERAS)
async def test_init_store_search_end_round_trip_in_both_protocol_eras(
    settings: Settings, db: Database, mode: str
) -> None:
    async with connect(settings, mode) as client:
        created = await call(client, "init_conversation", name="planning", metadata={"project": "x"})
        assert created["status"] == "created" and created["name"] == "planning"
        assert uuid.UUID(created["conversation_id"]).version == 4

        stored = await call(client, "store_memory", content="We picked PostgreSQL for the billing service", tags=["db"])
        assert stored["conversation_id"] == created["conversation_id"]
        assert stored["embedding_status"] == "embedded" and stored["embedding_dimension"] == 256
        assert stored["duplicate"] is False

        found = await call(client, "search_memories", query="which database for billing?")
        assert found["mode"] == "hybrid"
        assert [hit["memory_id"] for hit in found["results"]][0] == stored["memory_id"]
        assert found["results"][0]["tags"] == ["db"]
        assert 0 < found["results"][0]["similarity"] <= 1

        ended = await call(client, "end_conversation")
        assert ended == {
            **ended,
            "conversation_id": created["conversation_id"],
            "status": "completed",
            "final_memory_count": 1,
        }

    assert rows(db, "SELECT status FROM conversations") == [("completed",)]
    assert rows(db, "SELECT count(*) FROM memories") == [(1,)]


async def test_after_end_conversation_the_model_reads_that_no_conversation_is_current(
    settings: Settings,
) -> None:
    async with connect(settings) as client:
        await call(client, "init_conversation", name="short")
        await call(client, "end_conversation")
        result = await client.call_tool("get_conversation_id", {})
    assert result.structured_content == {"current": None}
    assert result.content[0].text == '{"current":null}'  # (the README's null)


async def test_store_without_a_conversation_creates_an_anonymous_current_one(settings: Settings, db: Database) -> None:
    async with connect(settings) as client:
        assert (await call(client, "get_conversation_id"))["current"] is None
        stored = await call(client, "store_memory", content="first thought")
        current = (await call(client, "get_conversation_id"))["current"]
        assert current["conversation_id"] == stored["conversation_id"]
        assert current["anonymous"] is True and current["status"] == "active" and current["memory_count"] == 1
        again = await call(client, "store_memory", content="second thought")
        assert again["conversation_id"] == stored["conversation_id"]
    assert rows(db, "SELECT anonymous, count(*) FROM conversations GROUP BY anonymous") == [(1, 1)]


async def test_identical_content_stored_twice_returns_the_existing_memory(settings: Settings, db: Database) -> None:
    async with connect(settings) as client:
        first = await call(client, "store_memory", content="retry me")
        second = await call(client, "store_memory", content="retry me")
    assert second["memory_id"] == first["memory_id"] and second["duplicate"] is True
    assert "already stored" in second["note"]
    assert rows(db, "SELECT count(*) FROM memories") == [(1,)]
    assert rows(db, "SELECT facet, count(*) FROM memory_embeddings GROUP BY facet ORDER BY facet") == [
        ("content", 1),
        ("context", 1),
    ]


async def test_same_content_in_two_conversations_is_two_memories(settings: Settings, db: Database) -> None:
    async with connect(settings) as client:
        a = await call(client, "init_conversation")
        b = await call(client, "init_conversation")
        one = await call(client, "store_memory", content="shared fact", conversation_id=a["conversation_id"])
        two = await call(client, "store_memory", content="shared fact", conversation_id=b["conversation_id"])
    assert one["memory_id"] != two["memory_id"] and not two["duplicate"]


async def test_store_into_an_ended_conversation_is_a_tool_error_and_stores_nothing(
    settings: Settings, db: Database
) -> None:
    async with connect(settings) as client:
        conv = await call(client, "init_conversation")
        await call(client, "store_memory", content="before the end")
        await call(client, "end_conversation", conversation_id=conv["conversation_id"])
        text = await error(client, "store_memory", content="after the end", conversation_id=conv["conversation_id"])
        assert "has ended" in text and "init_conversation" in text
        # still searchable after the end (beside the summary the chat model may have written by now)
        found = await call(client, "search_memories", query="before the end", conversation_id=conv["conversation_id"])
        assert [h["content"] for h in found["results"] if h["kind"] == "note"] == ["before the end"]
    assert rows(db, "SELECT content FROM memories WHERE kind = 'note'") == [("before the end",)]


async def test_ending_an_ended_conversation_is_a_tool_error(settings: Settings) -> None:
    async with connect(settings) as client:
        conv = await call(client, "init_conversation")
        await call(client, "end_conversation")
        text = await error(client, "end_conversation", conversation_id=conv["conversation_id"])
        assert "has ended" in text


async def test_end_without_a_current_conversation_names_the_missing_id(settings: Settings) -> None:
    async with connect(settings) as client:
        text = await error(client, "end_conversation")
    assert "conversation_id" in text and "no conversation is current" in text


async def test_ending_with_a_summary_makes_it_searchable_across_conversations(settings: Settings, db: Database) -> None:
    async with connect(settings) as client:
        conv = await call(client, "init_conversation", name="infra")
        await call(client, "store_memory", content="compared three queues")
        ended = await call(client, "end_conversation", summary="Decision: use RabbitMQ for the job queue")
        assert ended["final_memory_count"] == 1
        # The summary is embedded in the background, like any memory stored without waiting.
        summary_vectors = (
            "SELECT count(*) FROM memory_embeddings e JOIN memories m ON m.seq = e.memory_seq"
            " WHERE m.kind = 'summary' AND e.facet = 'content'"
        )
        await eventually(lambda: _count(db, summary_vectors, 1))
        await call(client, "init_conversation", name="later")
        found = await call(client, "search_all_conversations", query="what did we decide about the job queue")
    top = found["results"][0]
    assert top["kind"] == "summary" and top["conversation_id"] == conv["conversation_id"]
    assert "RabbitMQ" in top["content"]
    assert rows(db, "SELECT summary FROM conversations WHERE id = ?", conv["conversation_id"]) == [
        ("Decision: use RabbitMQ for the job queue",)
    ]


async def test_search_scope_is_given_then_current_then_all(settings: Settings) -> None:
    async with connect(settings) as client:
        a = await call(client, "init_conversation", name="a")
        await call(client, "store_memory", content="apples are red")
        b = await call(client, "init_conversation", name="b")
        await call(client, "store_memory", content="apples are green")
        current = await call(client, "search_memories", query="apples")
        assert {h["conversation_id"] for h in current["results"]} == {b["conversation_id"]}
        given = await call(client, "search_memories", query="apples", conversation_id=a["conversation_id"])
        assert [h["content"] for h in given["results"]] == ["apples are red"]
        everywhere = await call(client, "search_all_conversations", query="apples")
        assert {h["conversation_id"] for h in everywhere["results"]} == {a["conversation_id"], b["conversation_id"]}
        await call(client, "end_conversation")  # b is no longer current: search covers all
        after = await call(client, "search_memories", query="apples")
        assert len(after["results"]) == 2


async def test_list_conversations_filters_by_status_newest_first(settings: Settings) -> None:
    async with connect(settings) as client:
        old = await call(client, "init_conversation", name="old")
        await call(client, "end_conversation")
        new = await call(client, "init_conversation", name="new")
        listed = (await call(client, "list_conversations"))["conversations"]
        assert [c["conversation_id"] for c in listed] == [new["conversation_id"], old["conversation_id"]]
        done = (await call(client, "list_conversations", status="completed"))["conversations"]
        assert [c["name"] for c in done] == ["old"] and done[0]["ended_at"]
        assert len((await call(client, "list_conversations", limit=1))["conversations"]) == 1
        assert "status" in await error(client, "list_conversations", status="archived")


async def test_delete_memory_removes_row_vectors_tags_and_keyword_entry(settings: Settings, db: Database) -> None:
    async with connect(settings) as client:
        keep = await call(client, "store_memory", content="keep this zebra", tags=["t"])
        gone = await call(client, "store_memory", content="remove this zebra", tags=["t"])
        assert len((await call(client, "search_memories", query="zebra"))["results"]) == 2
        deleted = await call(client, "delete_memory", memory_id=gone["memory_id"])
        assert deleted == {"memory_id": gone["memory_id"], "conversation_id": gone["conversation_id"], "deleted": True}
        found = await call(client, "search_memories", query="zebra")
        assert [h["memory_id"] for h in found["results"]] == [keep["memory_id"]]
        assert "no memory" in await error(client, "delete_memory", memory_id=gone["memory_id"])
    assert rows(db, "SELECT count(*) FROM memories") == [(1,)]
    assert rows(db, "SELECT count(*) FROM memory_embeddings") == [(2,)]  # keep's content and context
    assert db.tags() == ["t"]
    assert db.keyword_matches("content", "zebra") == 1
    assert db.keyword_matches("content", "remove") == 0 and db.keyword_matches("context", "remove") == 0


async def test_deleted_text_leaves_the_context_of_the_memories_after_it(settings: Settings, db: Database) -> None:
    async with connect(settings) as client:
        await call(client, "store_memory", content="we met on monday")
        secret = await call(client, "store_memory", content="the door code is 4512")
        after = await call(client, "store_memory", content="remember to buy milk")
        assert rows(db, CONTEXT_OF_ID, after["memory_id"]) == [
            ("we met on monday\nthe door code is 4512\nremember to buy milk",)
        ]
        await call(client, "delete_memory", memory_id=secret["memory_id"])
        assert rows(db, CONTEXT_OF_ID, after["memory_id"]) == [
            ("we met on monday\nremember to buy milk",)
        ]
        found = await call(client, "search_all_conversations", query="door code 4512", top_k=10)
        assert all("4512" not in h["content"] for h in found["results"])
        assert db.keyword_matches("context", "4512") == 0
        # the follower's context vector is recomputed from the new context in the background
        await eventually(lambda: _count(db, "SELECT count(*) FROM memory_embeddings WHERE facet = 'context'", 2))


async def _count(db: Database, sql: str, expected: int) -> bool:
    return rows(db, sql)[0][0] == expected


async def test_a_store_waits_for_its_own_vector_only_and_is_found_by_meaning_at_once(
    settings: Settings, db: Database, fake_ollama: FakeOllama
) -> None:
    fake_ollama.concepts.update({"automobile": "vehicle", "car": "vehicle"})
    async with connect(settings) as client:
        await call(client, "store_memory", content="the first note of the chat")
        stored = await call(client, "store_memory", content="bought a red automobile")
        found = await call(client, "search_memories", query="car")  # no word in common: meaning only
        assert stored["embedding_status"] == "embedded"
        assert found["mode"] == "hybrid" and found["results"][0]["memory_id"] == stored["memory_id"]
        # its in-context vector (both notes' text) came in a request of its own, in the background
        await eventually(lambda: _count(db, "SELECT count(*) FROM memory_embeddings WHERE facet = 'context'", 2))
    inputs = [r.body["input"] for r in fake_ollama.embed_requests()]
    assert ["search_document: bought a red automobile"] in inputs
    assert ["search_document: the first note of the chat\nbought a red automobile"] in inputs


@pytest.mark.sqlite_only  # the overlap is the service's; a held write lock is simplest to make on SQLite
async def test_a_store_asks_ollama_for_its_vector_while_the_memory_is_being_written(
    settings: Settings, db: Database, fake_ollama: FakeOllama, db_path: Path
) -> None:
    text = "written while another process holds the write lock"
    async with connect(settings) as client:
        await call(client, "store_memory", content="an earlier note")
        stored: dict[str, Any] = {}

        async def store() -> None:
            stored.update(await call(client, "store_memory", content=text))

        blocker = sqlite3.connect(db_path, isolation_level=None)
        blocker.execute("BEGIN IMMEDIATE")  # the store's insert waits for this lock
        try:
            async with anyio.create_task_group() as tasks:
                tasks.start_soon(store)
                asked = await eventually(lambda: _asked_for(fake_ollama, f"search_document: {text}"))
                assert asked and rows(db, "SELECT count(*) FROM memories WHERE content = ?", text) == [(0,)]
                blocker.execute("ROLLBACK")
        finally:
            blocker.close()
    assert stored["embedding_status"] == "embedded"
    assert rows(db, "SELECT count(*) FROM memory_embeddings e JOIN memories m ON m.seq = e.memory_seq"
                    " WHERE m.id = ? AND e.facet = 'content'", stored["memory_id"]) == [(1,)]
    # one request for its own text, none again after the write
    assert sum(f"search_document: {text}" in r.body["input"] for r in fake_ollama.embed_requests()) == 1


async def _asked_for(fake_ollama: FakeOllama, piece: str) -> bool:
    return any(piece in r.body["input"] for r in fake_ollama.embed_requests())


async def test_caller_supplied_embedding_is_stored_as_given(
    settings: Settings, db: Database, fake_ollama: FakeOllama
) -> None:
    vector = [0.0] * 256
    vector[3] = 2.0
    async with connect(settings) as client:
        await call(client, "store_memory", content="an earlier note")  # so the next context is not its text
        stored = await call(client, "store_memory", content="bring your own vector", embedding=vector)
        assert stored["embedding_status"] == "embedded" and stored["embedding_dimension"] == 256
    # No Ollama call for its own text (its in-context vector is computed in the background).
    texts = [text for r in fake_ollama.embed_requests() for text in r.body["input"]]
    assert "search_document: bring your own vector" not in texts
    assert any(v[3] == pytest.approx(1.0) and np.count_nonzero(v) == 1 for v in db.vectors())  # stored as given


async def test_caller_embedding_of_the_wrong_dimension_is_refused_and_stores_nothing(
    settings: Settings, db: Database
) -> None:
    async with connect(settings) as client:
        await call(client, "store_memory", content="sets the dimension")  # a 256-d vector from Ollama
        text = await error(client, "store_memory", content="wrong size", embedding=[0.5] * 10)
    assert "embedding" in text and "10 dimensions" in text and "256" in text
    assert rows(db, "SELECT content FROM memories") == [("sets the dimension",)]


async def test_tool_annotations_are_honest(settings: Settings) -> None:
    async with connect(settings) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
    assert set(tools) == {
        "init_conversation", "get_conversation_id", "store_memory", "search_memories",
        "search_all_conversations", "end_conversation", "list_conversations", "delete_memory",
        "update_memory", "export_conversation", "ask_agent", "delete_conversation", "add_messages", "read_memory",
    }
    for name in (
        "get_conversation_id", "search_memories", "search_all_conversations", "list_conversations",
        "export_conversation", "read_memory",
    ):
        assert tools[name].annotations.read_only_hint is True, name
    assert tools["delete_memory"].annotations.destructive_hint in (True, None)  # None: the spec's default, true
    assert tools["delete_conversation"].annotations.destructive_hint in (True, None)
    assert tools["delete_conversation"].annotations.read_only_hint in (False, None)
    assert tools["delete_memory"].annotations.read_only_hint in (False, None)
    assert tools["store_memory"].annotations.destructive_hint is False
    assert tools["store_memory"].annotations.idempotent_hint is True
    assert tools["add_messages"].annotations.destructive_hint is False
    assert tools["add_messages"].annotations.idempotent_hint is True  # the same turns again are a retry
    assert all(t.annotations.open_world_hint is False for t in tools.values())
    assert tools["update_memory"].annotations.destructive_hint is False  # the old version is kept
    # Output schemas are left out of tools/list (half its bytes); results still carry structured content.
    assert not any(t.output_schema for t in tools.values())
    # The compacted schemas still accept what the tools accept: a nullable choice takes null.
    scope = tools["ask_agent"].input_schema
    jsonschema.validate({"query": "q", "scope": None, "conversation_id": None}, scope)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"query": "q", "scope": "everything"}, scope)


async def test_result_text_is_compact_json_of_the_structured_content_without_nulls(settings: Settings) -> None:

    async with connect(settings, "legacy") as client:
        result = await client.call_tool("store_memory", {"content": "compact please"})
    text = result.content[0].text
    assert "\n" not in text and ": " not in text and "null" not in text
    assert json.loads(text) == {k: v for k, v in result.structured_content.items() if v is not None}
    assert result.structured_content["note"] is None  # the structured form keeps every field


async def test_search_memories_in_a_chat_the_server_started_recalls_every_earlier_chat(
    settings: Settings, fake_ollama: FakeOllama
) -> None:
    fake_ollama.concepts.update({"database": "storage", "postgresql": "storage"})
    async with connect(settings) as earlier:
        await call(earlier, "init_conversation", name="billing")
        chosen = await call(earlier, "store_memory", content="For billing we chose PostgreSQL")
    async with connect(settings) as chat:  # a new chat: a new process, no init_conversation
        await call(chat, "store_memory", content="lunch is at noon")  # starts the server's own conversation
        found = await call(chat, "search_memories", query="which database for billing?")
    assert found["searched"] == "all" and found["notice"] is None
    assert [hit["memory_id"] for hit in found["results"]] == [chosen["memory_id"]]


async def test_a_search_kept_to_one_conversation_says_the_others_were_left_out(
    settings: Settings, fake_ollama: FakeOllama
) -> None:
    async with connect(settings) as client:
        await call(client, "init_conversation", name="alone")
        alone = await call(client, "search_memories", query="anything")
        await call(client, "init_conversation", name="billing")
        await call(client, "store_memory", content="For billing we chose PostgreSQL")
        scoped = await call(client, "search_memories", query="billing")
        everywhere = await call(client, "search_all_conversations", query="billing")
    assert alone["searched"] == "conversation"  # nothing else exists, and that is said plainly
    assert alone["notice"] == "Memory holds nothing on this: there is nothing to search here yet."
    assert scoped["searched"] == "conversation"
    assert scoped["notice"] == "Only this conversation was searched; search_all_conversations recalls the others."
    assert everywhere["searched"] == "all" and everywhere["notice"] is None


async def test_a_memory_sharing_neither_words_nor_meaning_with_the_query_is_not_a_hit(
    settings: Settings, fake_ollama: FakeOllama
) -> None:
    fake_ollama.concepts.update({"database": "storage", "postgresql": "storage"})
    async with connect(settings) as client:
        await call(client, "init_conversation", name="errands")
        await call(client, "store_memory", content="lunch is at noon")
        unrelated = await call(client, "search_memories", query="which database?")
        await call(client, "store_memory", content="the errands app runs on PostgreSQL")
        related = await call(client, "search_memories", query="which database?")
    assert unrelated["results"] == [] and unrelated["mode"] == "hybrid"
    assert [hit["content"] for hit in related["results"]] == ["the errands app runs on PostgreSQL"]


async def test_delete_conversation_removes_it_with_every_trace_and_nothing_of_the_others(
    settings: Settings, db: Database, fake_ollama: FakeOllama
) -> None:
    from tests.support.traces import assert_no_trace  # noqa: PLC0415

    async with connect(settings) as client:
        kept = (await call(client, "init_conversation", name="kept"))["conversation_id"]
        await call(client, "store_memory", content="the kept plan")
        doomed = (await call(client, "init_conversation", name="doomed"))["conversation_id"]
        first = await call(client, "store_memory", content="the secret plan", tags=["plan"])
        await call(client, "update_memory", memory_id=first["memory_id"], content="the secret plan, revised")
        await call(client, "end_conversation", conversation_id=doomed, summary="a plan was made")
        bad = await error(client, "delete_conversation", conversation_id="not-an-id")
        deleted = await call(client, "delete_conversation", conversation_id=doomed)
        again = await error(client, "delete_conversation", conversation_id=doomed)
        found = await call(client, "search_all_conversations", query="plan")
    assert "conversation_id" in bad and "not a valid id" in bad
    # two versions of the note and the summary
    assert deleted == {"conversation_id": doomed, "name": "doomed", "memories_deleted": 3, "deleted": True}
    assert f"no conversation {doomed} exists" in again
    assert {hit["conversation_id"] for hit in found["results"]} == {kept}
    assert_no_trace(db, doomed)
    assert rows(db, "SELECT id FROM conversations") == [(kept,)]


async def test_list_conversations_orders_by_last_activity_and_filters_by_status_name_and_metadata(
    settings: Settings, fake_ollama: FakeOllama
) -> None:
    async with connect(settings) as client:
        apollo = (await call(client, "init_conversation", name="Apollo launch",
                             metadata={"project": "apollo", "priority": 1}))["conversation_id"]
        await call(client, "store_memory", content="launch window is in May")
        gemini = (await call(client, "init_conversation", name="Gemini_review 100%",
                             metadata={"project": "gemini"}))["conversation_id"]
        await call(client, "end_conversation", conversation_id=gemini, summary="reviewed")
        await anyio.sleep(0.01)
        await call(client, "store_memory", content="apollo budget approved", conversation_id=apollo)
        by_activity = await call(client, "list_conversations")
        by_creation = await call(client, "list_conversations", order="created")
        active = await call(client, "list_conversations", status="active")
        named = await call(client, "list_conversations", name="LAUNCH")
        literal = await call(client, "list_conversations", name="_review 100%")
        not_a_wildcard = await call(client, "list_conversations", name="Gemini%review")
        tagged = await call(client, "list_conversations", metadata={"project": "apollo", "priority": 1})
        untagged = await call(client, "list_conversations", metadata={"project": "mercury"})
        bad = await error(client, "list_conversations", metadata={"project": ["a"]})

    def ids(listing: dict[str, Any]) -> list[str]:
        return [c["conversation_id"] for c in listing["conversations"]]

    assert ids(by_activity) == [apollo, gemini] and ids(by_creation) == [gemini, apollo]
    first = by_activity["conversations"][0]
    assert first["memory_count"] == 2 and first["message_count"] == 0 and first["summary_status"] == "none"
    assert first["metadata"] == {"project": "apollo", "priority": 1}
    assert first["last_activity"] > by_activity["conversations"][1]["last_activity"]
    assert by_activity["conversations"][1]["summary_status"] == "given"
    assert ids(active) == [apollo] and ids(named) == [apollo] and ids(literal) == [gemini]
    assert ids(not_a_wildcard) == [] and ids(tagged) == [apollo] and ids(untagged) == []
    assert "metadata.project: must be a text, number or true/false" in bad


async def test_read_memory_reads_any_of_ones_memories_whole_and_refuses_a_page_past_its_end(
    settings: Settings, db: Database
) -> None:
    async with connect(settings) as client:
        await call(client, "init_conversation", name="first")
        stored = await call(client, "store_memory", content="The deploy key rotates every 90 days")
        other = await call(client, "init_conversation", name="second")
        read = await call(client, "read_memory", memory_id=stored["memory_id"])
        past = await error(client, "read_memory", memory_id=stored["memory_id"], page=2)
    assert (read["page"], read["pages"], read["content"]) == (1, 1, "The deploy key rotates every 90 days")
    assert read["conversation_id"] == stored["conversation_id"] != other["conversation_id"]  # any of one's own
    assert read["kind"] == "note"
    assert "page: is 2, but the memory has 1 page(s); pass 1 to 1" in past


async def test_conversations_nobody_named_are_listed_by_their_summary_or_first_memory_or_turn(
    settings: Settings, db: Database
) -> None:
    async with connect(settings) as client:
        first = await call(
            client, "store_memory", content="Plan the Lisbon offsite for March with the whole team and a budget of 20k"
        )
        before_summary = await call(client, "list_conversations")
        await call(client, "end_conversation", summary="Offsite planning: Lisbon in March, budget approved.")
        second = await call(client, "add_messages", messages=[
            {"role": "assistant", "content": "Hello, how can I help?"},
            {"role": "user", "content": "How do I rotate the deploy key?"},
        ])
        await call(client, "init_conversation", name="Named one")
        listed = await call(client, "list_conversations")
    assert [c["title"] for c in before_summary["conversations"]] == [
        "Plan the Lisbon offsite for March with the whole team and a…"
    ]
    titles = {c["conversation_id"]: (c["title"], c["anonymous"]) for c in listed["conversations"]}
    assert titles == {
        first["conversation_id"]: ("Offsite planning: Lisbon in March, budget approved.", True),
        second["conversation_id"]: ("How do I rotate the deploy key?", True),
        next(c["conversation_id"] for c in listed["conversations"] if c["name"]): ("Named one", False),
    }

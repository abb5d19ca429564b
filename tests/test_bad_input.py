"""Bad input gets a tool error naming the field, changes nothing, and the server keeps answering."""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from hypothesis import HealthCheck, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from ollama_mcp.config import Settings
from ollama_mcp.errors import InvalidInputError
from ollama_mcp.inputs.conversations import conversation_query
from ollama_mcp.inputs.memories import note as new_note
from ollama_mcp.inputs.search import search_request
from tests.conftest import Database, connect

pytestmark = pytest.mark.anyio

MISSING = "00000000-0000-4000-8000-000000000000"
NESTED: dict[str, Any] = {}
_node = NESTED
for _ in range(40):
    _node["a"] = {}
    _node = _node["a"]

# (tool, arguments, text the error must contain: the field name at least)
CASES: list[tuple[str, dict[str, Any], str]] = [
    ("store_memory", {}, "content"),
    ("store_memory", {"content": ""}, "content: is empty"),
    ("store_memory", {"content": "   \n\t"}, "content: is empty"),
    ("store_memory", {"content": 42}, "content"),
    ("store_memory", {"content": "x" * 100_001}, "content: is 100,001 characters"),
    ("store_memory", {"content": "x" * 10_000_000}, "content: is 10,000,000 characters"),
    ("search_memories", {"query": "q" * 10_000_000}, "query: is 10,000,000 characters"),
    ("store_memory", {"content": "lone \ud800 surrogate"}, "content: contains an unpaired"),
    ("store_memory", {"content": "ok", "conversation_id": "not-a-uuid"}, "conversation_id: is not a valid id"),
    ("store_memory", {"content": "ok", "conversation_id": "'; DROP TABLE memories; --"}, "conversation_id"),
    ("store_memory", {"content": "ok", "conversation_id": MISSING}, f"no conversation {MISSING}"),
    ("store_memory", {"content": "ok", "tags": "solo"}, "tags"),
    ("store_memory", {"content": "ok", "tags": [1, 2]}, "tags"),
    ("store_memory", {"content": "ok", "tags": [""]}, "tags[0]: is empty"),
    ("store_memory", {"content": "ok", "tags": ["t" * 101]}, "tags[0]: is longer"),
    ("store_memory", {"content": "ok", "metadata": [1, 2]}, "metadata"),
    ("store_memory", {"content": "ok", "metadata": "key=value"}, "metadata"),
    ("store_memory", {"content": "ok", "metadata": NESTED}, "metadata: is nested deeper"),
    ("store_memory", {"content": "ok", "metadata": {"big": "x" * 70_000}}, "metadata: is larger"),
    ("store_memory", {"content": "ok", "embedding": []}, "embedding"),
    ("store_memory", {"content": "ok", "embedding": [0.0] * 256}, "embedding: is all zeros"),
    ("store_memory", {"content": "ok", "embedding": ["a", "b"]}, "embedding"),
    ("store_memory", {"content": "ok", "embedding": [1.0] * 20_000}, "embedding: has 20,000 numbers"),
    ("search_memories", {}, "query"),
    ("search_memories", {"query": 7}, "query: should be a valid string (got 7); pass a string. Nothing was done."),
    ("search_memories", {"query": "q" * 10_001}, "query: is 10,001 characters"),
    ("search_memories", {"query": "q", "top_k": 0}, "top_k: is 0, outside 1..100"),
    ("search_memories", {"query": "q", "top_k": 101}, "top_k: is 101"),
    ("search_memories", {"query": "q", "top_k": -5}, "top_k"),
    ("search_memories", {"query": "q", "top_k": 10**12}, "top_k"),
    ("search_memories", {"query": "q", "top_k": "five"}, "top_k"),
    ("search_memories", {"query": "q", "threshold": 1.5}, "threshold: is 1.5, outside -1..1"),
    ("search_memories", {"query": "q", "threshold": -2}, "threshold"),
    ("search_memories", {"query": "q", "conversation_id": "123"}, "conversation_id: is not a valid id"),
    ("search_memories", {"query": "q", "conversation_id": MISSING}, "no conversation"),
    ("search_memories", {"query": "q", "since": "yesterday"}, "since: is not an ISO 8601"),
    ("search_memories", {"query": "q", "until": "2026-13-45"}, "until: is not an ISO 8601"),
    ("search_memories", {"query": "q", "since": "2026-02-01", "until": "2026-01-01"}, "since: is later than until"),
    ("search_memories", {"query": "q", "tags": [""]}, "tags[0]"),
    ("search_all_conversations", {"query": None}, "query"),
    ("read_memory", {}, "memory_id"),
    ("read_memory", {"memory_id": "abc"}, "memory_id: is not a valid id"),
    ("read_memory", {"memory_id": MISSING}, MISSING),
    ("read_memory", {"memory_id": MISSING, "page": 0}, "page: is 0, outside 1..1000000"),
    ("search_all_conversations", {"query": "q", "top_k": 1000}, "top_k"),
    ("search_all_conversations", {"query": "q", "threshold": 3}, "threshold"),
    ("init_conversation", {"name": ""}, "name: is empty"),
    ("init_conversation", {"name": "n" * 501}, "name: is 501 characters"),
    ("init_conversation", {"metadata": "not an object"}, "metadata"),
    ("end_conversation", {"conversation_id": "nope"}, "conversation_id: is not a valid id"),
    ("end_conversation", {"conversation_id": MISSING}, "no conversation"),
    ("list_conversations", {"status": "archived"}, "status: must be 'active' or 'completed'"),
    ("list_conversations", {"limit": 0}, "limit: is 0"),
    ("list_conversations", {"limit": 100_000}, "limit"),
    ("delete_memory", {}, "memory_id"),
    ("delete_memory", {"memory_id": "abc"}, "memory_id: is not a valid id"),
    ("delete_memory", {"memory_id": MISSING}, "no memory"),
    ("update_memory", {}, "memory_id"),
    ("update_memory", {"memory_id": "abc", "content": "x"}, "memory_id: is not a valid id"),
    ("update_memory", {"memory_id": MISSING, "content": "x"}, "no memory"),
    ("update_memory", {"memory_id": MISSING}, "content: tags and metadata are all missing"),
    ("update_memory", {"memory_id": MISSING, "content": ""}, "content: is empty"),
    ("update_memory", {"memory_id": MISSING, "tags": [""]}, "tags[0]: is empty"),
    ("search_memories", {"query": "q", "kind": "notes"}, "kind: should be 'note', 'message', 'summary' or 'fact'"),
    ("export_conversation", {"conversation_id": MISSING}, "no conversation"),
    ("export_conversation", {"conversation_id": "x"}, "conversation_id: is not a valid id"),
    ("export_conversation", {"format": "pdf"}, "format"),
    ("export_conversation", {"page": 0}, "page: is 0"),
    ("export_conversation", {"page": 2}, "page: is 2, but the conversation has 1 page"),
    ("init_conversation", {"metadata": {"ttl_hours": 0}}, "metadata.ttl_hours: must be a number of hours"),
    ("init_conversation", {"metadata": {"ttl_hours": "1d"}}, "metadata.ttl_hours"),
    (
        "init_conversation",
        {"metadata": {"ttl_hour": 24}},
        "metadata.ttl_hour: is not a setting; did you mean ttl_hours?",
    ),
    (
        "init_conversation",
        {"metadata": {"compact_after_messages": 1}},
        "metadata.compact_after_messages: is 1, outside 2",
    ),
    (
        "init_conversation",
        {"metadata": {"compaction": {"triggerTurns": "many"}}},
        "metadata.compaction.triggerTurns: must be a whole number",
    ),
    (
        "init_conversation",
        {"metadata": {"compaction": {"strategy": "truncate"}}},
        "metadata.compaction.strategy: is 'truncate'; use one of rolling, hierarchical, never",
    ),
    (
        "init_conversation",
        {"metadata": {"compaction": {"summarizerModel": "llama3"}}},
        "metadata.compaction.summarizerModel: is not supported per conversation",
    ),
    (
        "init_conversation",
        {"metadata": {"compaction": {"everyTurn": True}}},
        "metadata.compaction.everyTurn: is not a compaction setting; use triggerTurns, triggerTokens, strategy or"
        " summaryTokens",
    ),
    (
        "init_conversation",
        {"metadata": {"retention": "summary_only"}},
        "metadata.retention: is 'summary_only'; use one of full, audit-only, ephemeral",
    ),
    ("no_such_tool", {}, "no_such_tool"),
    # An argument the tool does not take is refused, not ignored (a memory filed in the wrong
    # conversation, ten results where three were asked for), with the names it takes.
    (
        "store_memory",
        {"content": "misfiled?", "conversation": MISSING},
        "conversation: is not an argument of store_memory (did you mean conversation_id?); it takes content,"
        " conversation_id, tags, metadata, embedding, occurred_at. Nothing was done",
    ),
    ("store_memory", {"text": "x"}, "text: is not an argument of store_memory; it takes content,"),
    ("search_memories", {"query": "q", "limit": 3, "q": 1}, "limit, q: are not arguments of search_memories; it takes"
     " query, conversation_id, top_k,"),
    ("ask_agent", {"question": "when?"}, "question: is not an argument of ask_agent; it takes query,"),
    # The SDK's own refusals, in the same words: the field, what is wrong, what to pass.
    ("store_memory", {"tags": ["t"]}, "content: is required; pass a string. Nothing was done."),
    ("search_memories", {"query": "q", "top_k": "ten"}, "top_k: should be a valid integer, unable to parse string"
     " as an integer (got 'ten'); pass a whole number. Nothing was done."),
    ("store_memory", {"content": "ok", "tags": "solo"}, "tags: should be a valid list (got 'solo'); pass a list of"
     " strings."),
    ("search_memories", {"query": "q", "include_superseded": "maybe"}, "(got 'maybe'); pass true or false."),
    ("search_all_conversations", {"query": "q", "include_messages": True}, "include_messages: is no longer an"
     " argument of search_all_conversations: turns are searched by default now; leave it out, or pass kind"),
    ("store_memories", {"content": "x"}, "'store_memories' is not a tool of this server (did you mean store_memory?);"
     " its tools are init_conversation, get_conversation_id, store_memory,"),
]


def counts(db: Database) -> tuple[int, ...]:
    tables = ["conversations", "memories", "memory_embeddings", "jobs", "agent_audit"]
    if db.backend == "sqlite":
        tables += ["memory_tags", "memories_fts"]
    return tuple(db.count(f"SELECT count(*) FROM {table}") for table in tables)


@pytest.mark.parametrize(("tool", "args", "expected"), CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
async def test_bad_input_is_a_clear_tool_error_that_changes_nothing(
    settings: Settings, db: Database, tool: str, args: dict[str, Any], expected: str
) -> None:
    async with connect(settings, "legacy") as client:
        await client.call_tool("store_memory", {"content": "existing memory", "tags": ["t"]})
        before = counts(db)
        result = await client.call_tool(tool, args)
        assert result.is_error
        text = result.content[0].text
        assert expected in text
        assert "internal error" not in text
        assert counts(db) == before
        after = await client.call_tool("search_memories", {"query": "existing"})
        assert not after.is_error and after.structured_content["results"][0]["content"] == "existing memory"


async def test_a_tool_that_takes_no_arguments_answers_a_client_that_sends_a_placeholder(settings: Settings) -> None:
    # Some clients send tools without arguments a placeholder ("random_string"); refusing it
    # would make get_conversation_id unusable from them.
    async with connect(settings) as client:
        created = await client.call_tool("init_conversation", {"name": "here"})
        result = await client.call_tool("get_conversation_id", {"random_string": "dummy"})
        assert not result.is_error, result.content[0].text
        assert result.structured_content["current"]["conversation_id"] == created.structured_content["conversation_id"]


@pytest.mark.parametrize(
    "query",
    ['"', '""', "a*", "NEAR(a b)", "a OR b", "a AND NOT b", "(((", "col:value", "-x", "^start", "'; DROP TABLE x; --",
     "\u202eRTL\u202c", "emoji 🧠🔥", "nul\x00byte", "✓"],
)
async def test_fts_syntax_in_queries_never_errors_or_injects(settings: Settings, query: str) -> None:
    async with connect(settings) as client:
        await client.call_tool("store_memory", {"content": "a b value start x"})
        result = await client.call_tool("search_memories", {"query": query})
        assert not result.is_error, result.content[0].text


@pytest.mark.parametrize(
    "content", ["\u202eright-to-left\u202c", "emoji 🧠 and 漢字", "e\u0301 combining", "\ufeffbom"]
)
async def test_unusual_unicode_content_round_trips_exactly(settings: Settings, content: str) -> None:
    async with connect(settings) as client:
        stored = await client.call_tool("store_memory", {"content": content})
        assert not stored.is_error
        found = await client.call_tool("search_all_conversations", {"query": content, "top_k": 1})
        assert found.structured_content["results"][0]["content"] == content


async def test_a_nul_character_is_refused_on_every_backend_and_stores_nothing(settings: Settings, db: Database) -> None:
    async with connect(settings) as client:
        for args in ({"content": "nul\x00inside"}, {"content": "ok", "tags": ["a\x00b"]},
                     {"content": "ok", "metadata": {"k": "v\x00"}}):
            result = await client.call_tool("store_memory", args)
            assert result.is_error
            assert "contains a NUL character (U+0000), which cannot be stored; remove it" in result.content[0].text
        found = await client.call_tool("search_all_conversations", {"query": "nul\x00inside"})
        assert not found.is_error and found.structured_content["results"] == []
    assert db.count("SELECT count(*) FROM memories") == 0


@hsettings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    content=st.one_of(st.text(max_size=200), st.integers(), st.none(), st.lists(st.text(max_size=5), max_size=3)),
    tags=st.one_of(st.none(), st.lists(st.one_of(st.text(max_size=10), st.integers()), max_size=4)),
    top_k=st.one_of(st.integers(-10, 200), st.floats(allow_nan=True), st.text(max_size=3)),
    threshold=st.one_of(st.none(), st.floats(allow_nan=True, allow_infinity=True)),
)
@pytest.mark.slow
def test_fuzzed_inputs_get_a_result_or_a_clear_error(
    settings: Settings, content: Any, tags: Any, top_k: Any, threshold: Any
) -> None:

    async def run() -> None:
        async with connect(settings) as client:
            stored = await client.call_tool("store_memory", {"content": content, "tags": tags})
            searched = await client.call_tool(
                "search_memories", {"query": "q" if not isinstance(content, str) or not content.strip() else content,
                                    "top_k": top_k, "threshold": threshold},
            )
            for result in (stored, searched):
                if result.is_error:
                    assert "internal error" not in result.content[0].text
                else:
                    assert result.structured_content is not None
            alive = await client.call_tool("list_conversations", {})
            assert not alive.is_error

    anyio.run(run)


async def test_nan_and_infinity_are_refused_by_the_service_itself(app: Any) -> None:
    # JSON cannot carry NaN (clients send null), but the agent and the CLI call the service directly.
    with pytest.raises(InvalidInputError, match="threshold"):
        await app.recall.search(search_request("q", threshold=float("nan")))
    with pytest.raises(InvalidInputError, match="metadata: contains NaN"):
        await app.memories.store(new_note("ok", metadata={"k": float("inf")}))
    with pytest.raises(InvalidInputError, match="embedding: contains NaN"):
        await app.memories.store(new_note("ok", embedding=[float("nan")] * 256))
    assert (await app.conversations.listed(conversation_query())) == []  # nothing was created on the way

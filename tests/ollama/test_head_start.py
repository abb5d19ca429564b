"""A new process's head start: a search that arrives while the app is still being imported and
opened has its query embedded at once, and the app uses that answer instead of asking again;
when the head start got nothing, the app asks itself and reports failures as always."""

from __future__ import annotations

import gc
from dataclasses import replace

import anyio
import pytest

from ollama_mcp.app import open_app
from ollama_mcp.config import Settings
from ollama_mcp.errors import ConfigError, OllamaUnavailableError
from ollama_mcp.head_start import HeadStart
from ollama_mcp.inputs.memories import note as new_note
from ollama_mcp.inputs.search import search_request
from ollama_mcp.ollama.embedding_text import MIN_CHUNK_CHARS
from tests.conftest import connect, eventually
from tests.support.fake_ollama import FakeOllama

pytestmark = pytest.mark.anyio


def query_requests(fake: FakeOllama, text: str) -> int:
    return sum(r.body["input"] == [text] for r in fake.embed_requests())


async def test_a_search_during_the_opening_is_embedded_before_the_app_opens_and_only_once(
    settings: Settings, fake_ollama: FakeOllama
) -> None:
    fake_ollama.concepts.update({"boat": "vessel", "ship": "vessel"})
    async with open_app(settings, background=False) as app:
        stored = await app.memories.store(new_note("the ship is moored at the pier"))
    fake_ollama.requests.clear()

    async with HeadStart.running(settings) as head:
        head.search("where is my boat")
        # Sent before any app exists: Ollama computes it while the app imports and opens.
        await eventually(
            lambda: anyio.to_thread.run_sync(query_requests, fake_ollama, "search_query: where is my boat")
        )
        async with open_app(settings, background=False, head_start=head) as app:
            outcome = await app.recall.search(search_request("where is my boat"))

    assert outcome.mode == "hybrid" and outcome.hits[0].memory.id == stored.memory.id  # by meaning: no shared word
    assert query_requests(fake_ollama, "search_query: where is my boat") == 1
    assert sum(r.path == "/api/show" for r in fake_ollama.requests) == 1  # the model described once, early


async def test_a_query_longer_than_the_shortest_chunk_is_left_to_the_app(
    settings: Settings, fake_ollama: FakeOllama
) -> None:
    # How much of it is sent depends on the model's context, unknown before Ollama describes it.
    query = "boat " * (MIN_CHUNK_CHARS // 5 + 1)
    async with HeadStart.running(settings) as head:
        head.search(query)
        async with open_app(settings, background=False, head_start=head) as app:
            await app.recall.search(search_request(query))
    sent = [r.body["input"] for r in fake_ollama.embed_requests()]
    assert sent == [["search_query: " + query]]  # one request, the query whole (it fits the model)
    assert head.queried is False


async def test_when_ollama_is_down_the_head_start_gets_nothing_and_the_search_says_so(
    settings: Settings, fake_ollama: FakeOllama
) -> None:
    async with open_app(settings, background=False) as app:
        await app.memories.store(new_note("the ship is moored at the pier"))
    fake_ollama.stop()
    async with HeadStart.running(settings) as head:
        head.search("ship")
        with pytest.raises(OllamaUnavailableError):  # what its own call would have raised
            await head.model_info()
        assert await head.model_info() is None  # handed out once: later callers ask Ollama again
        async with open_app(settings, background=False, head_start=head) as app:
            outcome = await app.recall.search(search_request("ship"))
    assert outcome.mode == "keyword" and outcome.hits[0].memory.content == "the ship is moored at the pier"
    assert outcome.notice is not None and "Ollama" in outcome.notice


async def test_a_model_that_cannot_embed_is_refused_even_when_its_answer_came_early(
    settings: Settings, fake_ollama: FakeOllama
) -> None:
    chat_only = replace(settings, embed_model="qwen2.5:3b")
    async with HeadStart.running(chat_only) as head:
        head.search("ship")
        async with open_app(chat_only, background=False, head_start=head) as app:
            outcome = await app.recall.search(search_request("ship"))
    assert outcome.mode == "keyword"
    assert outcome.notice is not None and "not an embedding model" in outcome.notice


@pytest.mark.parametrize("usable", [True, False], ids=["opened", "unusable settings"])
async def test_collection_paused_for_the_imports_resumes_once_the_app_is_imported_or_cannot_be(
    settings: Settings, usable: bool
) -> None:
    gc.disable()  # as ``cli`` does before importing the server
    try:
        async with connect(settings if usable else ConfigError("OLLAMA_MCP_DB: not a path")) as client:  # type: ignore[arg-type]
            reply = await client.call_tool("get_conversation_id", {})
            assert reply.is_error is not usable
            assert gc.isenabled()  # a server left without collection would grow for as long as it runs
            assert gc.get_freeze_count() > 0
    finally:
        gc.enable()

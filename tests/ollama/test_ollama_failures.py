"""When Ollama is down, slow, missing the model or changes under us: store anyway, say so, catch up.

Nothing here patches our code: the fake Ollama really closes its port, really stalls, really
answers 404 or garbage, and the real ollama client meets it.
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Any

import anyio
import pytest
from mcp import Client

from ollama_mcp.app import open_app
from ollama_mcp.config import Settings
from ollama_mcp.inputs.conversations import new_conversation
from ollama_mcp.inputs.memories import note as new_note
from tests.conftest import Database, connect, eventually
from tests.support.fake_ollama import FakeModel, FakeOllama
from tests.support.mcp_client import call

pytestmark = pytest.mark.anyio


def query(db: Database, sql: str, *params: Any) -> list[tuple[Any, ...]]:
    return db.rows(sql, *params)


async def timed_store_then_search(
    client: Client, content: str, text: str
) -> tuple[dict[str, Any], float, dict[str, Any], float]:
    """A store of ``content``, then a search for ``text``: each result with its seconds."""
    started = time.monotonic()
    stored = await call(client, "store_memory", content=content)
    stored_in = time.monotonic() - started
    started = time.monotonic()
    found = await call(client, "search_memories", query=text)
    return stored, stored_in, found, time.monotonic() - started


def embedded_count(db: Database) -> int:
    return query(db, "SELECT count(DISTINCT memory_seq) FROM memory_embeddings")[0][0]


async def test_ollama_down_stores_pending_searches_by_keyword_and_catches_up(
    settings: Settings, db: Database, fake_ollama: FakeOllama
) -> None:
    fake_ollama.stop()
    async with connect(settings, "legacy") as client:
        stored = await call(client, "store_memory", content="the deploy key lives in the vault")
        assert stored["embedding_status"] == "pending" and stored["embedding_dimension"] is None
        assert "not reachable" in stored["note"] and fake_ollama.url in stored["note"]
        assert "keyword search finds it" in stored["note"]

        found = await call(client, "search_memories", query="where is the deploy key?")
        assert found["mode"] == "keyword"
        assert "Semantic search is unavailable" in found["notice"] and "not reachable" in found["notice"]
        assert [h["memory_id"] for h in found["results"]] == [stored["memory_id"]]
        assert found["results"][0]["similarity"] is None

        fake_ollama.start()  # Ollama comes back on the same port
        await eventually(lambda: _async(embedded_count(db) == 1))
        recovered = await eventually(lambda: _search_mode(client, "deploy key", "hybrid"))
        assert recovered["results"][0]["similarity"] > 0
    assert query(db, "SELECT count(*) FROM memories") == [(1,)]


async def test_ollama_going_down_mid_batch_loses_nothing(
    settings: Settings, db: Database, fake_ollama: FakeOllama
) -> None:
    async with connect(settings) as client:
        statuses = []
        for i in range(10):
            if i == 5:
                fake_ollama.stop()
            stored = await call(client, "store_memory", content=f"batch item number {i}")
            statuses.append(stored["embedding_status"])
        assert statuses == ["embedded"] * 5 + ["pending"] * 5
        assert query(db, "SELECT count(*) FROM memories") == [(10,)]
        fake_ollama.start()
        await eventually(lambda: _async(embedded_count(db) == 10))


async def test_pending_memories_are_embedded_on_the_next_start_without_any_call(
    settings: Settings, db: Database, fake_ollama: FakeOllama
) -> None:
    fake_ollama.stop()
    async with connect(settings) as client:
        await call(client, "store_memory", content="written while Ollama was off")
    assert embedded_count(db) == 0
    fake_ollama.start()
    async with connect(settings) as client:  # no tool call at all
        await eventually(lambda: _async(embedded_count(db) == 1))


async def test_model_not_pulled_names_the_pull_command_and_recovers_after_pull(
    settings: Settings, db: Database, fake_ollama: FakeOllama
) -> None:
    spec = fake_ollama.models.pop("nomic-embed-text")
    async with connect(settings) as client:
        stored = await call(client, "store_memory", content="needs a model")
        assert stored["embedding_status"] == "pending"
        assert "ollama pull nomic-embed-text" in stored["note"]
        found = await call(client, "search_memories", query="model")
        assert found["mode"] == "keyword" and "ollama pull nomic-embed-text" in found["notice"]
        fake_ollama.models["nomic-embed-text"] = spec  # the user ran `ollama pull`
        await eventually(lambda: _async(embedded_count(db) == 1))
    assert query(db, "SELECT DISTINCT model FROM memory_embeddings") == [("nomic-embed-text",)]


async def test_a_mistyped_model_name_gets_the_closest_pulled_model_not_a_failing_pull(
    settings: Settings, fake_ollama: FakeOllama
) -> None:
    fake_ollama.models["nomic-embed-text2"] = FakeModel(capabilities=["completion"])  # close, but not an embedder
    async with connect(replace(settings, embed_model="nomic-embed-txt")) as client:
        stored = await call(client, "store_memory", content="a memory")
    assert stored["embedding_status"] == "pending"
    assert ("does not have the model 'nomic-embed-txt'; you have pulled 'nomic-embed-text', which is close: "
            "set OLLAMA_MCP_EMBED_MODEL=nomic-embed-text.") in stored["note"]
    assert "ollama pull" not in stored["note"]


async def test_a_model_name_like_none_pulled_gets_the_pull_and_what_is_pulled(
    settings: Settings, fake_ollama: FakeOllama
) -> None:
    async with connect(replace(settings, embed_model="mxbai-embed-large")) as client:
        stored = await call(client, "store_memory", content="a memory")
    assert ("does not have the model 'mxbai-embed-large'; run `ollama pull mxbai-embed-large`, or set "
            "OLLAMA_MCP_EMBED_MODEL to a model you have (pulled: nomic-embed-text, qwen2.5:3b).") in stored["note"]


async def test_slow_ollama_times_out_into_pending_instead_of_hanging(
    settings: Settings, db: Database, fake_ollama: FakeOllama
) -> None:
    fake_ollama.delay = 3.0  # the client timeout in these settings is 2 s
    async with connect(settings) as client:
        stored = await call(client, "store_memory", content="patience is a virtue")
        assert stored["embedding_status"] == "pending"
        assert "did not answer within 2 s" in stored["note"]
        quick = await call(client, "store_memory", content="second while slow")
        assert quick["embedding_status"] == "pending"
        fake_ollama.delay = 0.0
        await eventually(lambda: _async(embedded_count(db) == 2))


async def test_a_hung_ollama_costs_searches_and_stores_the_wait_timeout_not_the_embed_timeout(
    settings: Settings, db: Database, fake_ollama: FakeOllama
) -> None:
    fake_ollama.delay = 30.0  # accepts, then says nothing for longer than any timeout here
    waiting = replace(settings, embed_timeout=15.0, wait_timeout=0.5)
    async with connect(waiting) as client:
        stored, stored_in, found, searched_in = await timed_store_then_search(
            client, "noted while Ollama hangs", "hangs"
        )
    assert stored["embedding_status"] == "pending"
    assert "did not answer within 0.5 s" in stored["note"] and "OLLAMA_MCP_WAIT_TIMEOUT" in stored["note"]
    assert found["mode"] == "keyword" and found["results"][0]["content"] == "noted while Ollama hangs"
    assert "Semantic search is unavailable" in found["notice"]
    assert stored_in < 5 and searched_in < 5, (stored_in, searched_in)  # not the 15 s embed timeout


async def test_the_model_is_loaded_at_start_and_kept_loaded_between_calls(
    settings: Settings, fake_ollama: FakeOllama
) -> None:
    async with connect(replace(settings, keep_alive="45m")) as client:
        await eventually(lambda: _async(bool(fake_ollama.embed_requests())))  # before any tool call
        await call(client, "store_memory", content="kept warm")
    bodies = [r.body for r in fake_ollama.embed_requests()]
    assert bodies[0]["model"] == "nomic-embed-text" and "kept warm" not in str(bodies[0]["input"])
    assert any("kept warm" in str(b["input"]) for b in bodies)
    assert {b["keep_alive"] for b in bodies} == {"45m"}


async def test_a_connection_ollama_closes_without_answering_is_asked_again_once_not_reported(
    settings: Settings, fake_ollama: FakeOllama
) -> None:
    async with connect(settings) as client:
        await call(client, "store_memory", content="before the hang-up")
        fake_ollama.hang_up = 1
        found = await call(client, "search_memories", query="before the hang-up")
        fake_ollama.hang_up = 2  # twice in a row is an outage, said so
        failed = await call(client, "search_memories", query="something else")
    assert found["mode"] == "hybrid" and found["notice"] is None
    assert failed["mode"] == "keyword" and "could not be read" in failed["notice"]


async def test_an_ollama_that_trickles_its_reply_is_timed_out_as_a_whole_not_per_read(
    settings: Settings, db: Database, fake_ollama: FakeOllama
) -> None:
    fake_ollama.trickle = 0.5  # a byte every 0.5 s: each read is quick, a reply takes over 20 s
    async with connect(settings) as client:
        stored, stored_in, found, searched_in = await timed_store_then_search(
            client, "written while Ollama trickles", "trickles"
        )
    assert stored["embedding_status"] == "pending" and "did not answer within 2 s" in stored["note"]
    assert found["mode"] == "keyword" and found["results"][0]["content"] == "written while Ollama trickles"
    # The client timeout in these settings is 2 s; a per-read timeout would take the whole reply.
    assert stored_in < 10 and searched_in < 10, (stored_in, searched_in)
    assert query(db, "SELECT count(*) FROM memories") == [(1,)]


async def test_malformed_replies_are_an_error_not_a_crash(
    settings: Settings, db: Database, fake_ollama: FakeOllama
) -> None:
    fake_ollama.malformed = True
    async with connect(settings) as client:
        stored = await call(client, "store_memory", content="garbled reply")
        assert stored["embedding_status"] == "pending" and "could not be read" in stored["note"]
        fake_ollama.malformed = False
        await eventually(lambda: _async(embedded_count(db) == 1))


async def test_a_chat_model_configured_for_embeddings_is_refused_plainly(
    settings: Settings, fake_ollama: FakeOllama
) -> None:
    fake_ollama.models["qwen2.5:3b"] = FakeModel(capabilities=["completion", "tools"], family="qwen2")
    async with connect(replace(settings, embed_model="qwen2.5:3b")) as client:
        stored = await call(client, "store_memory", content="wrong kind of model")
    assert stored["embedding_status"] == "pending"
    assert "is not an embedding model" in stored["note"]


async def test_a_model_that_changes_dimension_is_never_mixed_into_the_ranking(
    settings: Settings, db: Database, fake_ollama: FakeOllama
) -> None:
    async with connect(settings) as client:
        first = await call(client, "store_memory", content="stored at the first dimension")
        assert first["embedding_dimension"] == 256
        fake_ollama.models["nomic-embed-text"].dim = 32  # same name, different model behind it
        second = await call(client, "store_memory", content="stored after the switch")
        assert second["embedding_status"] == "pending"
        assert "now returns 32-dimensional vectors" in second["note"]
        found = await call(client, "search_memories", query="stored after the switch")
        assert found["mode"] == "keyword" and "32-dimensional" in found["notice"]
        assert {h["content"] for h in found["results"]} >= {"stored after the switch"}
    assert query(db, "SELECT DISTINCT dim FROM memory_embeddings") == [(256,)]


async def test_switching_the_configured_model_re_embeds_everything_under_the_new_model(
    settings: Settings, db: Database, fake_ollama: FakeOllama
) -> None:
    async with connect(settings) as client:
        for text in ("alpha memory", "beta memory", "gamma memory"):
            await call(client, "store_memory", content=text)
        await eventually(lambda: _async(query(  # in-context vectors follow in the background
            db, "SELECT count(*) FROM memory_embeddings WHERE model = 'nomic-embed-text'")[0][0] == 6))
    fake_ollama.models["all-minilm"] = FakeModel(dim=32, family="bert")
    async with connect(replace(settings, embed_model="all-minilm")) as client:
        await eventually(lambda: _async(query(
            db, "SELECT count(*) FROM memory_embeddings WHERE model = 'all-minilm'")[0][0] == 6))
        found = await call(client, "search_all_conversations", query="beta memory")
        assert found["mode"] == "hybrid" and found["results"][0]["content"] == "beta memory"
    assert query(db, "SELECT model, dim, count(*) FROM memory_embeddings GROUP BY model, dim ORDER BY model") == [
        ("all-minilm", 32, 6), ("nomic-embed-text", 256, 6),  # a content and a context vector each
    ]


async def _async(value: Any) -> Any:
    return value


async def _search_mode(client: Any, text: str, mode: str) -> dict[str, Any] | None:
    found = await call(client, "search_memories", query=text)
    return found if found["mode"] == mode else None


async def test_while_ollama_is_failing_a_store_does_not_wait_on_it_again(
    settings: Settings, fake_ollama: FakeOllama
) -> None:
    fake_ollama.delay = 3.0  # beyond the 2 s timeout
    async with open_app(settings, background=False) as app:  # no backfill probing in between
        first = await app.memories.store(new_note("first while slow"))
        assert first.embedding_status == "pending"
        asked = len(fake_ollama.requests)
        second = await app.memories.store(new_note("second while slow"))
        assert second.embedding_status == "pending" and "did not answer within 2 s" in (second.embedding_note or "")
        assert len(fake_ollama.requests) == asked  # it did not ask Ollama at all
        fake_ollama.delay = 0.0
        assert await app.indexer.backfill_once() == 2  # the backfill is what tries again
        third = await app.memories.store(new_note("third, Ollama is back"))
        assert third.embedding_status == "embedded"


async def test_the_backfill_backs_off_while_ollama_fails_instead_of_asking_again_at_once(
    settings: Settings, fake_ollama: FakeOllama
) -> None:
    fake_ollama.fail = (503, "server busy")
    async with open_app(replace(settings, backfill_max_delay=30.0)) as app:
        conversation = await app.conversations.start(new_conversation("outage"))
        stored = await app.memories.store(new_note("a note written while Ollama fails", conversation.id))
        assert stored.embedding_status == "pending"
        before = len(fake_ollama.requests)
        await anyio.sleep(2.5)  # the backoff is the behaviour under test: 1 s, then 2 s
        retries = len(fake_ollama.requests) - before
    assert 1 <= retries <= 3, f"{retries} requests to Ollama in 2.5 s while it failed"


async def test_a_redirect_from_a_plain_http_ollama_address_is_not_followed_and_names_the_fix(
    settings: Settings, fake_ollama: FakeOllama
) -> None:
    fake_ollama.fail = (301, "moved")
    async with open_app(settings, background=False) as app:
        stored = await app.memories.store(new_note("a note behind a redirecting proxy"))
    assert stored.embedding_status == "pending"
    assert "redirect (HTTP 301)" in (stored.embedding_note or "") and "set OLLAMA_HOST" in (stored.embedding_note or "")
    assert len(fake_ollama.requests) == 1  # asked once, not led around a loop

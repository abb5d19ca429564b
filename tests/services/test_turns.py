"""A client records its own turns (add_messages) and pages them back (the history resource), through the
real MCP client on both storage backends: order, one transaction, retries, the current
conversation, and what search, export, build_context and compaction make of the turns."""

from __future__ import annotations

import json
from typing import Any

import anyio
import pytest
from mcp import types
from mcp.shared.exceptions import MCPError

from ollama_mcp.app import App
from ollama_mcp.config import Settings
from ollama_mcp.errors import InvalidInputError
from ollama_mcp.inputs.context import history_request
from ollama_mcp.inputs.conversations import new_conversation
from ollama_mcp.inputs.search import search_request
from ollama_mcp.inputs.turns import parse_turns
from tests.conftest import Database, backfill, connect
from tests.support.fake_ollama import FakeOllama
from tests.support.mcp_client import call, error

pytestmark = pytest.mark.anyio

TURNS: list[dict[str, Any]] = [
    {"role": "user", "content": "Which port does the staging proxy listen on?", "actor": "dana"},
    {"role": "assistant", "content": "Let me look it up.", "tool_calls": [
        {"function": {"name": "read_config", "arguments": {"file": "proxy.toml"}}}]},
    {"role": "tool", "content": "listen = 8443", "tool_call_id": "call-1"},
    {"role": "assistant", "content": "The staging proxy listens on port 8443."},
]


def _text(result: types.ReadResourceResult) -> str:
    return result.contents[0].text


def transcript(db: Database) -> list[tuple[Any, ...]]:
    return db.rows("SELECT role, actor, content, tool_call_id FROM memories WHERE kind = 'message' ORDER BY seq")


async def test_turns_are_recorded_in_order_and_paged_back_oldest_first(settings: Settings, db: Database) -> None:
    async with connect(settings) as mcp:
        conversation = (await call(mcp, "init_conversation", name="proxy"))["conversation_id"]
        added = await call(mcp, "add_messages", messages=TURNS, conversation_id=conversation)
        assert added["conversation_id"] == conversation and len(added["message_ids"]) == 4
        assert added["duplicate"] is False
        more = await call(mcp, "add_messages", messages=[
            {"role": "user", "content": "And production?"}, {"role": "assistant", "content": "Port 443."}])

        # The history resource pages backwards, 50 messages a page, oldest first on each.
        await call(mcp, "add_messages", messages=[
            {"role": "user" if i % 2 == 0 else "assistant", "content": f"turn {i}"} for i in range(50)])
        latest = _text(await mcp.read_resource(f"memory://conversations/{conversation}/history"))
        lines = [line for line in latest.splitlines() if line.startswith("- ")]
        assert [line.rsplit(": ", 1)[1] for line in lines] == [f"turn {i}" for i in range(50)]
        earlier_link = latest.strip().splitlines()[-1]
        assert earlier_link.startswith(f"Earlier: memory://conversations/{conversation}/history/before/")
        earlier = _text(await mcp.read_resource(earlier_link.removeprefix("Earlier: ")))
        lines = [line for line in earlier.splitlines() if line.startswith("- ")]
        assert [line.rsplit(": ", 1)[1] for line in lines] == [
            TURNS[0]["content"],
            "Let me look it up.",
            "listen = 8443",
            TURNS[3]["content"],
            "And production?",
            "Port 443.",
        ]
        assert " · user (dana) · " + added["message_ids"][0] in lines[0]
        assert more["message_ids"][1] in lines[-1] and "Earlier:" not in earlier
    assert transcript(db)[:6] == [
        ("user", "dana", TURNS[0]["content"], None), ("assistant", None, "Let me look it up.", None),
        ("tool", None, "listen = 8443", "call-1"), ("assistant", None, TURNS[3]["content"], None),
        ("user", None, "And production?", None), ("assistant", None, "Port 443.", None)]
    calls = db.rows("SELECT tool_calls FROM memories WHERE role = 'assistant' ORDER BY seq LIMIT 1")[0][0]
    assert (json.loads(calls) if isinstance(calls, str) else calls) == TURNS[1]["tool_calls"]
    # One write record for each batch, in the same transaction as its turns.
    assert db.rows("SELECT action, conversation_id FROM write_audit WHERE action = 'add_messages'") == [
        ("add_messages", conversation)] * 3


async def test_the_same_turns_sent_again_are_a_retry_and_are_kept_once(settings: Settings, db: Database) -> None:
    async with connect(settings) as mcp:
        first = await call(mcp, "add_messages", messages=TURNS[:2])
        again = await call(mcp, "add_messages", messages=TURNS[:2], conversation_id=first["conversation_id"])
        assert again["duplicate"] is True and again["message_ids"] == first["message_ids"]
        assert len(transcript(db)) == 2
        # The same words later in a conversation, after other turns, are turns of their own.
        await call(mcp, "add_messages", messages=[{"role": "user", "content": "thanks"}])
        repeated = await call(mcp, "add_messages", messages=TURNS[:2])
        assert repeated["duplicate"] is False and repeated["message_ids"] != first["message_ids"]
        # A batch that is only part of the latest turns is not a retry either.
        part = await call(mcp, "add_messages", messages=TURNS[1:2])
        assert part["duplicate"] is False
    assert [row[2] for row in transcript(db)] == [
        TURNS[0]["content"],
        "Let me look it up.",
        "thanks",
        TURNS[0]["content"],
        "Let me look it up.",
        "Let me look it up.",
    ]


async def test_turns_without_a_conversation_start_one_and_are_found_exported_and_built_into_context(
    settings: Settings, db: Database
) -> None:
    async with connect(settings) as mcp:
        added = await call(mcp, "add_messages", messages=TURNS)
        conversation = added["conversation_id"]
        assert (await call(mcp, "get_conversation_id"))["current"]["conversation_id"] == conversation
        assert (await call(mcp, "search_memories", query="staging proxy port", kind="note"))["results"] == []
        found = await call(mcp, "search_memories", query="staging proxy port")
        assert added["message_ids"][3] in {hit["memory_id"] for hit in found["results"]}
        exported = (await call(mcp, "export_conversation"))["markdown"]
        assert "listens on port 8443" in exported and "dana" in exported
        prompt = await mcp.get_prompt("build_context", {"conversation_id": conversation, "token_budget": "2000"})
        texts = [m.content.text for m in prompt.messages]
        assert texts[0] == TURNS[0]["content"] and texts[-1] == TURNS[3]["content"]
    assert db.count("SELECT count(*) FROM conversations WHERE anonymous = ?", True) == 1


async def test_a_long_recorded_transcript_is_queued_for_compaction(settings: Settings, db: Database) -> None:
    async with connect(settings) as mcp:
        conversation = (await call(mcp, "init_conversation", metadata={"compact_after_messages": 4}))["conversation_id"]
        await call(mcp, "add_messages", messages=TURNS, conversation_id=conversation)
        assert db.count("SELECT count(*) FROM jobs WHERE kind = 'compact'") == 0  # at the threshold, not past it
        await call(
            mcp, "add_messages", messages=[{"role": "user", "content": "one more"}], conversation_id=conversation
        )
        assert db.rows("SELECT kind, conversation_id FROM jobs WHERE kind = 'compact'") == [("compact", conversation)]


async def test_bad_turns_are_refused_naming_the_turn_and_the_field_and_nothing_is_kept(
    settings: Settings, db: Database
) -> None:
    long_text = "x" * (settings.max_content_chars + 1)
    async with connect(settings) as mcp:
        conversation = (await call(mcp, "init_conversation", name="target"))["conversation_id"]
        for messages, expected in (
            ([], "messages: must be a non-empty list of turns"),
            ([{"role": "user", "content": "hi"}] * 101, "messages: holds 101 turns, more than 100"),
            (["hi"], "messages[0]: should be a valid dictionary (got 'hi')"),  # the SDK checks the shape first
            ([{"role": "user", "content": "ok"}, {"role": "bot", "content": "hi"}], "messages[1].role: must be one of"),
            ([{"role": "user"}], "messages[0].content:"),
            ([{"role": "user", "content": "   "}], "messages[0].content:"),
            ([{"role": "user", "content": long_text}], "messages[0].content:"),
            ([{"role": "user", "content": "hi", "speaker": "me"}], "messages[0].speaker: is not a field of a turn"),
            (
                [{"role": "assistant", "content": "hi", "tool_calls": "read_config"}],
                "messages[0].tool_calls: must be a list",
            ),
            ([{"role": "tool", "content": "hi", "tool_call_id": ""}], "messages[0].tool_call_id: must be a text"),
            ([{"role": "user", "content": "hi", "actor": "a" * 201}], "messages[0].actor: is longer than 200"),
            ([{"role": "user", "content": "hi", "to": {"lee": 1}}], "messages[0].to: must be a list of 1-20 names"),
            ([{"role": "user", "content": "hi", "to": ["lee", 7]}], "messages[0].to[1]: must be"),
        ):
            text = await error(mcp, "add_messages", messages=messages, conversation_id=conversation)
            assert expected in text, (messages[:2], text)
        assert "conversation_id:" in await error(mcp, "add_messages", messages=TURNS, conversation_id="nope")
        other = (await call(mcp, "init_conversation", name="other"))["conversation_id"]
        kept = await call(mcp, "add_messages", messages=TURNS[:1], conversation_id=other)
        with pytest.raises(MCPError, match="before: is not a message of this conversation"):
            await mcp.read_resource(f"memory://conversations/{conversation}/history/before/{kept['message_ids'][0]}")
        await call(mcp, "end_conversation", conversation_id=other, summary="done")
        assert "has ended" in await error(mcp, "add_messages", messages=TURNS, conversation_id=other)
    assert [row[2] for row in transcript(db)] == [TURNS[0]["content"]]


ROOM: list[dict[str, Any]] = [
    {"role": "user", "actor": "dana", "content": "Let us plan the offsite in Lisbon for March."},
    {"role": "user", "actor": "lee", "content": "I am in; I will book the venue near the river."},
    {"role": "assistant", "content": "Noted for both of you: Lisbon offsite in March, venue by the river."},
    {"role": "user", "actor": "dana", "to": ["assistant"], "content": "Between us: the offsite budget is 5k euros."},
    {"role": "assistant", "to": ["dana"], "content": "Understood, the 5k euro budget stays between us."},
]


def prompt_texts(prompt: object) -> list[str]:
    return [m.content.text for m in prompt.messages]  # type: ignore[attr-defined]


async def test_a_shared_transcript_lists_its_participants_and_gives_each_their_own_view(
    settings: Settings, db: Database
) -> None:
    async with connect(settings) as mcp:
        conversation = (await call(mcp, "add_messages", messages=ROOM))["conversation_id"]
        history = _text(await mcp.read_resource(f"memory://conversations/{conversation}/history"))
        assert "Participants: dana (user, 2), lee (user, 1), assistant (2)" in history
        assert "user (dana) → assistant · " in history

        # lee's view: the open turns, not what dana and the assistant said to each other only;
        # and no rolling summary, which could retell those turns.
        lee = prompt_texts(await mcp.get_prompt(
            "build_context", {"conversation_id": conversation, "participants": "lee"}))
        assert lee == [ROOM[0]["content"], ROOM[1]["content"], ROOM[2]["content"]]
        dana = prompt_texts(await mcp.get_prompt(
            "build_context", {"conversation_id": conversation, "participants": "dana"}))
        assert dana == [turn["content"] for turn in ROOM]
        everyone = prompt_texts(await mcp.get_prompt("build_context", {"conversation_id": conversation}))
        assert everyone == dana
        with pytest.raises(MCPError, match="participants: names 'zed', who neither wrote .* pass participants it has "
                                           r"\(actors, or roles for turns without one\): assistant, dana, lee"):
            await mcp.get_prompt("build_context", {"conversation_id": conversation, "participants": "zed"})
        with pytest.raises(MCPError, match="token_budget: must be a whole number of tokens; pass e.g. 4000"):
            await mcp.get_prompt("build_context", {"conversation_id": conversation, "token_budget": "lots"})

        # Search by participant: their turns only (messages are searched without being asked for).
        found = await call(mcp, "search_memories", query="offsite Lisbon venue budget", actor="lee", top_k=10)
        assert [hit["content"] for hit in found["results"]] == [ROOM[1]["content"]]
        found = await call(mcp, "search_memories", query="offsite budget", actor="dana", top_k=10)
        assert {hit["content"] for hit in found["results"]} <= {ROOM[0]["content"], ROOM[3]["content"]}
        assert ROOM[3]["content"] in {hit["content"] for hit in found["results"]}
        found = await call(mcp, "search_memories", query="offsite", actor="assistant", top_k=10)
        assert {hit["content"] for hit in found["results"]} == {ROOM[2]["content"], ROOM[4]["content"]}
        assert "actor: is longer than 200" in await error(mcp, "search_memories", query="x", actor="a" * 201)
    stored = db.rows("SELECT metadata FROM memories WHERE content = ?", ROOM[3]["content"])[0][0]
    assert (json.loads(stored) if isinstance(stored, str) else stored) == {"to": ["assistant"]}


async def test_a_view_of_a_transcript_with_private_turns_leaves_out_the_rolling_summary(
    settings: Settings, db: Database
) -> None:
    async with connect(settings) as mcp:
        conversation = (await call(mcp, "add_messages", messages=ROOM[:3]))["conversation_id"]
        # From a worker thread: a write on this thread would block the event loop the server's
        # background writes (committed through it) run on, and wait for them until "locked".
        await anyio.to_thread.run_sync(
            db.rows, "UPDATE conversations SET rolling_summary = ? WHERE id = ?", "They chose Lisbon.", conversation
        )
        with_summary = prompt_texts(await mcp.get_prompt(
            "build_context", {"conversation_id": conversation, "participants": "lee"}))
        assert with_summary[0].endswith("They chose Lisbon.")  # no private turn yet: lee may read it
        await call(mcp, "add_messages", messages=ROOM[3:], conversation_id=conversation)
        lee = prompt_texts(await mcp.get_prompt(
            "build_context", {"conversation_id": conversation, "participants": "lee"}))
        assert lee == [ROOM[0]["content"], ROOM[1]["content"], ROOM[2]["content"]]
        dana = prompt_texts(await mcp.get_prompt("build_context", {"conversation_id": conversation}))
        assert dana[0].endswith("They chose Lisbon.")  # the whole transcript's reader gets it
        # Nor is a summary memory that may retell a private turn recalled into the view.
        await call(mcp, "end_conversation", conversation_id=conversation, summary="Offsite budget: 5k euros, private.")
        asked = {"conversation_id": conversation, "query": "offsite budget euros"}
        assert not any("5k euros, private" in text for text in prompt_texts(
            await mcp.get_prompt("build_context", {**asked, "participants": "lee"})))
        assert any("5k euros, private" in text for text in prompt_texts(await mcp.get_prompt("build_context", asked)))


async def test_a_turns_tokens_model_and_adapter_are_kept_and_bad_ones_are_refused_naming_them(app: App) -> None:
    conv = await app.conversations.start(new_conversation("usage"))
    [stored], _ = await app.transcript.add_messages(conv.id, parse_turns("messages", [{
        "role": "assistant", "content": "Done.", "tokens": {"prompt": 10, "completion": 2}, "model": "qwen2.5:7b",
        "adapter": "ollama",
    }]))
    assert stored.metadata == {"tokens": {"prompt": 10, "completion": 2}, "model": "qwen2.5:7b", "adapter": "ollama"}
    bad: list[tuple[dict[str, Any], str]] = [
        ({"tokens": {"prompt": 1.5}}, "messages[0].tokens.prompt"), ({"tokens": {"cached": 1}}, "messages[0].tokens"),
        ({"tokens": {}}, "messages[0].tokens"), ({"model": " "}, "messages[0].model"),
        ({"adapter": "x" * 201}, "messages[0].adapter"),
    ]
    for turn, field in bad:
        with pytest.raises(InvalidInputError) as refused:
            await app.transcript.add_messages(
                conv.id, parse_turns("messages", [{"role": "assistant", "content": "again", **turn}])
            )
        assert refused.value.field == field
    assert len(await app.transcript.history(history_request(conv.id))) == 1


async def test_an_edited_turns_old_text_leaves_the_keyword_index_and_the_next_turns_context(
    app: App, db: Database
) -> None:
    conv = await app.conversations.start(new_conversation("edits"))
    [first, second], _ = await app.transcript.add_messages(conv.id, parse_turns("messages", [
        {"role": "user", "content": "The code word is pelican"}, {"role": "assistant", "content": "Noted."}]))
    await backfill(app)
    assert db.keyword_matches("content", "pelican") == 1 and db.keyword_matches("context", "pelican") == 2
    revised = await app.transcript.revise_turn(first.id, "The code word is heron")
    assert (revised.id, revised.seq, revised.content) == (first.id, first.seq, "The code word is heron")
    assert db.keyword_matches("content", "pelican") == 0 and db.keyword_matches("context", "pelican") == 0
    assert db.keyword_matches("context", "heron") == 2  # its own, and the reply's
    assert db.count("SELECT count(*) FROM memory_embeddings WHERE memory_seq = ?", first.seq) == 0  # re-embedded later
    assert revised.metadata["earlier_versions"] == [{"content": "The code word is pelican",
                                                      "written_at": first.created_at}]
    await backfill(app)
    found = await app.recall.search(search_request("code word heron"))
    assert first.id in [h.memory.id for h in found.hits]  # by its new text (the reply's context holds it too)


async def test_recorded_turns_have_their_own_vectors_when_add_messages_returns_and_their_contexts_follow(
    app: App, db: Database, fake_ollama: FakeOllama
) -> None:
    first = [{"role": "user", "content": "The staging proxy listens on port 8443."}]
    added, _ = await app.transcript.add_messages(None, parse_turns("messages", first))
    before = len(fake_ollama.embed_requests())
    more = [{"role": "assistant", "content": "Noted."}, {"role": "user", "content": "And the database on 5432."}]
    await app.transcript.add_messages(added[0].conversation_id, parse_turns("messages", more))

    # one request for the two turns' own texts; no background ran (the app has none here)
    requests = fake_ollama.embed_requests()[before:]
    assert [len(r.body["input"]) for r in requests] == [2]
    assert all("5432" in text or "Noted" in text for text in requests[0].body["input"])
    facets = db.rows(
        "SELECT m.content, e.facet FROM memories m LEFT JOIN memory_embeddings e ON e.memory_seq = m.seq"
        " ORDER BY m.seq, e.facet"
    )
    assert facets == [
        (first[0]["content"], "content"), (first[0]["content"], "context"),  # its own context: both at once
        ("Noted.", "content"), ("And the database on 5432.", "content"),
    ]
    assert await app.indexer.pending_count() == 2  # the in-context vectors of the two: the background's
    await backfill(app)
    assert await app.indexer.pending_count() == 0


async def test_turns_recorded_while_ollama_fails_are_kept_and_pending_and_embedded_once_it_answers(
    app: App, db: Database, fake_ollama: FakeOllama
) -> None:
    fake_ollama.fail = (503, "server busy")
    added, retry = await app.transcript.add_messages(
        None, parse_turns("messages", [{"role": "user", "content": "The proxy is on 8443."}])
    )
    assert not retry and [m.content for m in added] == ["The proxy is on 8443."]
    assert db.rows("SELECT count(*) FROM memory_embeddings") == [(0,)]
    outcome = await app.recall.search(search_request("proxy", added[0].conversation_id))
    assert [hit.memory.id for hit in outcome.hits] == [added[0].id]
    assert outcome.mode == "keyword" and "503" in (outcome.notice or "")
    # while it is known to fail, the next turns do not wait for it
    before = len(fake_ollama.embed_requests())
    await app.transcript.add_messages(
        added[0].conversation_id, parse_turns("messages", [{"role": "assistant", "content": "Noted."}])
    )
    assert len(fake_ollama.embed_requests()) == before
    fake_ollama.fail = None
    await backfill(app)
    assert await app.indexer.pending_count() == 0

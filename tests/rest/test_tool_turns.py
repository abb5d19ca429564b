"""A chat app with tools (#80 item 6): an assistant turn that only calls tools is accepted as
OpenAI and Ollama send it (content null or empty, tool_calls set); what is handed back for a
model keeps tool_calls and tool_call_id, never an orphan tool turn; an export round trip keeps
them. Through the real HTTP server and MCP client, on both backends."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx2
import pytest

from ollama_mcp.cli import admin
from ollama_mcp.config import Settings
from ollama_mcp.rest.models import PREFIX
from tests.conftest import connect
from tests.support.http import serving
from tests.support.mcp_client import call

pytestmark = pytest.mark.anyio

CALL = {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Lisbon"}'}}
CHAT: list[dict[str, Any]] = [
    {"role": "user", "content": "What is the weather in Lisbon?"},
    {"role": "assistant", "content": None, "tool_calls": [CALL]},
    {"role": "tool", "tool_call_id": "call_1", "content": "18 degrees and sunny"},
    {"role": "assistant", "content": "It is 18 degrees and sunny in Lisbon."},
]


def openai_valid(messages: list[dict[str, Any]]) -> bool:
    """What OpenAI's chat API requires of a history: every tool turn answers a call an assistant
    turn before it made, and a turn with calls has content or says nothing (null)."""
    made: set[str] = set()
    for m in messages:
        if m["role"] == "assistant" and m.get("tool_calls"):
            made |= {c["id"] for c in m["tool_calls"]}
        if m["role"] == "tool" and m.get("tool_call_id") not in made:
            return False
        if m.get("content") is None and not m.get("tool_calls"):
            return False
    return True


@asynccontextmanager
async def chat_app(settings: Settings, name: str) -> AsyncIterator[tuple[httpx2.AsyncClient, str, str]]:
    """A chat app's client of the real HTTP server (its own token and person), the API's base
    address, and a new conversation's id."""
    _, secret = await admin.create_token(settings, name, name)
    async with serving(settings) as url, httpx2.AsyncClient(
        headers={"Authorization": f"Bearer {secret}"}, timeout=30
    ) as http:
        base = url.removesuffix("/mcp") + PREFIX
        conversation = (await http.post(base + "/conversations", json={"name": name})).json()["id"]
        yield http, base, conversation


async def test_a_tool_call_only_turn_is_recorded_and_handed_back_as_openai_takes_it(settings: Settings) -> None:
    async with chat_app(settings, "weather") as (http, base, conversation):
        for turn in CHAT:
            sent = {k: v for k, v in turn.items() if v is not None}
            added = await http.post(f"{base}/conversations/{conversation}/turns", json=sent)
            assert added.status_code == 201, added.text
        context = (await http.post(f"{base}/conversations/{conversation}/context",
                                   json={"token_budget": 1000, "recent_turns": 10})).json()["messages"]
        assert context[-4:] == [  # (null fields are left out, as everywhere in the API)
            {"role": "user", "content": "What is the weather in Lisbon?"},
            {"role": "assistant", "tool_calls": [CALL]},
            {"role": "tool", "content": "18 degrees and sunny", "tool_call_id": "call_1"},
            {"role": "assistant", "content": "It is 18 degrees and sunny in Lisbon."},
        ]
        assert openai_valid(context)
        # A window that starts after the call leaves its result out rather than hand back an orphan.
        cut = (await http.post(f"{base}/conversations/{conversation}/context",
                               json={"token_budget": 1000, "recent_turns": 2})).json()["messages"]
        assert [m["role"] for m in cut] == ["assistant"] and openai_valid(cut)
        found = (await http.post(f"{base}/conversations/{conversation}/recall", json={"query": "get_weather"})).json()
        assert any(h["content"] == "" for h in found["hits"])  # found by the call it made


async def test_mcp_records_a_tool_call_only_turn_and_an_export_round_trip_keeps_the_calls(
    settings: Settings,
) -> None:
    async with connect(settings) as client:
        added = await call(client, "add_messages", messages=[{k: v for k, v in t.items() if v is not None}
                                                             for t in CHAT])
        exported = await call(client, "export_conversation", conversation_id=added["conversation_id"], format="json")
        refused = await client.call_tool("add_messages", {"messages": [{"role": "user", "content": ""}]})
    turns = [m for m in exported["data"]["memories"] if m["kind"] == "message"]
    assert [(t["role"], t["content"], t.get("tool_calls"), t.get("tool_call_id")) for t in turns] == [
        ("user", "What is the weather in Lisbon?", None, None),
        ("assistant", "", [CALL], None),
        ("tool", "18 degrees and sunny", None, "call_1"),
        ("assistant", "It is 18 degrees and sunny in Lisbon.", None, None),
    ]
    assert refused.is_error and "messages[0].content" in refused.content[0].text


async def test_a_turn_carries_the_apps_own_metadata_through_rest_and_mcp(settings: Settings) -> None:
    async with chat_app(settings, "meta") as (http, base, conversation):
        sent = {"role": "user", "content": "hello", "metadata": {"message_id": "m-17", "client": {"v": 3}}}
        added = (await http.post(f"{base}/conversations/{conversation}/turns", json=sent)).json()
        assert added["metadata"] == {"message_id": "m-17", "client": {"v": 3}}
        listed = (await http.get(f"{base}/conversations/{conversation}/turns")).json()["turns"]
        assert listed[0]["metadata"] == {"message_id": "m-17", "client": {"v": 3}}
        bad = await http.post(f"{base}/conversations/{conversation}/turns",
                              content='{"role": "user", "content": "x", "metadata": {"deep": {"a": 1e400}}}',
                              headers={"content-type": "application/json"})
        assert bad.status_code == 400 and bad.json()["field"] == "metadata", bad.text
    async with connect(settings) as client:
        added = await call(client, "add_messages", messages=[{"role": "user", "content": "hi", "metadata": {"k": 1}}])
        exported = await call(client, "export_conversation", conversation_id=added["conversation_id"], format="json")
        refused = await client.call_tool("add_messages", {"messages": [{"role": "user", "content": "x",
                                                                        "metadata": "not an object"}]})
    (turn,) = [m for m in exported["data"]["memories"] if m["kind"] == "message"]
    assert turn["metadata"] == {"app": {"k": 1}}
    assert refused.is_error and "messages[0].metadata: must be a JSON object" in refused.content[0].text

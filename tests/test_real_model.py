"""A real small chat model end to end (opt-in, #84): a summary, a fact extraction and one ask_agent
question through MCP, against an Ollama API serving a real model. CI has no weights: the test is
skipped, with its reason, unless OLLAMA_MCP_TEST_MODEL_HOST names such a server (bench/README.md:
``python bench/local_model.py serve --port 18600`` serves Qwen2.5-Coder 1.5B and MiniLM).

    OLLAMA_MCP_TEST_MODEL_HOST=http://127.0.0.1:18600 python -m pytest tests/test_real_model.py -p no:randomly
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from mcp import Client

from ollama_mcp.app import open_app
from ollama_mcp.config import Settings
from ollama_mcp.inputs.conversations import new_conversation
from ollama_mcp.inputs.turns import parse_turns
from ollama_mcp.mcp.server import build_server
from tests.support.mcp_client import call

HOST = os.environ.get("OLLAMA_MCP_TEST_MODEL_HOST")
MODEL = os.environ.get("OLLAMA_MCP_TEST_MODEL", "qwen2.5-coder:1.5b")

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.timeout(900),
    pytest.mark.skipif(HOST is None, reason=(
        "no real model server: set OLLAMA_MCP_TEST_MODEL_HOST to an Ollama API serving qwen2.5-coder:1.5b and "
        "all-minilm (python bench/local_model.py serve)")),
]

CHAT = [
    ("Caroline", "I finally moved to Boston in May, the flat is near the river."),
    ("Melanie", "That's great! How is the new job going?"),
    ("Caroline", "I work as a nurse at Mass General now, night shifts for the first months."),
    ("Melanie", "Night shifts sound hard. Are you still painting?"),
    ("Caroline", "Yes, I painted a sunrise over the Charles last week."),
    ("Melanie", "I'd love to see it. I'm taking the kids camping in June."),
]


def real_settings(folder: Path) -> Settings:
    return Settings.from_env({
        "OLLAMA_HOST": str(HOST), "OLLAMA_MCP_DB": str(folder / "memory.db"), "OLLAMA_MCP_EMBED_MODEL": "all-minilm",
        "OLLAMA_MCP_CHAT_MODEL": MODEL, "OLLAMA_MCP_CHAT_TIMEOUT": "300", "OLLAMA_MCP_AGENT_DEADLINE": "300",
    })


async def test_a_real_model_summarizes_extracts_facts_and_answers_from_memory(tmp_path: Path) -> None:
    settings = real_settings(tmp_path)
    async with open_app(settings, background=False) as app:
        conv = await app.conversations.start(new_conversation("catching up", {"facts": True}))
        await app.transcript.add_messages(conv.id, parse_turns("messages", [
            {"role": "user", "content": text, "actor": who} for who, text in CHAT]))
        await app.conversations.end(conv.id)
        while await app.jobs.run_once():
            pass
        while await app.indexer.backfill_once():
            pass
    async with Client(build_server(settings)) as client:
        summaries = await call(client, "search_memories", query="Boston", conversation_id=conv.id, kind="summary")
        facts = await call(client, "search_memories", query="Boston", conversation_id=conv.id, kind="fact")
        await call(client, "init_conversation", name="asking")
        answer = await call(client, "ask_agent", query="Where did Caroline move to?", scope="all")
    # The summary was written (valid under its schema, within its token cap) and says where she moved.
    assert len(summaries["results"]) == 1 and "Boston" in summaries["results"][0]["content"], summaries
    assert facts["results"], facts  # at least one fact extracted from the chat
    assert answer["tools_used"][0] == "search_all_conversations" and "Boston" in answer["response"], answer

"""The MCP Inspector CLI, a client nobody on this team wrote, against the installed ``ollama-mcp``.

Its exit codes are the assertion (0 ok, 5 the tool returned isError). It is installed from npm
as the README says (``npm install --no-save @modelcontextprotocol/inspector@2.12.0``); without
it these tests are skipped locally, and fail in CI (``CI`` set), where .ci/run installs it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.support.fake_ollama import FakeOllama

ROOT = Path(__file__).resolve().parents[2]
INSPECTOR = Path(os.environ.get("OLLAMA_MCP_INSPECTOR", ROOT / "node_modules" / ".bin" / "mcp-inspector"))
SERVER = Path(sys.executable).parent / "ollama-mcp"

pytestmark = pytest.mark.slow  # each call starts Node and a server

if not INSPECTOR.exists():
    if os.environ.get("CI"):
        raise RuntimeError(f"the MCP Inspector CLI is missing at {INSPECTOR}; .ci/run must install it (see README)")
    pytest.skip("MCP Inspector CLI not installed (npm install --no-save @modelcontextprotocol/inspector@2.12.0)",
                allow_module_level=True)


def inspect(db: Path, fake: FakeOllama, *args: str, expect: int = 0) -> Any:
    command = [str(INSPECTOR), "--cli", str(SERVER), "-e", f"OLLAMA_HOST={fake.url}", "-e", f"OLLAMA_MCP_DB={db}",
               *args]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, cwd="/")
    assert done.returncode == expect, (done.returncode, done.stdout[-2000:], done.stderr[-2000:])
    start = done.stdout.index("{")  # the server's log lines go to stderr; stdout is the JSON result
    return json.JSONDecoder().raw_decode(done.stdout[start:])[0]


def tool(db: Path, fake: FakeOllama, tool_name: str, expect: int = 0, **arguments: Any) -> dict[str, Any]:
    result = inspect(db, fake, "--method", "tools/call", "--tool-name", tool_name,
                     "--tool-args-json", json.dumps(arguments), expect=expect)
    return result if expect else result["structuredContent"]


def test_the_inspector_cli_lists_every_tool_and_stores_searches_and_reads_a_memory(
    db_path: Path, fake_ollama: FakeOllama
) -> None:
    listed = inspect(db_path, fake_ollama, "--method", "tools/list")
    assert {t["name"] for t in listed["tools"]} == {
        "init_conversation", "get_conversation_id", "store_memory", "search_memories",
        "search_all_conversations", "end_conversation", "list_conversations", "delete_memory",
        "update_memory", "export_conversation", "ask_agent", "delete_conversation", "add_messages", "read_memory",
    }
    # each Inspector call is a new server process: ids are passed explicitly
    conv = tool(db_path, fake_ollama, "init_conversation", name="inspector")["conversation_id"]
    stored = tool(db_path, fake_ollama, "store_memory", content="The Inspector stored this", conversation_id=conv)
    assert stored["embedding_status"] == "embedded"
    found = tool(db_path, fake_ollama, "search_memories", query="inspector stored", conversation_id=conv, top_k=3)
    assert found["results"][0]["memory_id"] == stored["memory_id"] and found["mode"] == "hybrid"
    assert tool(db_path, fake_ollama, "search_all_conversations", query="stored")["results"]
    read = tool(db_path, fake_ollama, "read_memory", memory_id=stored["memory_id"])
    assert (read["content"], read["pages"]) == ("The Inspector stored this", 1)
    assert tool(db_path, fake_ollama, "get_conversation_id")["current"] is None  # a fresh process
    listed_conversations = tool(db_path, fake_ollama, "list_conversations", status="active")["conversations"]
    assert [c["conversation_id"] for c in listed_conversations] == [conv]


# Each Inspector call starts Node and a server: 17 in one test took 55-62 s on a loaded machine, half
# the suite's per-test timeout (#80 item 12). The calls that change a stored memory have tests of
# their own, which run beside the others.


def _stored(db_path: Path, fake: FakeOllama) -> tuple[str, dict[str, Any]]:
    conv = tool(db_path, fake, "init_conversation", name="inspector")["conversation_id"]
    return conv, tool(db_path, fake, "store_memory", content="The Inspector stored this", conversation_id=conv)


def test_the_inspector_cli_updates_and_exports_a_memory(db_path: Path, fake_ollama: FakeOllama) -> None:
    conv, stored = _stored(db_path, fake_ollama)
    updated = tool(
        db_path, fake_ollama, "update_memory", memory_id=stored["memory_id"], content="The Inspector fixed this"
    )
    assert updated["previous_id"] == stored["memory_id"] and updated["memory_id"] != stored["memory_id"]
    exported = tool(db_path, fake_ollama, "export_conversation", conversation_id=conv)
    assert (
        "The Inspector fixed this" in exported["markdown"]
        and f"replaced by {updated['memory_id']}" in exported["markdown"]
    )


def test_the_inspector_cli_asks_the_agent_ends_deletes_and_is_refused_a_bad_argument(
    db_path: Path, fake_ollama: FakeOllama
) -> None:
    conv, stored = _stored(db_path, fake_ollama)
    # The fake chat model answers from the memory without calling tools: one step, question and answer saved.
    fake_ollama.enqueue_chat("It stored this.")
    asked = tool(db_path, fake_ollama, "ask_agent", query="what did the Inspector store?", conversation_id=conv)
    assert (asked["response"], asked["steps"], asked["conversation_id"]) == ("It stored this.", 1, conv)
    ended = tool(db_path, fake_ollama, "end_conversation", conversation_id=conv)
    assert ended["status"] == "completed" and ended["summary_status"] == "pending"
    assert tool(db_path, fake_ollama, "delete_memory", memory_id=stored["memory_id"])["deleted"] is True
    forgotten = tool(db_path, fake_ollama, "delete_conversation", conversation_id=conv)
    assert forgotten["deleted"] is True and forgotten["memories_deleted"] >= 2  # the agent's question and answer
    refused = tool(db_path, fake_ollama, "search_memories", expect=5, query="x", top_k=0)
    assert refused["isError"] is True and "top_k" in refused["content"][0]["text"]


def test_the_inspector_cli_reads_resources_and_gets_the_context_prompt(db_path: Path, fake_ollama: FakeOllama) -> None:
    conv = tool(db_path, fake_ollama, "init_conversation", name="resourceful")["conversation_id"]
    tool(db_path, fake_ollama, "store_memory", content="Resources list conversations", conversation_id=conv)
    listed = inspect(db_path, fake_ollama, "--method", "resources/list")["resources"]
    assert [r["uri"] for r in listed] == ["memory://conversations"]
    index = inspect(db_path, fake_ollama, "--method", "resources/read", "--uri", "memory://conversations")
    assert f"memory://conversations/{conv}) · active · 1 memory ·" in index["contents"][0]["text"]  # not "1 memories"
    page = inspect(db_path, fake_ollama, "--method", "resources/read", "--uri", f"memory://conversations/{conv}")
    assert (
        "# resourceful" in page["contents"][0]["text"] and "Resources list conversations" in page["contents"][0]["text"]
    )
    templates = inspect(db_path, fake_ollama, "--method", "resources/templates/list")["resourceTemplates"]
    assert {t["uriTemplate"] for t in templates} == {
        "memory://conversations/{conversation_id}", "memory://conversations/{conversation_id}/page/{page}",
        "memory://conversations/{conversation_id}/history",
        "memory://conversations/{conversation_id}/history/before/{message_id}",
        "memory://conversations/{conversation_id}/relations",
    }
    prompts = inspect(db_path, fake_ollama, "--method", "prompts/list")["prompts"]
    assert [p["name"] for p in prompts] == ["build_context"]
    got = inspect(db_path, fake_ollama, "--method", "prompts/get", "--prompt-name", "build_context",
                  "--prompt-args", f"conversation_id={conv}", "token_budget=2000", "query=what do resources list")
    assert "Resources list conversations" in json.dumps(got["messages"])


def test_the_inspector_cli_runs_the_server_from_a_claude_desktop_config(
    db_path: Path, fake_ollama: FakeOllama, tmp_path: Path
) -> None:
    config = json.loads((ROOT / "claude_desktop_config.example.json").read_text())
    server = config["mcpServers"]["memory"]
    server["command"] = str(SERVER)
    server["env"].update({"OLLAMA_HOST": fake_ollama.url, "OLLAMA_MCP_DB": str(db_path)})
    path = tmp_path / "claude_desktop_config.json"
    path.write_text(json.dumps(config))
    done = subprocess.run(
        [str(INSPECTOR), "--cli", "--config", str(path), "--server", "memory", "--method", "tools/call",
         "--tool-name", "store_memory", "--tool-arg", "content=configured via claude_desktop_config.json"],
        capture_output=True, text=True, timeout=120, cwd="/",
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert '"embedding_status": "embedded"' in done.stdout

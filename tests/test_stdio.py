"""The real ``ollama-mcp`` process over stdio, started the way Claude Desktop starts it: working
directory ``/``, a minimal environment, sometimes two copies on one database at once."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client, StdioServerParameters

from tests.fake_ollama import FakeOllama
from tests.test_tools import call

pytestmark = pytest.mark.anyio

SCRIPT = Path(sys.executable).parent / "ollama-mcp"


def server_env(db: Path | str, fake: FakeOllama) -> dict[str, str]:
    """The environment Claude Desktop gives the server; ``db``: a SQLite path or a PostgreSQL URL."""
    return {"OLLAMA_HOST": fake.url, "OLLAMA_MCP_DB": str(db), "OLLAMA_MCP_EMBED_TIMEOUT": "5"}


def stdio(db: Path | str, fake: FakeOllama, command: list[str] | None = None) -> StdioServerParameters:
    command = command or [sys.executable, "-m", "ollama_mcp"]
    return StdioServerParameters(command=command[0], args=command[1:], env=server_env(db, fake), cwd="/")


@pytest.mark.parametrize("command", [[str(SCRIPT)], [sys.executable, "-m", "ollama_mcp"]], ids=["script", "module"])
async def test_the_installed_server_stores_and_searches_over_stdio_from_cwd_root(
    db_path: Path, fake_ollama: FakeOllama, command: list[str]
) -> None:
    async with Client(stdio(db_path, fake_ollama, command), mode="legacy") as client:
        await call(client, "init_conversation", name="stdio")
        stored = await call(client, "store_memory", content="spawned over stdio")
        assert stored["embedding_status"] == "embedded"
        found = await call(client, "search_memories", query="spawned")
        assert found["results"][0]["memory_id"] == stored["memory_id"]
    with sqlite3.connect(db_path) as conn:
        assert conn.execute("SELECT content FROM memories").fetchall() == [("spawned over stdio",)]


def _rpc(proc: subprocess.Popen[bytes], message: dict[str, Any]) -> None:
    assert proc.stdin is not None
    proc.stdin.write(json.dumps(message).encode() + b"\n")
    proc.stdin.flush()


def _read(proc: subprocess.Popen[bytes]) -> dict[str, Any]:
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert line, "the server closed stdout"
    return json.loads(line)  # every byte on stdout must be protocol


def test_raw_claude_desktop_session_gets_only_protocol_on_stdout_and_exits_when_stdin_closes(
    db_path: Path, fake_ollama: FakeOllama
) -> None:
    env = {"PATH": os.environ.get("PATH", ""), "HOME": os.environ.get("HOME", "/root"), **server_env(db_path, fake_ollama)}
    proc = subprocess.Popen(
        [str(SCRIPT)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd="/", env=env
    )
    try:
        _rpc(proc, {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "claude-ai", "version": "0.1.0"}}})
        init = _read(proc)
        assert init["id"] == 1 and init["result"]["protocolVersion"] == "2025-06-18"
        assert init["result"]["serverInfo"]["name"] == "ollama-mcp"
        _rpc(proc, {"jsonrpc": "2.0", "method": "notifications/initialized"})
        _rpc(proc, {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}})
        listed = _read(proc)
        assert listed["id"] == 2 and len(listed["result"]["tools"]) == 11
        _rpc(proc, {"jsonrpc": "2.0", "id": 3, "method": "tools/call",
                    "params": {"name": "store_memory", "arguments": {"content": "raw wire memory"}}})
        stored = _read(proc)
        assert stored["id"] == 3 and stored["result"]["isError"] is False
        assert stored["result"]["structuredContent"]["embedding_status"] == "embedded"
        _rpc(proc, {"jsonrpc": "2.0", "id": 4, "method": "tools/call",
                    "params": {"name": "search_memories", "arguments": {"query": "raw wire", "top_k": 0}}})
        refused = _read(proc)
        assert refused["id"] == 4 and refused["result"]["isError"] is True
        assert "top_k" in refused["result"]["content"][0]["text"]
        assert proc.stdin is not None
        proc.stdin.close()
        assert proc.wait(timeout=15) == 0
        assert proc.stdout is not None and proc.stdout.read() == b""
    finally:
        if proc.poll() is None:
            proc.kill()
        stderr = proc.stderr.read().decode() if proc.stderr else ""
    assert "raw wire memory" not in stderr  # logs never carry memory content
    assert "Traceback" not in stderr


async def test_two_server_processes_on_one_database_lose_nothing_and_see_each_other(
    db_path: Path, fake_ollama: FakeOllama
) -> None:
    fake_ollama.concepts.update({"car": "vehicle", "automobile": "vehicle"})
    per_process = 40
    async with Client(stdio(db_path, fake_ollama), mode="legacy") as first, \
            Client(stdio(db_path, fake_ollama), mode="legacy") as second:
        conv = await call(first, "init_conversation", name="shared")
        await call(first, "search_memories", query="warm up the index", conversation_id=conv["conversation_id"])

        async def writer(client: Client, name: str) -> None:
            for i in range(per_process):
                await call(client, "store_memory", content=f"{name} note {i}", conversation_id=conv["conversation_id"])

        async with anyio.create_task_group() as tasks:
            tasks.start_soon(writer, first, "first")
            tasks.start_soon(writer, second, "second")

        # the first process's index is now current with its own writes; the next row is the other's
        await call(first, "search_memories", query="note", conversation_id=conv["conversation_id"])
        await call(second, "store_memory", content="my automobile is blue", conversation_id=conv["conversation_id"])
        found = await call(first, "search_memories", query="car", conversation_id=conv["conversation_id"])
        assert found["mode"] == "hybrid"
        assert found["results"][0]["content"] == "my automobile is blue"
        assert found["results"][0]["similarity"] == pytest.approx(0.5)  # shares 1 of 4 axes
    with sqlite3.connect(db_path) as conn:
        assert conn.execute("SELECT count(*) FROM memories").fetchone()[0] == 2 * per_process + 1
        assert conn.execute("SELECT count(DISTINCT memory_seq) FROM memory_embeddings").fetchone()[0] == 2 * per_process + 1
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)


def test_an_ollama_error_that_echoes_its_input_never_puts_memory_text_in_the_log(
    db_path: Path, fake_ollama: FakeOllama
) -> None:
    stored_text, query = "the door code is 4711 zebra", "zebra door code"
    # A proxy before Ollama that quotes what it was sent in its error body.
    fake_ollama.fail = (502, f"upstream failed for input {stored_text!r} / {query!r}")
    env = {"PATH": os.environ.get("PATH", ""), "HOME": os.environ.get("HOME", "/root"),
           **server_env(db_path, fake_ollama), "OLLAMA_MCP_LOG_LEVEL": "INFO"}
    proc = subprocess.Popen(
        [str(SCRIPT)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd="/", env=env
    )
    try:
        _rpc(proc, {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}})
        _read(proc)
        _rpc(proc, {"jsonrpc": "2.0", "method": "notifications/initialized"})
        _rpc(proc, {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                    "params": {"name": "store_memory", "arguments": {"content": stored_text}}})
        stored = _read(proc)["result"]["structuredContent"]
        assert stored["embedding_status"] == "pending"
        assert "HTTP 502" in stored["note"] and "4711" not in stored["note"]
        _rpc(proc, {"jsonrpc": "2.0", "id": 3, "method": "tools/call",
                    "params": {"name": "search_memories", "arguments": {"query": query}}})
        found = _read(proc)["result"]["structuredContent"]
        assert found["mode"] == "keyword" and "zebra" not in (found["notice"] or "")
        assert proc.stdin is not None
        proc.stdin.close()
        assert proc.wait(timeout=15) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
        stderr = proc.stderr.read().decode() if proc.stderr else ""
    assert "502" in stderr  # the failure is logged ...
    assert "4711" not in stderr and "zebra" not in stderr  # ... without the text it was sent

"""The real ``ollama-mcp`` process over stdio, started the way Claude Desktop starts it: working
directory ``/``, a minimal environment, sometimes two copies on one database at once."""

from __future__ import annotations

import contextlib
import ctypes
import os
import pty
import select
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import anyio
import pytest
from mcp import Client

from tests.support.fake_ollama import FakeOllama
from tests.support.mcp_client import call
from tests.support.stdio import SCRIPT, raw_server, read_reply, send_line, send_rpc, server_env, stdio
from tests.support.stores import damage

pytestmark = pytest.mark.anyio


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


def test_raw_claude_desktop_session_gets_only_protocol_on_stdout_and_exits_when_stdin_closes(
    db_path: Path, fake_ollama: FakeOllama
) -> None:
    env = {
        "PATH": os.environ.get("PATH", ""),
        "HOME": os.environ.get("HOME", "/root"),
        **server_env(db_path, fake_ollama),
    }
    proc = subprocess.Popen(
        [str(SCRIPT)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd="/",
        bufsize=0,
        env=env,
    )
    try:
        send_rpc(
            proc,
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "initialize",
                "params": {
                    "protocolVersion": "2025-06-18",
                    "capabilities": {},
                    "clientInfo": {"name": "claude-ai", "version": "0.1.0"},
                },
            },
        )
        init = read_reply(proc)
        assert init["id"] == 1 and init["result"]["protocolVersion"] == "2025-06-18"
        assert init["result"]["serverInfo"]["name"] == "ollama-mcp"
        send_rpc(proc, {"jsonrpc": "2.0", "method": "notifications/initialized"})
        send_rpc(proc, {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}})
        listed = read_reply(proc)
        assert listed["id"] == 2 and len(listed["result"]["tools"]) == 14
        send_rpc(proc, {"jsonrpc": "2.0", "id": 3, "method": "tools/call",
                    "params": {"name": "store_memory", "arguments": {"content": "raw wire memory"}}})
        stored = read_reply(proc)
        assert stored["id"] == 3 and stored["result"]["isError"] is False
        assert stored["result"]["structuredContent"]["embedding_status"] == "embedded"
        send_rpc(proc, {"jsonrpc": "2.0", "id": 4, "method": "tools/call",
                    "params": {"name": "search_memories", "arguments": {"query": "raw wire", "top_k": 0}}})
        refused = read_reply(proc)
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
    assert "is an MCP server" not in stderr  # said only to a person at a terminal
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
        assert (
            conn.execute("SELECT count(DISTINCT memory_seq) FROM memory_embeddings").fetchone()[0]
            == 2 * per_process + 1
        )
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)


def test_an_ollama_error_that_echoes_its_input_never_puts_memory_text_in_the_log(
    db_path: Path, fake_ollama: FakeOllama
) -> None:
    stored_text, query = "the door code is 4711 zebra", "zebra door code"
    # A proxy before Ollama that quotes what it was sent in its error body.
    fake_ollama.fail = (502, f"upstream failed for input {stored_text!r} / {query!r}")
    with raw_server(db_path, fake_ollama, OLLAMA_MCP_LOG_LEVEL="INFO") as (proc, stderr):
        send_rpc(proc, {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                    "params": {"name": "store_memory", "arguments": {"content": stored_text}}})
        stored = read_reply(proc)["result"]["structuredContent"]
        assert stored["embedding_status"] == "pending"
        assert "HTTP 502" in stored["note"] and "4711" not in stored["note"]
        send_rpc(proc, {"jsonrpc": "2.0", "id": 3, "method": "tools/call",
                    "params": {"name": "search_memories", "arguments": {"query": query}}})
        found = read_reply(proc)["result"]["structuredContent"]
        assert found["mode"] == "keyword" and "zebra" not in (found["notice"] or "")
        assert proc.stdin is not None
        proc.stdin.close()
        assert proc.wait(timeout=15) == 0
    assert "502" in stderr[0]  # the failure is logged ...
    assert "4711" not in stderr[0] and "zebra" not in stderr[0]  # ... without the text it was sent


def test_an_unparsable_request_line_gets_an_error_with_its_id_and_the_server_keeps_serving(
    db_path: Path, fake_ollama: FakeOllama
) -> None:
    call_line = '{"jsonrpc":"2.0","id":%s,"method":"tools/call","params":{"name":"store_memory","arguments":%s}}'
    unreadable = [
        # an unpaired surrogate escape: valid to Python's json, refused by the SDK's parser
        (call_line % (5, '{"content":"secret \\ud800 text"}'), 5, -32700, "surrogate escape"),
        # nesting deeper than the SDK's parser allows
        (
            call_line % ('"deep"', '{"content":"x","metadata":{"a":' + "[" * 300 + "]" * 300 + "}}"),
            "deep",
            -32700,
            "deeper than the limit",
        ),
        # cut off mid-message: the id still stands before any nesting
        (
            '{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"store_me',
            7,
            -32700,
            "while parsing a string",
        ),
        # not JSON at all: no id to recover, so null as JSON-RPC asks
        ("secret garbage", None, -32700, "expected value"),
        # JSON, but no method
        ('{"jsonrpc":"2.0","id":9}', 9, -32600, "method"),
    ]
    with raw_server(db_path, fake_ollama, OLLAMA_MCP_LOG_LEVEL="INFO") as (proc, stderr):
        for line, request_id, code, reason in unreadable:
            send_line(proc, line.encode())
            answer = read_reply(proc)
            assert answer["id"] == request_id, line
            assert answer["error"]["code"] == code
            assert reason in answer["error"]["message"] and "nothing was done" in answer["error"]["message"]
        send_line(proc, b'{"jsonrpc":"2.0","method":42}')  # a malformed notification: never answered
        send_rpc(proc, {"jsonrpc": "2.0", "id": 10, "method": "tools/call",
                    "params": {"name": "store_memory", "arguments": {"content": "still serving"}}})
        stored = read_reply(proc)
        assert stored["id"] == 10 and stored["result"]["isError"] is False
        assert proc.stdin is not None
        proc.stdin.close()
        assert proc.wait(timeout=15) == 0
    with sqlite3.connect(db_path) as conn:
        assert conn.execute("SELECT content FROM memories").fetchall() == [("still serving",)]
    assert stderr[0].count("answered an unreadable request line") == len(unreadable)
    assert "secret" not in stderr[0] and "Traceback" not in stderr[0]


@pytest.mark.parametrize("how", ["random bytes", "truncated"])
def test_every_tool_names_a_damaged_database_with_what_to_do_and_leaves_it_unchanged(
    db_path: Path, fake_ollama: FakeOllama, how: str
) -> None:
    damage(db_path, fake_ollama, how)
    before = db_path.read_bytes()
    calls = [("store_memory", {"content": "a new memory"}), ("search_memories", {"query": "memory number 7"}),
             ("list_conversations", {})]
    with raw_server(db_path, fake_ollama) as (proc, stderr):
        for request_id, (tool, arguments) in enumerate(calls, start=2):
            send_rpc(proc, {"jsonrpc": "2.0", "id": request_id, "method": "tools/call",
                        "params": {"name": tool, "arguments": arguments}})
            reply = read_reply(proc)["result"]
            assert reply["isError"] is True, (tool, reply)
            text = reply["content"][0]["text"]
            assert f"The file {db_path} is not a usable ollama-mcp database" in text, (tool, text)
            assert "it was left as it is. Move it aside" in text and "OLLAMA_MCP_DB" in text
        assert proc.stdin is not None
        proc.stdin.close()
        assert proc.wait(timeout=15) == 0
    assert db_path.read_bytes() == before
    assert "Traceback" not in stderr[0] and "details are in the server log" not in stderr[0]


@pytest.mark.parametrize(("name", "value", "said"), [
    ("OLLAMA_MCP_DB", "memory.db", "OLLAMA_MCP_DB must be an absolute path"),
    ("OLLAMA_MCP_EMBED_TIMEOUT", "soon", "OLLAMA_MCP_EMBED_TIMEOUT"),
])
def test_settings_that_cannot_be_used_are_told_through_every_tool_not_by_exiting_before_initialize(
    db_path: Path, fake_ollama: FakeOllama, name: str, value: str, said: str
) -> None:
    with raw_server(db_path, fake_ollama, **{name: value}) as (proc, stderr):
        send_rpc(proc, {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}})
        assert len(read_reply(proc)["result"]["tools"]) == 14
        for request_id in (3, 4):  # every call, not only the first
            send_rpc(proc, {"jsonrpc": "2.0", "id": request_id, "method": "tools/call",
                        "params": {"name": "store_memory", "arguments": {"content": "kept nowhere"}}})
            reply = read_reply(proc)["result"]
            assert reply["isError"] is True and said in reply["content"][0]["text"]
        assert proc.stdin is not None
        proc.stdin.close()
        assert proc.wait(timeout=15) == 0
    assert said in stderr[0] and "Traceback" not in stderr[0]
    assert not db_path.exists() and not (Path("/") / "memory.db").exists()


@contextmanager
def started_in_a_terminal(db_path: Path, fake: FakeOllama) -> Iterator[tuple[int, int]]:
    """The server as a person starts it in a terminal (its pid, the terminal), once it has said what
    it is; killed afterwards if it is still running."""
    pid, terminal = pty.fork()
    if pid == 0:  # the child: the server with a terminal as stdin, stdout and stderr
        os.execve(str(SCRIPT), [str(SCRIPT)], {"PATH": os.environ.get("PATH", ""), "HOME": "/nonexistent",
                                               **server_env(db_path, fake)})
    said = b""
    try:
        deadline = time.monotonic() + 30
        while b"to stop, press Ctrl-C." not in said and time.monotonic() < deadline:
            if select.select([terminal], [], [], 0.5)[0]:
                said += os.read(terminal, 4096)
        assert b"ollama-mcp is an MCP server" in said and b"ollama-mcp doctor" in said
        yield pid, terminal
    finally:
        with contextlib.suppress(ChildProcessError, ProcessLookupError):
            if os.waitpid(pid, os.WNOHANG)[0] == 0:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
        os.close(terminal)


def ended_by_ctrl_c(pid: int) -> bool:
    """Whether ``pid`` ends within 10 s, as a program Ctrl-C ends does (the shell's 130)."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGINT, status
            return True
        time.sleep(0.05)
    return False


def test_started_by_hand_it_says_what_it_is_and_ctrl_c_stops_it(
    db_path: Path, fake_ollama: FakeOllama
) -> None:
    with started_in_a_terminal(db_path, fake_ollama) as (pid, terminal):
        os.write(terminal, b"\x03")  # Ctrl-C, as the terminal sends it: SIGINT to the process
        assert ended_by_ctrl_c(pid), "Ctrl-C did not stop the server within 10 s"


def idle(pid: int) -> bool:
    """Whether every thread of ``pid`` is found asleep 2 s in a row (samples 0.25 s apart) within
    30 s: the start-up's work done, the main thread waiting in the event loop's poll."""
    deadline, asleep_since = time.monotonic() + 30, None
    while time.monotonic() < deadline:
        states = []
        for tid in os.listdir(f"/proc/{pid}/task"):
            with contextlib.suppress(FileNotFoundError):  # a thread that just ended
                states.append(Path(f"/proc/{pid}/task/{tid}/stat").read_text().rsplit(")", 1)[1].split()[0])
        if len(states) > 1 and all(state == "S" for state in states):
            asleep_since = asleep_since or time.monotonic()
            if time.monotonic() - asleep_since >= 2:
                return True
        else:
            asleep_since = None
        time.sleep(0.25)
    return False


# tgkill(2): a signal to one thread of a process, which os.kill cannot do.
_TGKILL = {"x86_64": 234, "aarch64": 131}.get(os.uname().machine)


@pytest.mark.skipif(sys.platform != "linux" or _TGKILL is None,
                    reason="tgkill(2)'s number is known here on Linux x86_64 and arm64")
def test_in_a_terminal_ctrl_c_stops_it_whichever_thread_receives_the_signal(
    db_path: Path, fake_ollama: FakeOllama
) -> None:
    """The kernel may hand a process's SIGINT to any of its threads (a Ctrl-C sent the moment the
    line appeared was lost 13 times in 40 on two busy cores). Here it goes, once the server is idle,
    to a thread that is not the main one: with a Python handler, the main thread slept on in the
    event loop's poll and the server never ended."""
    with started_in_a_terminal(db_path, fake_ollama) as (pid, _terminal):
        assert idle(pid), "the server did not settle within 30 s"
        workers = sorted(int(tid) for tid in os.listdir(f"/proc/{pid}/task") if int(tid) != pid)
        assert workers, "the server started no thread but its main one"
        libc = ctypes.CDLL(None, use_errno=True)
        assert libc.syscall(_TGKILL, pid, workers[0], signal.SIGINT) == 0, ctypes.get_errno()
        assert ended_by_ctrl_c(pid), f"a SIGINT to thread {workers[0]} did not stop the server within 10 s"

"""It keeps working and loses nothing: several processes, kill -9, a full disk, a dying parent,
and logs that never carry the user's words. Real processes, a real file, the fake Ollama."""

from __future__ import annotations

import json
import os
import resource
import shutil
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from ollama_mcp.app import open_app
from ollama_mcp.config import Settings
from ollama_mcp.inputs.conversations import conversation_query, new_conversation
from ollama_mcp.inputs.memories import note as new_note
from ollama_mcp.inputs.memories import notes_to_import
from ollama_mcp.inputs.search import search_request
from ollama_mcp.mcp.server import build_server
from ollama_mcp.storage.sqlite.db import migrations
from tests.conftest import Database
from tests.support.fake_ollama import FakeOllama
from tests.support.mcp_client import call, error
from tests.support.stdio import SCRIPT, server_env, stdio

pytestmark = pytest.mark.anyio


def query(db: Database | Path, sql: str, *params: Any) -> list[tuple[Any, ...]]:
    return (db if isinstance(db, Database) else Database("sqlite", str(db))).rows(sql, *params)


def assert_consistent(db: Database | Path) -> None:
    """The store is sound: on SQLite the file, both keyword indexes and the vectors agree with the
    rows; on PostgreSQL the per-conversation counts the triggers keep agree with the rows."""
    if isinstance(db, Database) and db.backend == "postgres":
        drifted = db.count(
            "SELECT count(*) FROM conversations c WHERE memory_count <> (SELECT count(*) FROM memories m"
            " WHERE m.conversation_id = c.id AND m.kind = 'note' AND m.superseded_by IS NULL)"
            " OR message_count <> (SELECT count(*) FROM memories m WHERE m.conversation_id = c.id AND m.kind ="
            " 'message')"
        )
        assert drifted == 0
        return
    with sqlite3.connect(db.url if isinstance(db, Database) else db) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        assert conn.execute("PRAGMA foreign_key_check").fetchall() == []
        # FTS5's own check that an external-content index matches its table
        conn.execute("INSERT INTO memories_fts (memories_fts, rank) VALUES ('integrity-check', 1)")
        conn.execute("INSERT INTO memory_contexts_fts (memory_contexts_fts, rank) VALUES ('integrity-check', 1)")
        orphans = conn.execute(
            "SELECT count(*) FROM memory_embeddings e LEFT JOIN memories m ON m.seq = e.memory_seq WHERE m.seq IS NULL"
        ).fetchone()
        assert orphans == (0,)


@pytest.mark.slow
async def test_four_processes_storing_250_each_amid_searches_store_everything_exactly_once(
    db: Database, fake_ollama: FakeOllama
) -> None:
    per_process, processes = 250, 4
    errors: list[str] = []
    async with Client(stdio(db.url, fake_ollama), mode="legacy") as first:
        conv = (await call(first, "init_conversation", name="shared"))["conversation_id"]

    async def worker(n: int) -> None:
        async with Client(stdio(db.url, fake_ollama), mode="legacy") as client:
            for i in range(per_process):
                stored = await client.call_tool(
                    "store_memory", {"content": f"process{n} item{i} token{n}x{i}", "conversation_id": conv}
                )
                if stored.is_error:
                    errors.append(stored.content[0].text)
                if i % 25 == 24:
                    other = (n + 1) % processes
                    found = await client.call_tool(
                        "search_memories", {"query": f"process{other}", "conversation_id": conv}
                    )
                    if found.is_error:
                        errors.append(found.content[0].text)
            # after everyone's last write has been acknowledged, each process sees the others'
            await barrier.wait()
            for other in range(processes):
                seen = await call(client, "search_memories", query=f"token{other}x{per_process - 1}",
                                  conversation_id=conv, top_k=1)
                assert (
                    seen["results"][0]["content"]
                    == f"process{other} item{per_process - 1} token{other}x{per_process - 1}"
                )

    barrier = _Barrier(processes)
    with anyio.fail_after(240):
        async with anyio.create_task_group() as tasks:
            for n in range(processes):
                tasks.start_soon(worker, n)
    assert errors == []  # no "database is locked", nor anything else, reached a client
    assert query(db, "SELECT count(*), count(DISTINCT content) FROM memories") == [(1000, 1000)]
    assert_consistent(db)


class _Barrier:
    def __init__(self, parties: int) -> None:
        self._parties, self._arrived, self._event = parties, 0, anyio.Event()

    async def wait(self) -> None:
        self._arrived += 1
        if self._arrived == self._parties:
            self._event.set()
        await self._event.wait()


def _start_raw(db: Path | str, fake: FakeOllama, **popen: Any) -> subprocess.Popen[bytes]:
    env = {"PATH": os.environ.get("PATH", ""), "HOME": os.environ.get("HOME", "/root"), **server_env(db, fake)}
    proc = subprocess.Popen([str(SCRIPT)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            cwd="/", env=env, **popen)
    _send(proc, {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}})
    assert proc.stdout is not None and json.loads(proc.stdout.readline())["id"] == 0
    _send(proc, {"jsonrpc": "2.0", "method": "notifications/initialized"})
    return proc


def _send(proc: subprocess.Popen[bytes], message: dict[str, Any]) -> None:
    assert proc.stdin is not None
    proc.stdin.write(json.dumps(message).encode() + b"\n")
    proc.stdin.flush()


def _store(proc: subprocess.Popen[bytes], request_id: int, content: str) -> None:
    _send(proc, {"jsonrpc": "2.0", "id": request_id, "method": "tools/call",
                 "params": {"name": "store_memory", "arguments": {"content": content}}})


IN_FLIGHT = 300  # requests sent beyond those answered, in the kill -9 test


@pytest.mark.slow
def test_kill_9_mid_batch_keeps_every_acknowledged_write_and_a_sound_file(
    db: Database, fake_ollama: FakeOllama
) -> None:
    proc = _start_raw(db.url, fake_ollama)
    assert proc.stdout is not None

    acknowledged: list[str] = []

    def send_all() -> None:  # a steady stream from a thread: requests are in flight when it dies
        try:
            for i in range(1, 3001):
                while i > len(acknowledged) + IN_FLIGHT:  # a window, so a fast server cannot finish them all
                    time.sleep(0.001)
                _store(proc, i, f"crash test memory {i}")
                time.sleep(0.002)
        except (BrokenPipeError, OSError):
            pass  # it was killed

    writer = threading.Thread(target=send_all, daemon=True)
    writer.start()
    while len(acknowledged) < 60:
        reply = json.loads(proc.stdout.readline())
        assert reply["result"]["isError"] is False, reply["result"]["content"]
        acknowledged.append(reply["result"]["structuredContent"]["memory_id"])
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=10)

    assert_consistent(db)
    present = {row[0] for row in query(db, "SELECT id FROM memories")}
    assert set(acknowledged) <= present
    assert len(present) < 3000  # it really died mid-batch
    writer.join(timeout=10)
    # restarted, it embeds whatever the crash left without vectors
    proc = _start_raw(db.url, fake_ollama)
    try:
        deadline = time.monotonic() + 20
        while query(db, "SELECT count(*) FROM memories m WHERE NOT EXISTS (SELECT 1 FROM memory_embeddings e"
                             " WHERE e.memory_seq = m.seq AND e.facet = 'content')") != [(0,)]:
            assert time.monotonic() < deadline, "pending memories were not embedded after the restart"
            time.sleep(0.05)
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
        proc.wait(timeout=15)
    assert_consistent(db)


def _limit_file_size() -> None:
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG instead
    resource.setrlimit(resource.RLIMIT_FSIZE, (2_000_000, 2_000_000))


def test_a_full_disk_is_a_clear_error_and_the_data_already_stored_stays_intact(
    db_path: Path, fake_ollama: FakeOllama
) -> None:
    proc = _start_raw(db_path, fake_ollama, preexec_fn=_limit_file_size)
    assert proc.stdout is not None
    try:
        stored, failure = [], None
        for i in range(1, 200):
            _store(proc, i, f"memory {i} " + "x" * 20_000)
            reply = json.loads(proc.stdout.readline())["result"]
            if reply["isError"]:
                failure = reply["content"][0]["text"]
                break
            stored.append(reply["structuredContent"]["memory_id"])
        assert failure is not None, "the file-size limit was never reached"
        assert "internal error" not in failure
        assert "disk is full" in failure or "cannot be written" in failure
        assert "Nothing was changed" in failure
        # the server still answers, and searches still work
        _send(proc, {"jsonrpc": "2.0", "id": 999, "method": "tools/call",
                     "params": {"name": "search_all_conversations", "arguments": {"query": "memory 1"}}})
        assert json.loads(proc.stdout.readline())["result"]["isError"] is False
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
        proc.wait(timeout=15)
    assert len(stored) >= 3
    assert set(stored) <= {row[0] for row in query(db_path, "SELECT id FROM memories")}
    assert_consistent(db_path)


async def test_a_database_folder_moved_or_deleted_under_a_running_server_gets_no_write_acknowledged(
    db_path: Path, fake_ollama: FakeOllama, tmp_path: Path
) -> None:
    folder, aside = db_path.parent, tmp_path / "moved-aside"
    async with Client(stdio(db_path, fake_ollama), mode="legacy") as client:
        before = await call(client, "store_memory", content="stored before the move")
        folder.rename(aside)  # SQLite keeps writing to the open file, wherever it now is
        refused = await error(client, "store_memory", content="stored while moved away")
        assert f"the database file {db_path} was deleted, moved or replaced" in refused
        assert "Nothing was changed" in refused and "Restart the MCP client" in refused
        assert "update" in await error(client, "update_memory", memory_id=before["memory_id"], content="edited")
        aside.rename(folder)  # the same file back at its path: writes go on
        await call(client, "store_memory", content="stored after the return")
        assert query(db_path, "SELECT content FROM memories ORDER BY created_at") == [
            ("stored before the move",), ("stored after the return",)]
        shutil.rmtree(folder)
        assert "was deleted, moved or replaced" in await error(client, "store_memory", content="stored into nothing")
        assert "Nothing was changed" in await error(client, "init_conversation", name="nobody would see it")


def test_the_server_exits_when_its_parent_dies(db_path: Path, fake_ollama: FakeOllama, tmp_path: Path) -> None:
    pid_file = tmp_path / "child.pid"
    parent_code = (
        "import subprocess, sys, time\n"
        f"child = subprocess.Popen([{str(SCRIPT)!r}], stdin=subprocess.PIPE, stdout=subprocess.PIPE,"
        f" env={server_env(db_path, fake_ollama)!r})\n"
        f"open({str(pid_file)!r}, 'w').write(str(child.pid))\n"
        "time.sleep(600)\n"
    )
    parent = subprocess.Popen([sys.executable, "-c", parent_code])
    deadline = time.monotonic() + 20
    while not pid_file.exists() or not pid_file.read_text():
        assert time.monotonic() < deadline
        time.sleep(0.05)
    child = int(pid_file.read_text())
    time.sleep(1.0)  # let it finish starting
    parent.kill()  # the pipe to the child's stdin closes with it
    parent.wait(timeout=10)
    deadline = time.monotonic() + 15
    while _alive(child):
        assert time.monotonic() < deadline, "the server outlived its parent"
        time.sleep(0.05)


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split()[2]
    except OSError:
        return False
    return state != "Z"


def test_logs_never_contain_memory_text_queries_or_summaries(db_path: Path, fake_ollama: FakeOllama) -> None:
    secrets = ["my bank pin is 8812", "the surprise party is on friday", "summary: chose vendor zebra-corp"]
    env = {"PATH": os.environ.get("PATH", ""), "HOME": os.environ.get("HOME", "/root"),
           **server_env(db_path, fake_ollama), "OLLAMA_MCP_LOG_LEVEL": "INFO"}
    proc = subprocess.Popen([str(SCRIPT)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            cwd="/", env=env)
    assert proc.stdout is not None
    calls: list[tuple[str, dict[str, Any]]] = [
        ("init_conversation", {"name": "private"}),
        ("store_memory", {"content": secrets[0]}),
        ("store_memory", {"content": secrets[0]}),  # duplicate
        ("search_memories", {"query": secrets[1]}),
        ("search_memories", {"query": secrets[1], "top_k": 0}),  # a refused call
        ("store_memory", {"content": secrets[1] + " " + "y" * 100_001}),  # too long: refused
        ("end_conversation", {"summary": secrets[2]}),
        ("store_memory", {"content": secrets[1]}),  # into no conversation: a new anonymous one
    ]
    _send(proc, {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}})
    proc.stdout.readline()
    _send(proc, {"jsonrpc": "2.0", "method": "notifications/initialized"})
    for i, (tool, args) in enumerate(calls, 1):
        if i == 4:
            fake_ollama.stop()  # failures are logged too: they must not quote the user either
        _send(proc, {"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": {"name": tool, "arguments": args}})
        assert json.loads(proc.stdout.readline())["id"] == i
    assert proc.stdin is not None
    proc.stdin.close()
    proc.wait(timeout=15)
    log = proc.stderr.read().decode() if proc.stderr else ""
    assert "embeddings unavailable" in log  # the log does say what happened ...
    for secret in secrets:
        for fragment in (secret, secret.split()[-1]):  # ... never with the user's words
            assert fragment not in log, fragment


FIXTURES = sorted((Path(__file__).parent / "fixtures").glob("schema_*.db"))


@pytest.mark.parametrize("fixture", FIXTURES, ids=[f.stem for f in FIXTURES])
async def test_a_database_of_every_released_schema_opens_migrated_with_its_data(
    fixture: Path, tmp_path: Path, fake_ollama: FakeOllama
) -> None:
    path = tmp_path / "memory.db"
    path.write_bytes(fixture.read_bytes())
    settings = Settings.from_env({"OLLAMA_MCP_DB": str(path), "OLLAMA_HOST": fake_ollama.url})
    async with open_app(replace(settings, backfill_max_delay=0.2), background=False) as app:
        conversations = {c.name: c for c in await app.conversations.listed(conversation_query())}
        assert conversations["fixture: ended"].status == "completed"
        found = await app.recall.search(search_request("which database for billing", top_k=3, everywhere=True))
        assert found.mode == "hybrid"
        assert "We chose PostgreSQL for billing" in [h.memory.content for h in found.hits]
        summary = await app.recall.search(search_request("what was decided", top_k=5, everywhere=True))
        assert any(h.memory.kind == "summary" for h in summary.hits)
        stored = await app.memories.store(new_note("written after the upgrade", conversations["fixture: active"].id))
        assert stored.embedding_status == "embedded"
    assert query(path, "SELECT max(version) FROM schema_migrations") == [(migrations()[-1].version,)]
    assert_consistent(path)


async def test_merging_the_keyword_index_while_another_process_writes_loses_nothing(
    db_path: Path, fake_ollama: FakeOllama
) -> None:
    settings = Settings.from_env({"OLLAMA_MCP_DB": str(db_path), "OLLAMA_HOST": fake_ollama.url})
    async with open_app(settings, background=False) as merger, open_app(settings, background=False) as writer:
        await merger.memories.import_notes(
            notes_to_import(
                (await merger.conversations.start(new_conversation("bulk"))).id,
                [f"bulk memory {i} about topic {i % 17}" for i in range(3000)],
            )
        )
        conv = await writer.conversations.start(new_conversation("chat"))
        written: list[str] = []

        async def write() -> None:
            for i in range(60):
                written.append((await writer.memories.store(new_note(f"live note {i} of the chat", conv.id))).memory.id)

        async def merge() -> None:
            for _ in range(3):
                await merger.ranker.upkeep()
                await anyio.sleep(0.01)

        async with anyio.create_task_group() as group:
            group.start_soon(write)
            group.start_soon(merge)
        assert len(written) == 60
        assert query(db_path, "SELECT count(*) FROM memories WHERE conversation_id = ?", conv.id) == [(60,)]
        for i in (0, 31, 59):
            found = await merger.recall.search(search_request(f"live note {i} of the chat", conv.id, top_k=1))
            assert found.hits[0].memory.content == f"live note {i} of the chat"
    assert_consistent(db_path)


async def test_a_search_in_another_process_never_sees_a_half_deleted_conversation(
    settings: Settings, db: Database, fake_ollama: FakeOllama
) -> None:
    from tests.conftest import connect  # noqa: PLC0415

    async with connect(settings) as deleter, Client(stdio(db.url, fake_ollama), mode="legacy") as searcher:
        doomed = (await call(deleter, "init_conversation", name="doomed"))["conversation_id"]
        for i in range(30):
            await call(deleter, "store_memory", content=f"walrus fact {i}")
        seen: list[int] = []
        searching, done = anyio.Event(), anyio.Event()

        async def search_until_gone() -> None:
            while True:
                found = await call(searcher, "search_all_conversations", query="walrus fact", top_k=50)
                seen.append(sum(hit["conversation_id"] == doomed for hit in found["results"]))
                searching.set()
                if done.is_set() and seen[-1] == 0:
                    return

        async with anyio.create_task_group() as tasks:
            tasks.start_soon(search_until_gone)
            await searching.wait()  # the other process answers searches (its start can take a while)
            await anyio.sleep(0.3)
            await call(deleter, "delete_conversation", conversation_id=doomed)
            done.set()
    assert set(seen) <= {30, 0} and seen[0] == 30 and seen[-1] == 0, seen


@pytest.mark.parametrize("embedding", ["fast", "pending"])
async def test_a_memory_store_memory_acknowledged_is_found_by_the_next_search(
    settings: Settings, fake_ollama: FakeOllama, embedding: str
) -> None:
    """Read-your-writes, by meaning when the vectors are there and by keywords while they are
    pending: three clients each store then search at once, 15 times, while the others write."""
    if embedding == "pending":
        fake_ollama.delay = 1.0  # every embedding outlasts the store's wait: stores answer "pending"
        settings = replace(settings, wait_timeout=0.1)
    missed: list[str] = []

    async def client_loop(index: int) -> None:
        async with Client(build_server(settings), mode="legacy") as client:
            await call(client, "init_conversation", name=f"writer {index}")
            for i in range(15):
                # A word of its own, or only a number among texts alike (the phrase and BM25 paths).
                content, query = (
                    (f"The zq{index}x{i}quill ledger was filed on shelf {i}", f"zq{index}x{i}quill ledger") if i % 2
                    else (f"Writer {index} note number {i + 100 * index}", f"note number {i + 100 * index}")
                )
                stored = await call(client, "store_memory", content=content)
                if embedding == "pending":
                    assert stored["embedding_status"] == "pending"
                found = await call(client, "search_memories", query=query, top_k=3)
                if not found["results"] or found["results"][0]["memory_id"] != stored["memory_id"]:
                    missed.append(f"{query}: {[h['content'] for h in found['results']]}")

    with anyio.fail_after(120):
        async with anyio.create_task_group() as tasks:
            for index in range(3):
                tasks.start_soon(client_loop, index)
    assert missed == []

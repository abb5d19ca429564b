"""The maintenance commands as a user runs them: the installed ``ollama-mcp`` script in a
subprocess, against real files and the fake Ollama."""

from __future__ import annotations

import io
import json
import os
import shlex
import socket
import sqlite3
import subprocess
from collections.abc import Callable
from contextlib import closing
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client, StdioServerParameters

from ollama_mcp.app import open_app
from ollama_mcp.cli.admin import ProgressLine
from ollama_mcp.config import Settings
from ollama_mcp.domain import SearchRequest
from ollama_mcp.inputs.conversations import new_conversation
from ollama_mcp.inputs.memories import note as new_note
from ollama_mcp.inputs.memories import note_change, notes_to_import
from ollama_mcp.storage.sqlite import db as sqlite_db
from tests.conftest import Database, sqlite_store_at
from tests.support.cli import SCRIPT, rows, run
from tests.support.fake_ollama import FakeModel, FakeOllama
from tests.support.mcp_client import call


def fill(db: Database, fake: FakeOllama) -> str:
    async def go() -> str:
        async with open_app(Settings.from_env({"OLLAMA_MCP_DB": db.url, "OLLAMA_HOST": fake.url}),
                            background=False) as app:
            conv = await app.conversations.start(new_conversation("trip", {"ttl_hours": 1000}))
            first = await app.memories.store(new_note("Flights to Lisbon on May 3", conv.id, ["travel"]))
            await app.memories.update(note_change(first.memory.id, content="Flights to Lisbon on May 4"))
            await app.transcript.add_message(conv.id, "user", "book the hotel too")
            await app.conversations.end(conv.id, "Lisbon trip planned")
            return conv.id

    return anyio.run(go)


def test_export_then_import_into_a_new_store_round_trips_and_a_second_import_changes_nothing(
    tmp_path: Path, db: Database, another_database: Callable[[], Database], fake_ollama: FakeOllama
) -> None:
    source, target = db, another_database()
    conv = fill(source, fake_ollama)
    backup = tmp_path / "backup.json"
    done = run(source, fake_ollama, "export", "-o", str(backup))
    assert done.returncode == 0 and "exported 1 conversation(s)" in done.stderr and done.stdout == ""
    document = json.loads(backup.read_text())
    assert [c["id"] for c in document["conversations"]] == [conv]

    first = run(target, fake_ollama, "import", str(backup))
    assert first.returncode == 0, first.stderr
    assert "ollama-mcp: imported 1 new conversation(s) and 4 new turns (0 of 4 were already present)" in first.stdout
    again = run(target, fake_ollama, "import", "-", stdin=backup.read_text())
    assert "ollama-mcp: imported 0 new conversation(s) and 0 new turns (4 of 4 were already present)" in again.stdout
    exported = json.loads(run(target, fake_ollama, "export").stdout)
    assert {**exported, "exported_at": None} == {**document, "exported_at": None}
    markdown = run(target, fake_ollama, "export", "--format", "markdown", "--conversation", conv).stdout
    assert markdown.startswith("# trip") and "Flights to Lisbon on May 4" in markdown and "**user**" in markdown


def test_import_of_a_bad_file_says_what_is_wrong_and_writes_nothing(
    tmp_path: Path, db: Database, fake_ollama: FakeOllama
) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"format": "ollama-mcp-export", "version": 1, "conversations": [{"id": "nope"}]}')
    done = run(db, fake_ollama, "import", str(bad))
    assert done.returncode == 2 and "conversations[0].id: is not a valid id" in done.stderr
    # Checked before the store is opened: a new store is not even created.
    if db.backend == "sqlite":
        assert not Path(db.url).exists()
    else:
        assert rows(db, "SELECT to_regclass('conversations')") == [(None,)]
    bad.write_text("{not json")
    assert "FILE: bad.json is not valid JSON" in run(db, fake_ollama, "import", str(bad)).stderr
    assert "cannot be read" in run(db, fake_ollama, "import", str(tmp_path / "missing.json")).stderr
    fill(db, fake_ollama)
    assert "No such file or directory" in run(db, fake_ollama, "export", "-o", str(tmp_path / "no" / "x.json")).stderr


def test_an_export_is_owner_only_and_an_existing_file_is_replaced_only_with_force(
    db: Database, fake_ollama: FakeOllama, tmp_path: Path
) -> None:
    fill(db, fake_ollama)
    backup = tmp_path / "backup.json"
    assert run(db, fake_ollama, "export", "-o", str(backup)).returncode == 0
    assert backup.stat().st_mode & 0o777 == 0o600
    before = backup.read_bytes()
    refused = run(db, fake_ollama, "export", "-o", str(backup), "--format", "markdown")
    assert refused.returncode == 2 and "--output" in refused.stderr and "pass --force to replace it" in refused.stderr
    assert backup.read_bytes() == before
    replaced = run(db, fake_ollama, "export", "-o", str(backup), "--format", "markdown", "--force")
    assert replaced.returncode == 0 and backup.read_text().startswith("#")
    assert backup.stat().st_mode & 0o777 == 0o600
    assert not list(tmp_path.glob(".backup.json.*"))  # no temporary file left behind


def test_a_failed_export_leaves_the_previous_export_byte_for_byte(
    db: Database, fake_ollama: FakeOllama, tmp_path: Path
) -> None:
    fill(db, fake_ollama)
    backup = tmp_path / "backup.json"
    assert run(db, fake_ollama, "export", "-o", str(backup)).returncode == 0
    before = backup.read_bytes()
    if db.backend == "sqlite":
        broken = tmp_path / "broken.db"
        broken.write_bytes(b"this is not a database" * 100)
        unreadable = str(broken)
    else:
        unreadable = "postgresql://nobody@127.0.0.1:9/nothing?connect_timeout=1"
    failed = run(db, fake_ollama, "export", "-o", str(backup), "--force", OLLAMA_MCP_DB=unreadable)
    assert failed.returncode == 2 and "exported" not in failed.stderr and "Traceback" not in failed.stderr
    assert ("is not a usable ollama-mcp database" if db.backend == "sqlite" else "127.0.0.1:9") in failed.stderr
    assert backup.read_bytes() == before
    assert not list(tmp_path.glob(".backup.json.*"))


@pytest.mark.parametrize("companion", ["", "-wal", "-shm", "-journal"])
def test_an_export_onto_the_database_or_its_companion_files_is_refused_before_opening_it(
    companion: str, db: Database, fake_ollama: FakeOllama, tmp_path: Path
) -> None:
    if db.backend != "sqlite":
        pytest.skip("a PostgreSQL store has no file to overwrite")
    fill(db, fake_ollama)
    stored = db.count("SELECT count(*) FROM memories")
    before = Path(db.url).read_bytes()
    done = run(db, fake_ollama, "export", "-o", db.url + companion, "--force")
    assert done.returncode == 2 and "is the memory database itself" in done.stderr
    assert "write the export to another file" in done.stderr
    assert Path(db.url).read_bytes() == before and db.count("SELECT count(*) FROM memories") == stored
    linked = tmp_path / "innocent.json"
    os.link(db.url, linked)  # another name for the same file
    assert "is the memory database itself" in run(db, fake_ollama, "export", "-o", str(linked), "--force").stderr
    assert Path(db.url).read_bytes() == before


def test_reembed_fills_missing_vectors_with_another_model_and_force_recomputes(
    db: Database, fake_ollama: FakeOllama
) -> None:
    fill(db, fake_ollama)
    fake_ollama.models["all-minilm"] = FakeModel(dim=64, family="bert")
    done = run(db, fake_ollama, "reembed", "--model", "all-minilm")
    assert done.returncode == 0, done.stderr
    assert "embedded 4 memories with all-minilm" in done.stdout
    assert "\r" not in done.stderr  # no progress line when not on a terminal
    assert rows(
        db, "SELECT count(DISTINCT memory_seq), min(dim) FROM memory_embeddings WHERE model = 'all-minilm'"
    ) == [(4, 64)]
    assert "embedded 0 memories" in run(db, fake_ollama, "reembed", "--model", "all-minilm").stdout
    before = rows(db, "SELECT max(id) FROM memory_embeddings")[0][0]
    forced = run(db, fake_ollama, "reembed", "--model", "all-minilm", "--force")
    assert "embedded 4 memories" in forced.stdout
    assert rows(db, "SELECT min(id) > ? FROM memory_embeddings WHERE model = 'all-minilm'", before) == [(1,)]


def test_reembed_with_ollama_down_fails_clearly_and_can_be_run_again(db: Database, fake_ollama: FakeOllama) -> None:
    fill(db, fake_ollama)
    fake_ollama.stop()
    done = run(db, fake_ollama, "reembed", "--force")
    assert done.returncode == 2 and "Ollama is not reachable" in done.stderr
    fake_ollama.start()
    assert "embedded 4 memories" in run(db, fake_ollama, "reembed").stdout


def test_prune_dry_run_lists_and_prune_deletes_expired_conversations(db: Database, fake_ollama: FakeOllama) -> None:
    conv = fill(db, fake_ollama)
    assert "would delete 0 conversation(s)" in run(db, fake_ollama, "prune", "--dry-run").stdout
    rows(db, "UPDATE conversations SET expires_at = '2000-01-01T00:00:00.000000Z'")
    dry = run(db, fake_ollama, "prune", "--dry-run")
    assert "would delete 1 conversation(s)" in dry.stdout and f"{conv}  trip" in dry.stdout
    assert rows(db, "SELECT count(*) FROM conversations") == [(1,)]
    assert "deleted 1 conversation(s)" in run(db, fake_ollama, "prune").stdout
    assert rows(db, "SELECT count(*) FROM conversations") == [(0,)] and rows(db, "SELECT count(*) FROM memories") == [
        (0,)
    ]


@pytest.mark.parametrize(("command", "phrase"), [
    ("export", "can be read back with `ollama-mcp import`"),
    ("import", "importing twice changes nothing"),
    ("reembed", "running it again resumes"),
    ("prune", "--dry-run"),
    ("shrink", "Nothing stored changes"),
    ("stats", "Read-only"),
    ("ui", "prints its link, which carries a fresh session token"),
])
def test_every_command_explains_itself_in_help(command: str, phrase: str) -> None:
    out = subprocess.run([str(SCRIPT), command, "--help"], capture_output=True, text=True, timeout=60, check=True)
    assert phrase in " ".join(out.stdout.split())


@pytest.mark.sqlite_only
@pytest.mark.parametrize("port", ["busy", "70000"])
def test_ui_on_a_port_it_cannot_use_exits_with_the_fix_and_opens_no_store(
    db: Database, fake_ollama: FakeOllama, port: str
) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        number = str(taken.getsockname()[1]) if port == "busy" else port
        done = run(db, fake_ollama, "ui", "--port", number)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.startswith("ollama-mcp: --port: ") and "--port 0 for any free one" in done.stderr
    assert not Path(db.url).exists()


def test_doctor_warns_about_a_missing_chat_model_without_failing(db: Database, fake_ollama: FakeOllama) -> None:
    del fake_ollama.models["qwen2.5:3b"]
    done = run(db, fake_ollama, "doctor")
    assert done.returncode == 0, done.stdout
    assert (
        "warn chat         Ollama at " in done.stdout
        and "does not have the model 'qwen2.5:3b'; run `ollama pull qwen2.5:3b`" in done.stdout
    )


def test_the_progress_line_shows_count_percent_and_eta_on_a_terminal_only() -> None:


    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    screen, pipe = Terminal(), io.StringIO()
    for stream in (screen, pipe):
        line = ProgressLine("embedding with m", 200, stream)
        line.started -= 10  # ten seconds in
        line.update(50)
        line.update(200)
        line.close()
    assert "\rembedding with m 50/200 (25%) ETA 30s" in screen.getvalue()
    assert "200/200 (100%) ETA 0s" in screen.getvalue() and screen.getvalue().endswith("\n")
    assert pipe.getvalue() == ""


@pytest.mark.parametrize("command", [["export"], ["export", "--format", "markdown"], ["prune", "--dry-run"]])
def test_reading_commands_on_a_store_that_does_not_exist_say_so_and_create_nothing(
    db_path: Path, fake_ollama: FakeOllama, command: list[str]
) -> None:
    done = run(Database("sqlite", str(db_path)), fake_ollama, *command)
    assert done.returncode == 2 and done.stdout == ""
    assert f"There is no memory database at {db_path}" in done.stderr and "Check OLLAMA_MCP_DB" in done.stderr
    assert not db_path.parent.exists()


def _client_block(client: str, text: str) -> dict[str, Any]:
    """The server entry a client would read from ``config --client``'s output."""
    if client == "claude-code":
        words = shlex.split(text)
        assert words[:6] == ["claude", "mcp", "add", "--scope", "user", "ollama-mcp"]
        end = words.index("--")
        pairs = words[6:end]
        assert pairs[::2] == ["-e"] * (len(pairs) // 2)  # the name stands before every -e
        env = dict(pair.split("=", 1) for pair in pairs[1::2])
        return {"command": words[end + 1], "args": words[end + 2:], "env": env}
    parsed = json.loads(text)
    return parsed["servers"]["ollama-mcp"] if client == "vscode" else parsed["mcpServers"]["ollama-mcp"]


@pytest.mark.anyio
@pytest.mark.parametrize("client", ["claude-desktop", "claude-code", "cursor", "vscode"])
async def test_config_prints_a_block_each_client_reads_that_starts_this_server(
    db: Database, fake_ollama: FakeOllama, client: str
) -> None:
    done = run(db, fake_ollama, "config", "--client", client, OLLAMA_MCP_EMBED_MODEL="nomic-embed-text")
    assert done.returncode == 0, done.stderr
    entry = _client_block(client, done.stdout)
    if client == "vscode":
        assert entry.pop("type") == "stdio"
    assert Path(entry["command"]).is_absolute() and entry["command"] == str(SCRIPT)
    assert entry["env"] == {"OLLAMA_HOST": fake_ollama.url, "OLLAMA_MCP_DB": db.url,
                            "OLLAMA_MCP_EMBED_MODEL": "nomic-embed-text", "OLLAMA_MCP_EMBED_TIMEOUT": "2"}
    # What the client then does: start it from / with only that environment, and use it.
    params = StdioServerParameters(command=entry["command"], args=entry["args"], env=entry["env"], cwd="/")
    async with Client(params, mode="legacy") as started:
        stored = await call(started, "store_memory", content="configured by config --client")
    assert stored["embedding_status"] == "embedded"


def test_config_leaves_a_postgresql_password_out_and_says_where_it_goes(fake_ollama: FakeOllama) -> None:
    url = "postgresql://memory:s3cret@db.example:5432/memory"
    done = run(Database("postgres", url), fake_ollama, "config", "--client", "claude-desktop")
    assert done.returncode == 0 and "s3cret" not in done.stdout
    assert _client_block("claude-desktop", done.stdout)["env"]["OLLAMA_MCP_DB"] == "postgresql://memory@db.example:5432/memory"
    assert "~/.pgpass" in done.stderr


def test_config_needs_a_known_client() -> None:
    done = subprocess.run([str(SCRIPT), "config", "--client", "emacs"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "claude-desktop" in done.stderr and "vscode" in done.stderr


def test_forget_older_than_counts_first_then_deletes_only_the_idle_conversations(
    db: Database, fake_ollama: FakeOllama
) -> None:
    from tests.support.traces import assert_no_trace  # noqa: PLC0415

    old_id = "11111111-1111-4111-8111-111111111111"
    old = {"format": "ollama-mcp-export", "version": 1, "conversations": [{
        "id": old_id, "name": "2020 trip", "status": "completed", "created_at": "2020-01-01T00:00:00Z",
        "ended_at": "2020-01-02T00:00:00Z", "memories": [
            {"id": "22222222-2222-4222-8222-222222222222", "content": "ancient", "created_at": "2020-01-01T00:00:00Z"},
            {"id": "33333333-3333-4333-8333-333333333333", "content": "older", "created_at": "2020-01-01T00:00:00Z"}]}]}
    recent = fill(db, fake_ollama)
    assert run(db, fake_ollama, "import", "-", stdin=json.dumps(old)).returncode == 0
    counted = run(db, fake_ollama, "forget", "--older-than", "90d", "--dry-run")
    assert counted.returncode == 0, counted.stderr
    assert counted.stdout.splitlines() == [
        "would delete 1 conversation(s) with 2 memories (versions, messages and summaries)",
        f"  {old_id}        2  2020 trip",
        "would delete 0 older memories from the conversations still in use"]
    assert rows(db, "SELECT count(*) FROM conversations") == [(2,)]
    done = run(db, fake_ollama, "forget", "--older-than", "90d")
    assert done.stdout.startswith("deleted 1 conversation(s) with 2 memories")
    assert_no_trace(db, old_id)
    assert rows(db, "SELECT id FROM conversations") == [(recent,)]


def test_forget_older_than_also_deletes_old_memories_of_a_conversation_still_in_use(
    db: Database, fake_ollama: FakeOllama
) -> None:
    recent = fill(db, fake_ollama)  # a conversation in use, with recent memories
    old = {"format": "ollama-mcp-export", "version": 1, "conversations": [{
        "id": recent, "name": "ignored: it exists", "status": "active", "created_at": "2020-01-01T00:00:00Z",
        "memories": [{"id": "44444444-4444-4444-8444-444444444444", "content": "the quokka password is ancient",
                      "created_at": "2020-01-01T00:00:00Z"}]}]}
    assert run(db, fake_ollama, "import", "-", stdin=json.dumps(old)).returncode == 0
    before = rows(db, "SELECT count(*) FROM memories")[0][0]
    assert db.keyword_matches("content", "quokka") == 1
    counted = run(db, fake_ollama, "forget", "--older-than", "90d", "--dry-run")
    assert counted.stdout.splitlines()[-1] == "would delete 1 older memories from the conversations still in use"
    done = run(db, fake_ollama, "forget", "--older-than", "90d")
    assert done.returncode == 0 and done.stdout.splitlines()[-1] == (
        "deleted 1 older memories from the conversations still in use")
    assert rows(db, "SELECT count(*) FROM memories") == [(before - 1,)]
    assert rows(db, "SELECT count(*) FROM memories WHERE id = '44444444-4444-4444-8444-444444444444'") == [(0,)]
    assert db.keyword_matches("content", "quokka") == 0 and db.keyword_matches("context", "quokka") == 0
    assert rows(db, "SELECT count(*) FROM memory_embeddings WHERE memory_seq NOT IN (SELECT seq FROM memories)") == [
        (0,)]
    assert rows(db, "SELECT id FROM conversations") == [(recent,)]
    assert rows(db, "SELECT door, action, memory_id FROM write_audit WHERE action = 'delete_memory'") == [
        ("cli", "delete_memory", "44444444-4444-4444-8444-444444444444")]


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--all"], "--all: deletes every conversation; add --yes to confirm"),
        (["--older-than", "soon"], "--older-than: is 'soon'; give an age such as 90d"),
        (
            ["--conversation", "11111111-1111-4111-8111-111111111111"],
            "no conversation 11111111-1111-4111-8111-111111111111",
        ),
    ],
)
def test_forget_refuses_what_it_cannot_do_safely_and_deletes_nothing(
    db: Database, fake_ollama: FakeOllama, args: list[str], said: str
) -> None:
    fill(db, fake_ollama)
    done = run(db, fake_ollama, "forget", *args)
    assert done.returncode == 2 and said in done.stderr, done.stderr
    assert rows(db, "SELECT count(*) FROM conversations") == [(1,)]


def test_forget_all_with_yes_leaves_an_empty_store(db: Database, fake_ollama: FakeOllama) -> None:
    fill(db, fake_ollama)
    done = run(db, fake_ollama, "forget", "--all", "--yes")
    assert done.returncode == 0 and done.stdout.startswith("deleted 1 conversation(s) with 4 memories")
    assert rows(db, "SELECT count(*) FROM memories") == [(0,)] and rows(db, "SELECT count(*) FROM conversations") == [
        (0,)
    ]


@pytest.mark.anyio
async def test_every_door_leaves_a_write_audit_row_without_the_text_and_audit_shows_them(
    settings: Settings, db: Database, fake_ollama: FakeOllama
) -> None:
    from dataclasses import replace as changed  # noqa: PLC0415

    from tests.support.agent import human, tool_call  # noqa: PLC0415

    secret = "the vault code is 8812"
    async with human(changed(settings, agent_confirm=()), None) as (client, _):
        conv = (await call(client, "init_conversation", name="doors"))["conversation_id"]
        stored = await call(client, "store_memory", content=secret)
        fake_ollama.enqueue_chat(tool_call("store_memory", content="noted by the agent"), "Saved.")
        await call(client, "ask_agent", query="note it", conversation_id=conv)
        await call(client, "delete_memory", memory_id=stored["memory_id"])
    document = {"format": "ollama-mcp-export", "version": 1, "conversations": [{
        "id": "11111111-1111-4111-8111-111111111111", "name": "old", "status": "completed",
        "created_at": "2020-01-01T00:00:00Z", "ended_at": "2020-01-02T00:00:00Z", "memories": []}]}
    imported = await anyio.to_thread.run_sync(lambda: run(db, fake_ollama, "import", "-", stdin=json.dumps(document)))
    assert imported.returncode == 0, imported.stderr
    forgot = await anyio.to_thread.run_sync(lambda: run(db, fake_ollama, "forget", "--conversation", conv))
    assert forgot.returncode == 0, forgot.stderr
    log = rows(db, "SELECT door, action, conversation_id, memory_id FROM write_audit ORDER BY id")
    assert [(door, action) for door, action, _, _ in log] == [
        ("tool", "init_conversation"), ("tool", "store_memory"),
        ("agent", "store_memory"), ("agent", "add_message"), ("agent", "add_message"), ("agent", "add_message"),
        ("agent", "add_message"),
        ("tool", "delete_memory"), ("import", "import"), ("cli", "delete_conversation")]
    assert log[1][2:] == (conv, stored["memory_id"]) and log[-1][2] == conv  # outlives what it deleted
    assert all(secret not in str(row) and "vault" not in str(row) for row in rows(db, "SELECT * FROM write_audit"))
    shown = await anyio.to_thread.run_sync(lambda: run(db, fake_ollama, "audit", "--limit", "3"))
    lines = shown.stdout.splitlines()
    assert len(lines) == 3 and "cli" in lines[0] and "delete_conversation" in lines[0] and conv in lines[0]
    assert "import" in lines[1] and "delete_memory" in lines[2]


def test_the_first_command_on_a_new_store_says_it_created_it_in_one_line(
    db: Database, fake_ollama: FakeOllama
) -> None:
    done = run(db, fake_ollama, "token", "create", "alice")
    assert done.returncode == 0, done.stderr
    logged = [line for line in done.stderr.splitlines() if " INFO " in line]
    assert len(logged) == 1 and "created the memory store at" in logged[0] and "(schema " in logged[0]
    again = run(db, fake_ollama, "token", "list")
    assert again.returncode == 0 and " INFO " not in again.stderr


def test_a_command_on_an_older_sqlite_store_says_from_which_schema_it_upgraded_it(
    tmp_path: Path, fake_ollama: FakeOllama
) -> None:
    path = tmp_path / "old.db"
    sqlite_store_at(path, 10)
    env = {"PATH": os.environ.get("PATH", ""), "HOME": "/nonexistent", "OLLAMA_HOST": fake_ollama.url,
           "OLLAMA_MCP_DB": str(path)}
    done = subprocess.run([str(SCRIPT), "token", "list"], capture_output=True, text=True, timeout=120, env=env, cwd="/")
    logged = [line for line in done.stderr.splitlines() if " INFO " in line]
    newest = sqlite_db.migrations()[-1].version
    assert done.returncode == 0 and len(logged) == 1
    assert f"upgraded the memory store at {path} from schema 10 to {newest} ({newest - 10} migrations)" in logged[0]


@pytest.mark.sqlite_only
@pytest.mark.slow
def test_shrink_gives_an_older_stores_free_space_back_keeping_every_conversations_key_and_ranking(
    tmp_path: Path, fake_ollama: FakeOllama
) -> None:
    """A store made before schema 18 keeps its free pages (auto_vacuum off); doctor says so, and
    `shrink` gives them back. The conversations' keys (which vector blocks keep per slot) survive
    the upgrade and the VACUUM, gaps and all, and a search of one conversation ranks as before."""
    path = tmp_path / "old.db"
    sqlite_store_at(path, 17)
    with closing(sqlite3.connect(path, isolation_level=None)) as conn:
        for n, name in enumerate(("kept", "dropped", "filler"), start=1):
            conn.execute("INSERT INTO conversations (id, name, created_at) VALUES (?, ?, '2026-01-01')",
                         (f"00000000-0000-4000-8000-00000000000{n}", name))
        conn.execute("DELETE FROM conversations WHERE name = 'dropped'")  # keys 1 and 3: a gap
    kept, filler = "00000000-0000-4000-8000-000000000001", "00000000-0000-4000-8000-000000000003"
    settings = Settings.from_env({"OLLAMA_MCP_DB": str(path), "OLLAMA_HOST": fake_ollama.url})

    async def searched() -> list[list[str]]:
        async with open_app(settings, background=False) as app:
            while await app.indexer.backfill_once():
                pass
            await app.ranker.upkeep()  # (folds the vectors into blocks: their slots keep the keys)
            found = [await app.recall.search(SearchRequest(query, top_k=3, conversation_id=kept))
                     for query in ("lisbon flights", "hotel booking", "museum tickets")]
            return [[hit.memory.content for hit in outcome.hits] for outcome in found]

    async def fill() -> None:
        async with open_app(settings, background=False) as app:
            for text in ("Flights to Lisbon on May 3", "The hotel is booked near the river",
                         "Museum tickets for Saturday"):
                await app.memories.store(new_note(text, kept))
            await app.memories.import_notes(
                notes_to_import(filler, [f"{i} " + "filler text " * 4000 for i in range(450)])
            )

    anyio.run(fill)
    with closing(sqlite3.connect(path, isolation_level=None)) as conn:
        conn.execute("PRAGMA foreign_keys = ON")
        conn.execute("DELETE FROM conversations WHERE id = ?", (filler,))  # ~20 MB of text: free pages
        assert conn.execute("PRAGMA auto_vacuum").fetchone() == (0,)
    before = anyio.run(searched)
    assert before[0][0] == "Flights to Lisbon on May 3"
    db = Database("sqlite", str(path))
    db.rows("PRAGMA wal_checkpoint(TRUNCATE)")
    free = db.count("PRAGMA freelist_count") * db.count("PRAGMA page_size")
    assert free > 16 * 2**20
    doctor = run(db, fake_ollama, "doctor")
    assert "FAIL disk" not in doctor.stdout and "warn disk" in doctor.stdout and "ollama-mcp shrink" in doctor.stdout
    size = path.stat().st_size
    done = run(db, fake_ollama, "shrink")
    assert done.returncode == 0, done.stderr
    assert f"{path}: " in done.stdout and "MiB given back" in done.stdout
    wal = Path(f"{path}-wal")
    page = db.count("PRAGMA page_size")  # (auto_vacuum adds a pointer-map page: one per 800 at this size)
    assert path.stat().st_size <= size - free + page and (not wal.exists() or wal.stat().st_size == 0)
    assert db.rows("PRAGMA auto_vacuum") == [(2,)] and db.rows("PRAGMA integrity_check") == [("ok",)]
    assert db.rows("SELECT key, rowid, id FROM conversations") == [(1, 1, kept)]
    assert anyio.run(searched) == before
    assert "disk" not in run(db, fake_ollama, "doctor").stdout


def test_shrink_says_postgresql_needs_nothing_and_creates_no_missing_file(
    db: Database, fake_ollama: FakeOllama, tmp_path: Path
) -> None:
    if db.backend == "postgres":
        done = run(db, fake_ollama, "shrink")
        assert done.returncode == 0 and "PostgreSQL gives the space of deleted rows back by itself" in done.stdout
        return
    missing = Database("sqlite", str(tmp_path / "none.db"))
    done = run(missing, fake_ollama, "shrink")
    assert done.returncode == 2 and "There is no memory database at" in done.stderr
    assert not (tmp_path / "none.db").exists()

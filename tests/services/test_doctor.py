"""`ollama-mcp doctor`: one plain line per check, the fix for each failure, exit 1 when use is blocked."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import anyio
import pytest

from ollama_mcp.app import open_app
from ollama_mcp.config import Settings
from ollama_mcp.inputs.memories import note as new_note
from ollama_mcp.inputs.memories import note_change
from ollama_mcp.storage.postgres.db import migrations as postgres_migrations
from ollama_mcp.storage.sqlite.db import migrations
from tests.conftest import Database
from tests.support.fake_ollama import FakeModel, FakeOllama
from tests.support.stores import damage, make_store, url

SCRIPT = Path(sys.executable).parent / "ollama-mcp"


def doctor(db: Database | Path, fake: FakeOllama, **more: str) -> subprocess.CompletedProcess[str]:
    env = {"PATH": os.environ.get("PATH", ""), "HOME": "/nonexistent", "OLLAMA_HOST": fake.url,
           "OLLAMA_MCP_DB": url(db), "OLLAMA_MCP_EMBED_TIMEOUT": "2", **more}
    return subprocess.run([str(SCRIPT), "doctor"], capture_output=True, text=True, timeout=60, env=env, cwd="/")


def test_doctor_passes_on_a_working_setup_and_creates_nothing(db: Database, fake_ollama: FakeOllama) -> None:
    done = doctor(db, fake_ollama)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "ok   database" in done.stdout and "created on first use" in done.stdout
    assert "ok   ollama" in done.stdout and "256-dimensional" in done.stdout
    assert "All checks passed." in done.stdout
    if db.backend == "sqlite":
        assert not Path(db.url).exists()
    else:
        assert "ok   postgres     PostgreSQL 16" in done.stdout and "ok   pgvector     pgvector 0." in done.stdout
        assert db.count("SELECT count(*) FROM pg_tables WHERE schemaname = 'public'") == 0


def test_doctor_reports_the_store_and_pending_memories(db: Database, fake_ollama: FakeOllama) -> None:
    fake_ollama.stop()
    make_store(db, fake_ollama, "one", "two")
    fake_ollama.start()
    done = doctor(db, fake_ollama)
    assert done.returncode == 0, done.stdout
    newest = (migrations() if db.backend == "sqlite" else postgres_migrations())[-1].version
    assert f"2 memories, schema {newest}" in done.stdout
    assert "warn pending" not in done.stdout
    assert "2 memories wait for their vectors and 2 for their in-context vectors" in done.stdout


def test_doctor_finds_a_store_with_tagged_and_corrected_memories_sound(db: Database, fake_ollama: FakeOllama) -> None:
    # SQLite 3.40's quick_check reports every memory_tags row as "NULL value in ..." (a false finding).
    async def fill() -> None:
        async with open_app(Settings.from_env({"OLLAMA_MCP_DB": url(db), "OLLAMA_HOST": fake_ollama.url}),
                            background=False) as app:
            stored = await app.memories.store(new_note("Sam prefers window seats", tags=["travel", "sam"]))
            await app.memories.update(note_change(stored.memory.id, "Sam prefers aisle seats"))

    anyio.run(fill)
    done = doctor(db, fake_ollama)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "ok   database" in done.stdout and "All checks passed." in done.stdout


def test_doctor_fails_with_the_fix_when_ollama_is_down(db: Database, fake_ollama: FakeOllama) -> None:
    fake_ollama.stop()
    done = doctor(db, fake_ollama)
    assert done.returncode == 1
    assert "FAIL ollama" in done.stdout and "not reachable" in done.stdout and "ollama serve" in done.stdout


def test_doctor_names_the_pull_command_for_a_missing_model(db: Database, fake_ollama: FakeOllama) -> None:
    del fake_ollama.models["nomic-embed-text"]
    done = doctor(db, fake_ollama)
    assert done.returncode == 1 and "ollama pull nomic-embed-text" in done.stdout


def test_doctor_suggests_the_pulled_model_a_chat_model_name_was_meant_to_be(
    db: Database, fake_ollama: FakeOllama
) -> None:
    fake_ollama.models["qwen2.5:3b-instruct"] = fake_ollama.models.pop("qwen2.5:3b")
    done = doctor(db, fake_ollama)
    assert ("warn chat         Ollama at " in done.stdout and "does not have the model 'qwen2.5:3b'; you have pulled "
            "'qwen2.5:3b-instruct', which is close: set OLLAMA_MCP_CHAT_MODEL=qwen2.5:3b-instruct." in done.stdout)


def test_doctor_names_a_misspelt_setting_and_the_one_it_was_meant_to_be(db: Database, fake_ollama: FakeOllama) -> None:
    done = doctor(db, fake_ollama, OLLAMA_MCP_EMBEDMODEL="mxbai-embed-large")
    assert done.returncode == 0, done.stdout
    assert ("warn settings     OLLAMA_MCP_EMBEDMODEL is not a setting ollama-mcp reads, so it changes nothing;"
            " did you mean OLLAMA_MCP_EMBED_MODEL?") in done.stdout
    assert "warn (settings)" in done.stdout.strip().splitlines()[-1]


def test_doctor_with_a_warning_exits_0_but_its_last_line_says_what_is_degraded(
    db: Database, fake_ollama: FakeOllama
) -> None:
    fake_ollama.models.pop("qwen2.5:3b")  # a mistyped chat model: summaries and ask_agent cannot run
    done = doctor(db, fake_ollama)
    assert done.returncode == 0, done.stdout  # storing and searching work
    last = done.stdout.strip().splitlines()[-1]
    assert "All checks passed" not in done.stdout
    assert last.startswith("Storing and searching work, but 1 check(s) warn (chat)"), last


def test_doctor_catches_a_model_that_changed_dimension(db: Database, fake_ollama: FakeOllama) -> None:
    make_store(db, fake_ollama, "stored at 256 dimensions")
    fake_ollama.models["nomic-embed-text"] = FakeModel(dim=64)
    done = doctor(db, fake_ollama)
    assert done.returncode == 1 and "FAIL vectors" in done.stdout and "have 256 dimensions" in done.stdout


def test_doctor_refuses_a_database_from_a_newer_version(db: Database, fake_ollama: FakeOllama) -> None:
    make_store(db, fake_ollama, "x")
    db.rows("INSERT INTO schema_migrations (version, name, applied_at) VALUES (9999, 'future', now())"
            if db.backend == "postgres" else "INSERT INTO schema_migrations VALUES (9999, 'future', 'later')")
    done = doctor(db, fake_ollama)
    assert done.returncode == 1
    assert "FAIL schema" in done.stdout and "upgrade ollama-mcp" in done.stdout


def test_doctor_warns_when_the_database_file_is_readable_by_others(db_path: Path, fake_ollama: FakeOllama) -> None:
    make_store(db_path, fake_ollama, "x")
    db_path.chmod(0o644)
    done = doctor(db_path, fake_ollama)
    assert done.returncode == 0
    assert "warn permissions" in done.stdout and f"chmod 600 {db_path}" in done.stdout


@pytest.mark.parametrize("command", [["doctor", "--help"], ["--help"]])
def test_help_explains_doctor(command: list[str]) -> None:
    out = subprocess.run([str(SCRIPT), *command], capture_output=True, text=True, timeout=60, check=True).stdout
    assert "doctor" in out


def test_stats_counts_what_the_store_holds(db: Database, fake_ollama: FakeOllama) -> None:
    make_store(db, fake_ollama, "one", "two", "three")
    env = {"PATH": os.environ.get("PATH", ""), "HOME": "/nonexistent", "OLLAMA_MCP_DB": db.url,
           "OLLAMA_HOST": "127.0.0.1:9"}  # stats needs no Ollama
    out = subprocess.run([str(SCRIPT), "stats"], capture_output=True, text=True, timeout=60, env=env, check=True).stdout
    if db.backend == "postgres":
        assert "PostgreSQL 16" in out and "pgvector 0." in out
        assert "HNSW nomic-embed-text (256 dimensions, content): ready" in out
        assert (
            "HNSW nomic-embed-text (256 dimensions, context): ready" in out
            and "postgres" not in out.split("database")[1][:0]
        )
    else:
        assert "SQLite 3." in out
    assert "1 (1 active, 0 completed)" in out
    assert "3 notes, 0 summaries, 0 messages" in out
    assert "0 without a vector of 'nomic-embed-text' (the configured model); 2 waiting for their in-context" in out
    assert "nomic-embed-text: 3 memories, 256 dimensions" in out


@pytest.mark.parametrize("how", ["random bytes", "truncated", "another program's database", "a damaged page"])
def test_doctor_and_stats_name_a_damaged_database_with_what_to_do_and_leave_it(
    db_path: Path, fake_ollama: FakeOllama, how: str
) -> None:
    if how == "another program's database":
        db_path.parent.mkdir(parents=True)
        with sqlite3.connect(db_path) as conn:
            conn.execute("CREATE TABLE photos (name TEXT)")
        conn.close()
    else:

        damage(db_path, fake_ollama, how)
    before = db_path.read_bytes()
    checked = doctor(db_path, fake_ollama)
    env = {"PATH": os.environ.get("PATH", ""), "HOME": "/nonexistent", "OLLAMA_MCP_DB": str(db_path)}
    counted = subprocess.run([str(SCRIPT), "stats"], capture_output=True, text=True, timeout=60, env=env)
    assert checked.returncode == 1
    message = f"The file {db_path} is not a usable ollama-mcp database"
    assert f"FAIL database     {message}" in checked.stdout
    said_by = [checked.stdout]
    if how == "a damaged page":  # only a full read finds it: quick_check lists it, or stops on it
        assert "quick_check found: *** in database main ***" in checked.stdout or "malformed" in checked.stdout
    else:
        assert counted.returncode == 2 and counted.stderr.startswith(f"ollama-mcp: {message}")
        said_by.append(counted.stderr)
    for said in said_by:
        assert "it was left as it is. Move it aside to start a new store there, restore a backup" in said
    assert db_path.read_bytes() == before


def test_doctor_fails_with_the_fix_when_the_store_could_not_be_created_there(fake_ollama: FakeOllama) -> None:
    # /sys refuses new files even to root, whom every permission-bit test lets through
    done = doctor(Path("/sys/ollama-mcp/memory.db"), fake_ollama)
    assert done.returncode == 1
    assert ("FAIL database     /sys/ollama-mcp/memory.db cannot be created: /sys refuses new files"
            in done.stdout), done.stdout
    assert "Set OLLAMA_MCP_DB to an absolute path in a folder you can write to." in done.stdout
    assert not Path("/sys/ollama-mcp").exists()


def test_stats_count_one_of_a_kind_in_the_singular(db: Database, fake_ollama: FakeOllama) -> None:
    make_store(db, fake_ollama, "one")
    done = subprocess.run([str(SCRIPT), "stats"], capture_output=True, text=True, timeout=60, cwd="/",
                          env={"PATH": os.environ.get("PATH", ""), "HOME": "/nonexistent", "OLLAMA_MCP_DB": db.url,
                               "OLLAMA_HOST": fake_ollama.url})
    assert "1 note, 0 summaries, 0 messages" in done.stdout, done.stdout  # it said "1 notes", "1 summaries"

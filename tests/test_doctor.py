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
from ollama_mcp.db import migrations
from tests.fake_ollama import FakeModel, FakeOllama

SCRIPT = Path(sys.executable).parent / "ollama-mcp"


def doctor(db: Path, fake: FakeOllama) -> subprocess.CompletedProcess[str]:
    env = {"PATH": os.environ.get("PATH", ""), "HOME": str(db.parent), "OLLAMA_HOST": fake.url,
           "OLLAMA_MCP_DB": str(db), "OLLAMA_MCP_EMBED_TIMEOUT": "2"}
    return subprocess.run([str(SCRIPT), "doctor"], capture_output=True, text=True, timeout=60, env=env, cwd="/")


def make_store(db: Path, fake: FakeOllama, *texts: str) -> None:
    async def fill() -> None:
        async with open_app(Settings.from_env({"OLLAMA_MCP_DB": str(db), "OLLAMA_HOST": fake.url}),
                            background=False) as app:
            for text in texts:
                await app.service.store_memory(text)

    anyio.run(fill)


def test_doctor_passes_on_a_working_setup_and_creates_nothing(db_path: Path, fake_ollama: FakeOllama) -> None:
    done = doctor(db_path, fake_ollama)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "ok   database" in done.stdout and "will be created on first use" in done.stdout
    assert "ok   ollama" in done.stdout and "256-dimensional" in done.stdout
    assert "All checks passed." in done.stdout
    assert not db_path.exists()


def test_doctor_reports_the_store_and_pending_memories(db_path: Path, fake_ollama: FakeOllama) -> None:
    fake_ollama.stop()
    make_store(db_path, fake_ollama, "one", "two")
    fake_ollama.start()
    done = doctor(db_path, fake_ollama)
    assert done.returncode == 0, done.stdout
    assert f"2 memories, schema {migrations()[-1].version}" in done.stdout
    assert "warn pending" not in done.stdout and "2 memories wait for their vectors" in done.stdout


def test_doctor_fails_with_the_fix_when_ollama_is_down(db_path: Path, fake_ollama: FakeOllama) -> None:
    fake_ollama.stop()
    done = doctor(db_path, fake_ollama)
    assert done.returncode == 1
    assert "FAIL ollama" in done.stdout and "not reachable" in done.stdout and "ollama serve" in done.stdout


def test_doctor_names_the_pull_command_for_a_missing_model(db_path: Path, fake_ollama: FakeOllama) -> None:
    del fake_ollama.models["nomic-embed-text"]
    done = doctor(db_path, fake_ollama)
    assert done.returncode == 1 and "ollama pull nomic-embed-text" in done.stdout


def test_doctor_catches_a_model_that_changed_dimension(db_path: Path, fake_ollama: FakeOllama) -> None:
    make_store(db_path, fake_ollama, "stored at 256 dimensions")
    fake_ollama.models["nomic-embed-text"] = FakeModel(dim=64)
    done = doctor(db_path, fake_ollama)
    assert done.returncode == 1 and "FAIL vectors" in done.stdout and "have 256 dimensions" in done.stdout


def test_doctor_refuses_a_database_from_a_newer_version_and_warns_on_open_permissions(
    db_path: Path, fake_ollama: FakeOllama
) -> None:
    make_store(db_path, fake_ollama, "x")
    with sqlite3.connect(db_path) as conn:
        conn.execute("INSERT INTO schema_migrations VALUES (9999, 'future', 'later')")
    db_path.chmod(0o644)
    done = doctor(db_path, fake_ollama)
    assert done.returncode == 1
    assert "FAIL schema" in done.stdout and "upgrade ollama-mcp" in done.stdout
    assert "warn permissions" in done.stdout and f"chmod 600 {db_path}" in done.stdout


@pytest.mark.parametrize("command", [["doctor", "--help"], ["--help"]])
def test_help_explains_doctor(command: list[str]) -> None:
    out = subprocess.run([str(SCRIPT), *command], capture_output=True, text=True, timeout=60, check=True).stdout
    assert "doctor" in out


def test_stats_counts_what_the_store_holds(db_path: Path, fake_ollama: FakeOllama) -> None:
    make_store(db_path, fake_ollama, "one", "two", "three")
    env = {"PATH": os.environ.get("PATH", ""), "HOME": str(db_path.parent), "OLLAMA_MCP_DB": str(db_path),
           "OLLAMA_HOST": "127.0.0.1:9"}  # stats needs no Ollama
    out = subprocess.run([str(SCRIPT), "stats"], capture_output=True, text=True, timeout=60, env=env, check=True).stdout
    assert "1 (1 active, 0 completed)" in out
    assert "3 notes, 0 summaries, 0 messages" in out
    assert "0 without a vector of 'nomic-embed-text'" in out
    assert "nomic-embed-text: 3 memories, 256 dimensions" in out

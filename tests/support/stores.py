"""Stores filled as the server fills them, for tests that then read them some other way."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import anyio

from ollama_mcp.app import open_app
from ollama_mcp.config import Settings
from ollama_mcp.inputs.memories import note as new_note
from tests.conftest import Database
from tests.support.fake_ollama import FakeOllama


def make_store(db: Database | Path, fake: FakeOllama, *texts: str) -> None:
    async def fill() -> None:
        async with open_app(Settings.from_env({"OLLAMA_MCP_DB": url(db), "OLLAMA_HOST": fake.url}),
                            background=False) as app:
            for text in texts:
                await app.memories.store(new_note(text))

    anyio.run(fill)


def url(db: Database | Path) -> str:
    return db.url if isinstance(db, Database) else str(db)


def damage(db_path: Path, fake: FakeOllama, how: str) -> None:
    db_path.parent.mkdir(parents=True, exist_ok=True)
    if how == "random bytes":
        db_path.write_bytes(os.urandom(8192))
        return
    make_store(db_path, fake, *(f"memory number {i} " + "lorem ipsum " * 80 for i in range(300)))
    with db_path.open("r+b") as file:
        if how == "truncated":  # a copy cut short, as by a full disk or an interrupted sync
            file.truncate(db_path.stat().st_size // 2)
        else:  # one damaged page of the keyword index: only a full read (quick_check) or a search finds it
            with sqlite3.connect(db_path) as conn:
                page = conn.execute(
                    "SELECT max(pageno) FROM dbstat WHERE name = 'memory_contexts_fts_data'"
                ).fetchone()[0]
                size = conn.execute("PRAGMA page_size").fetchone()[0]
            conn.close()
            file.seek((page - 1) * size + 8)
            file.write(b"\xff" * 32)


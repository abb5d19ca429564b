"""Checks that a deleted conversation left nothing behind."""

from __future__ import annotations

import sqlite3

from tests.conftest import Database


def assert_no_trace(db: Database, conversation_id: str) -> None:
    """Every table: nothing left of the conversation, and the keyword indexes match their rows."""
    for table in ("conversations WHERE id", "memories WHERE conversation_id", "jobs WHERE conversation_id",
                  "agent_audit WHERE conversation_id"):
        assert db.count(f"SELECT count(*) FROM {table} = ?", conversation_id) == 0, table
    vector_tables = (
        ("memory_tags", "memory_embeddings") if db.backend == "sqlite" else ("memory_embeddings", "embedding_leases")
    )
    for table in vector_tables:
        assert db.count(f"SELECT count(*) FROM {table} WHERE memory_seq NOT IN (SELECT seq FROM memories)") == 0, table
    if db.backend != "sqlite":
        return  # PostgreSQL's keyword entries are generated columns of the rows themselves
    with sqlite3.connect(db.url) as conn:
        for fts in ("memories_fts", "memory_contexts_fts"):
            conn.execute(f"INSERT INTO {fts} ({fts}) VALUES ('integrity-check')")
            docs = conn.execute(f"SELECT count(*) FROM {fts}_docsize").fetchone()
            assert docs == conn.execute("SELECT count(*) FROM memories").fetchone(), fts
        assert conn.execute("PRAGMA foreign_key_check").fetchall() == []
        # The change log keeps the seqs of deleted memories (for other processes' keyword
        # indexes), never their words.
        assert [row[1] for row in conn.execute("PRAGMA table_info(memory_changes)")] == ["id", "memory_seq"]

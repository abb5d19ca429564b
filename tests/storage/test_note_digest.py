"""A note's digest (SQLite schema 24, PostgreSQL 21): the first 16 bytes of its text's sha256,
kept on notes only, by which a retried store or import finds the note already there. A turn's
redacted text is computed when it is redacted (tests/services/test_retention_modes.py)."""

from __future__ import annotations

import hashlib
import sqlite3
from contextlib import closing
from pathlib import Path

import psycopg
import pytest

from ollama_mcp.app import App, open_app
from ollama_mcp.config import Settings
from ollama_mcp.inputs.conversations import new_conversation
from ollama_mcp.inputs.memories import note as new_note
from ollama_mcp.inputs.memories import notes_to_import
from ollama_mcp.inputs.turns import parse_turns
from ollama_mcp.storage.memory_rules import content_hash, text_digest
from ollama_mcp.storage.postgres import db as postgres_db
from tests.conftest import Database, sqlite_store_at

pytestmark = pytest.mark.anyio


async def test_a_note_keeps_16_bytes_of_its_texts_sha256_and_other_kinds_keep_none(
    app: App, db: Database
) -> None:
    conv = await app.conversations.start(new_conversation("digests"))
    note = (await app.memories.store(new_note("the spare key is under the blue pot", conv.id))).memory
    turns, _was_retry = await app.transcript.add_messages(
        conv.id, parse_turns("messages", [{"role": "user", "content": "where is the key?"}])
    )
    rows = db.rows("SELECT id, kind, note_digest FROM memories ORDER BY seq")
    assert [(i, k, None if d is None else bytes(d)) for i, k, d in rows] == [
        (note.id, "note", hashlib.sha256(b"the spare key is under the blue pot").digest()[:16]),
        (turns[0].id, "message", None),
    ]


async def test_a_note_stored_or_imported_again_is_found_by_its_digest_and_nothing_is_added(
    app: App, db: Database
) -> None:
    conv = await app.conversations.start(new_conversation("retries"))
    first = (await app.memories.store(new_note("water the fig on Sundays", conv.id))).memory
    again = await app.memories.store(new_note("water the fig on Sundays", conv.id))
    assert again.duplicate and again.memory.id == first.id
    # An import of 1,200 notes, 600 of them there already: more than one statement's worth of
    # digests (500) is asked for, and each is found.
    texts = [f"plant {n} wants water every {n % 7 + 1} days" for n in range(1200)]
    assert await app.memories.import_notes(notes_to_import(conv.id, texts[:600])) == 600
    assert (
        await app.memories.import_notes(notes_to_import(conv.id, [*texts, "water the fig on Sundays", texts[-1]]))
        == 600
    )
    assert db.count("SELECT count(*) FROM memories WHERE kind = 'note'") == 1201
    assert db.count("SELECT count(DISTINCT content) FROM memories") == 1201
    other = await app.conversations.start(new_conversation("elsewhere"))  # once per conversation, not once in all
    assert not (await app.memories.store(new_note("water the fig on Sundays", other.id))).duplicate


async def test_a_note_without_its_digest_or_a_turn_with_one_is_refused_by_the_table(app: App, db: Database) -> None:
    conv = await app.conversations.start(new_conversation("rules"))
    # (SQLite: the conversation's key too; PostgreSQL: the context and time it stores)
    more, values = (", conversation_key", ", (SELECT key FROM conversations WHERE id = ?)") \
        if db.backend == "sqlite" else (", context, occurred_at", ", 'x', '2026-01-01'")
    insert = (f"INSERT INTO memories (id, conversation_id, kind, content, note_digest, created_at{more})"
              f" VALUES (?, ?, ?, 'x', ?, '2026-01-01'{values})")
    for memory_id, kind, digest in (("n1", "note", None), ("n2", "note", b"short"), ("t1", "message", b"x" * 16)):
        params = [memory_id, conv.id, kind, digest, *([conv.id] if db.backend == "sqlite" else [])]
        with pytest.raises((sqlite3.IntegrityError, psycopg.errors.CheckViolation),
                           match="CHECK constraint failed|memories_note_digest"):
            db.rows(insert, *params)
    assert db.count("SELECT count(*) FROM memories") == 0


@pytest.mark.sqlite_only
async def test_an_upgraded_sqlite_store_keeps_each_notes_digest_and_finds_it_on_a_retry(
    settings: Settings, tmp_path: Path
) -> None:
    """Schema 24 copies the table: each note's digest is computed from its text (whatever the
    column held), every other kind's is dropped, a redacted turn keeps its text."""
    path = tmp_path / "old" / "memory.db"
    sqlite_store_at(path, 23)
    conv = "0e5c4a1e-0000-4000-8000-000000000001"
    redacted = "sha256:" + content_hash("the old secret")
    rows = [  # (id, kind, content, content_hash as versions before 24 wrote it)
        ("0e5c4a1e-0000-4000-8000-000000000101", "note", "the boiler code is 4471",
         content_hash("the boiler code is 4471")),
        ("0e5c4a1e-0000-4000-8000-000000000102", "message", "what is the code?", content_hash("what is the code?")),
        ("0e5c4a1e-0000-4000-8000-000000000103", "message", redacted, content_hash("the old secret")),
        ("0e5c4a1e-0000-4000-8000-000000000104", "note", "a note from a test fixture", "h4"),  # not hex
    ]
    with closing(sqlite3.connect(path, isolation_level=None)) as conn:
        conn.execute("PRAGMA foreign_keys = ON")
        conn.execute("INSERT INTO conversations (id, name, created_at) VALUES (?, 'c', '2026-01-01')", (conv,))
        for memory_id, kind, content, digest in rows:
            conn.execute(
                "INSERT INTO memories (id, conversation_id, conversation_key, kind, content, content_hash, created_at,"
                " metadata) VALUES (?, ?2, (SELECT key FROM conversations WHERE id = ?2), ?, ?, ?, '2026-01-01', ?)",
                (memory_id, conv, kind, content, digest, '{"redacted": "audit-only"}' if content == redacted else "{}"),
            )
    db = Database("sqlite", str(path))
    async with open_app(db.settings(settings), background=False) as app:
        again = await app.memories.store(new_note("the boiler code is 4471", conv))
        assert again.duplicate and again.memory.id == rows[0][0]
        assert await app.memories.import_notes(notes_to_import(conv, ["a note from a test fixture", "a new note"])) == 1
    assert db.rows("SELECT m.id FROM memories_fts f JOIN memories m ON m.seq = f.rowid"
                   " WHERE memories_fts MATCH 'boiler'") == [(rows[0][0],)]
    assert db.rows("SELECT id, content, note_digest FROM memories WHERE seq <= 4 ORDER BY seq") == [
        (rows[0][0], "the boiler code is 4471", text_digest("the boiler code is 4471")),
        (rows[1][0], "what is the code?", None),
        (rows[2][0], redacted, None),
        (rows[3][0], "a note from a test fixture", text_digest("a note from a test fixture")),
    ]
    assert db.rows("PRAGMA integrity_check") == [("ok",)] and db.rows("PRAGMA foreign_key_check") == []
    assert [c[1] for c in db.rows("PRAGMA table_info(memories)") if "digest" in c[1] or "hash" in c[1]] == [
        "note_digest"
    ]


@pytest.mark.postgres_only
async def test_an_upgraded_postgres_store_keeps_each_notes_digest_and_finds_it_on_a_retry(
    settings: Settings, postgres_url: str
) -> None:
    """PostgreSQL's migration 21 does in place what SQLite's 24 does by a copy."""
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        conn.execute("CREATE TABLE schema_migrations (version integer PRIMARY KEY, name text NOT NULL,"
                     " applied_at timestamptz NOT NULL DEFAULT now())")
        for migration in [m for m in postgres_db.migrations() if m.version <= 20]:
            conn.execute(migration.sql)
            conn.execute("INSERT INTO schema_migrations (version, name) VALUES (%s, %s)",
                         (migration.version, migration.name))
        conv = "0e5c4a1e-0000-4000-8000-000000000001"
        conn.execute("INSERT INTO conversations (id, name, created_at) VALUES (%s, 'c', '2026-01-01')", (conv,))
        for memory_id, kind, content in (("m1", "note", "the boiler code is 4471"),
                                         ("m2", "message", "what is the code?")):
            conn.execute(
                "INSERT INTO memories (id, conversation_id, kind, content, content_hash, context, created_at,"
                " occurred_at) VALUES (%s, %s, %s, %s, %s, %s, '2026-01-01', '2026-01-01')",
                (memory_id, conv, kind, content, content_hash(content), content),
            )
    async with open_app(settings, background=False) as app:
        again = await app.memories.store(new_note("the boiler code is 4471", conv))
        assert again.duplicate and again.memory.id == "m1"
    db = Database("postgres", postgres_url)
    assert db.rows("SELECT id, note_digest FROM memories ORDER BY seq") == [
        ("m1", text_digest("the boiler code is 4471")), ("m2", None),
    ]

"""A conversation's last activity (the latest of its start, its end and its memories' times),
which list_conversations orders by and retention reads: SQLite keeps its newest memory's time on
the conversation's row (sqlite/migrations/0022), PostgreSQL reads it from an index; both must agree."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from dataclasses import replace
from pathlib import Path

import anyio
import pytest

from ollama_mcp.app import App, open_app
from ollama_mcp.config import Settings
from ollama_mcp.inputs.conversations import conversation_query, new_conversation
from ollama_mcp.inputs.memories import note as new_note
from ollama_mcp.inputs.memories import notes_to_import
from ollama_mcp.storage.memory_rules import content_hash, text_digest
from tests.conftest import Database, sqlite_store_at

pytestmark = pytest.mark.anyio


async def listed(app: App) -> list[tuple[str, str | None]]:
    return [(c.id, c.last_activity) for c in await app.conversations.listed(conversation_query())]


async def test_a_conversations_last_activity_is_its_newest_memory_through_stores_batches_and_deletes(
    app: App,
) -> None:
    older = await app.conversations.start(new_conversation("older"))
    newer = await app.conversations.start(new_conversation("newer"))
    note = (await app.memories.store(new_note("the newer conversation's one note", newer.id))).memory
    await anyio.sleep(0.01)
    assert (
        await app.memories.import_notes(notes_to_import(older.id, ["batch one", "batch two", "batch three"])) == 3
    )
    _, batch, _ = await app.conversations.snapshot(older.id)
    assert len(batch) == 3 and len({m.created_at for m in batch}) == 1  # one batch, one time
    at = batch[0].created_at
    assert await listed(app) == [(older.id, at), (newer.id, note.created_at)]
    assert await app.conversations.ids(idle_before=note.created_at) == []

    await app.memories.delete(batch[2].id)  # the newest time stays: two memories have it
    await app.memories.delete(batch[0].id)
    assert await listed(app) == [(older.id, at), (newer.id, note.created_at)]

    await app.memories.delete(batch[1].id)  # the last of them: back to the conversation's start
    assert await listed(app) == [(newer.id, note.created_at), (older.id, older.created_at)]
    assert await app.conversations.ids(idle_before=note.created_at) == [older.id]

    again = (await app.memories.store(new_note("the older conversation speaks again", older.id))).memory
    assert await listed(app) == [(older.id, again.created_at), (newer.id, note.created_at)]
    await app.conversations.delete(older.id)
    assert await listed(app) == [(newer.id, note.created_at)]


@pytest.mark.sqlite_only
async def test_an_upgraded_store_keeps_each_conversations_newest_memory_time_and_finds_its_memories_by_key(
    settings: Settings, tmp_path: Path
) -> None:
    """Schema 22 fills ``last_memory_at`` from the memories there (the newest by time, not by
    seq: a fact keeps its source's time), and drops the two indexes it replaces; schema 23 gives
    each memory its conversation's key, and the indexes that find a conversation's memories hold
    the key instead of the id."""
    path = tmp_path / "old" / "memory.db"
    sqlite_store_at(path, 21)
    a, b, empty = (f"0e5c4a1e-0000-4000-8000-00000000000{n}" for n in (1, 2, 3))
    m1, m2, m3 = (f"0e5c4a1e-0000-4000-8000-00000000010{n}" for n in (1, 2, 3))
    with closing(sqlite3.connect(path, isolation_level=None)) as conn:
        conn.execute("PRAGMA foreign_keys = ON")
        for conversation, start in ((a, "2026-01-01T00:00:00Z"), (b, "2026-01-02T00:00:00Z"),
                                    (empty, "2026-01-05T00:00:00Z")):
            conn.execute("INSERT INTO conversations (id, name, created_at) VALUES (?, 'c', ?)", (conversation, start))
        for n, memory, conversation, at in ((1, m1, a, "2026-01-04T00:00:00Z"), (2, m2, a, "2026-01-03T00:00:00Z"),
                                            (3, m3, b, "2026-01-03T12:00:00Z")):
            conn.execute(
                "INSERT INTO memories (seq, id, conversation_id, kind, content, content_hash, created_at, occurred_at)"
                " VALUES (?, ?, ?, 'note', ?, ?, ?, ?)",
                (n, memory, conversation, f"memory {n}", content_hash(f"memory {n}"), at, at),
            )
    upgraded = replace(settings, db_path=path)
    async with open_app(upgraded, background=False) as app:
        assert await listed(app) == [
            (empty, "2026-01-05T00:00:00Z"), (a, "2026-01-04T00:00:00Z"), (b, "2026-01-03T12:00:00Z"),
        ]
        assert await app.memories.forget_older("2026-01-03T06:00:00Z") == 1  # m2, read without its index
        await app.memories.delete(m1)
        assert await listed(app) == [(empty, "2026-01-05T00:00:00Z"), (b, "2026-01-03T12:00:00Z"),
                                     (a, "2026-01-01T00:00:00Z")]
        again = await app.memories.store(new_note("memory 3", b))  # found by (key, digest) after the upgrade
        assert again.duplicate and again.memory.id == m3
        added = await app.memories.store(new_note("a memory after the upgrade", empty))
        _, memories, _ = await app.conversations.snapshot(b)
        assert [m.id for m in memories] == [m3]
    with closing(sqlite3.connect(path, isolation_level=None)) as conn:  # an older time (a fact's) moves nothing
        conn.execute(
            "INSERT INTO memories (seq, id, conversation_id, conversation_key, kind, content, note_digest,"
            " created_at, occurred_at) VALUES (9, ?, ?2, (SELECT key FROM conversations WHERE id = ?2), 'note',"
            " 'memory 9', ?, ?, ?)",
            ("0e5c4a1e-0000-4000-8000-000000000109", b, text_digest("memory 9"), "2026-01-02T06:00:00Z",
             "2026-01-02T06:00:00Z"),
        )
    db = Database("sqlite", str(path))
    assert db.rows("SELECT id, last_memory_at FROM conversations ORDER BY key") == [
        (a, None), (b, "2026-01-03T12:00:00Z"), (empty, added.memory.created_at),
    ]
    indexes = {row[0] for row in db.rows("SELECT name FROM sqlite_master WHERE type = 'index'")}
    assert not {"memories_conversation", "memories_created"} & indexes
    for index in ("memories_conversation_seq", "memories_note_once", "memories_conversation_occurred",
                  "memories_context_before"):
        assert db.rows(f"SELECT name FROM pragma_index_info('{index}') WHERE seqno = 0") == [("conversation_key",)]
    assert [(row[2], row[3], row[4], row[6]) for row in db.rows("PRAGMA foreign_key_list(memories)")] == [
        ("memories", "source_seq", "seq", "CASCADE"), ("conversations", "conversation_key", "key", "CASCADE"),
    ]  # a conversation's delete finds its memories by memories_conversation_seq
    assert db.rows(  # every memory under its conversation's key, the one stored after the upgrade too
        "SELECT m.id, m.conversation_id = c.id FROM memories m LEFT JOIN conversations c ON c.key = m.conversation_key"
        " ORDER BY m.seq"
    ) == [(m3, 1), (added.memory.id, 1), ("0e5c4a1e-0000-4000-8000-000000000109", 1)]

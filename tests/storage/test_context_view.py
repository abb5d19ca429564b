"""On SQLite a memory's context is computed, not stored (schema 19, the view ``memory_contexts``), and
the keyword index of contexts is kept in step with it by triggers. Whatever a statement changes,
the index holds exactly the view's texts afterwards (checked token by token, with positions), the
view gives the text ``compose_context`` wrote, and an upgrade keeps every context."""

from __future__ import annotations

import json
import random
import sqlite3
from contextlib import closing
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from ollama_mcp.app import open_app
from ollama_mcp.config import Settings
from ollama_mcp.storage.memory_rules import compose_context, content_hash, text_digest
from ollama_mcp.storage.sqlite import db as sqlite_db
from tests.conftest import sqlite_store_at

pytestmark = [pytest.mark.anyio, pytest.mark.sqlite_only]  # PostgreSQL stores its contexts

TOKENIZER = "porter unicode61 remove_diacritics 2"
WORDS = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu".split()


def rule(conn: sqlite3.Connection) -> dict[int, str]:
    """Every memory's context as ``compose_context`` composes it, from the rows alone."""
    rows = conn.execute(
        "SELECT seq, conversation_id, kind, content, metadata, context_before FROM memories ORDER BY seq"
    ).fetchall()

    def takes_part(row: tuple[Any, ...]) -> bool:
        return row[2] not in ("summary", "fact") and "redacted" not in json.loads(row[4])

    contexts = {}
    for row in rows:
        seq, conversation, _, content, _, before = row
        if not takes_part(row):
            contexts[seq] = content
            continue
        earlier = [r[3] for r in rows if r[1] == conversation and r[0] < (before or seq) and takes_part(r)]
        contexts[seq] = compose_context(earlier, content)
    return contexts


def index_differences(conn: sqlite3.Connection) -> tuple[int, int]:
    """Postings (term, memory, position) the keyword index of contexts holds beyond a fresh index of
    the view's texts, and those it lacks."""
    for name in ("fresh_postings", "held_postings", "fresh"):
        conn.execute(f"DROP TABLE IF EXISTS temp.{name}")
    conn.execute(f"CREATE VIRTUAL TABLE temp.fresh USING fts5 (context, tokenize = '{TOKENIZER}')")
    conn.execute("INSERT INTO temp.fresh (rowid, context) SELECT seq, context FROM memory_contexts")
    conn.execute("CREATE VIRTUAL TABLE temp.held_postings USING fts5vocab(main, 'memory_contexts_fts', 'instance')")
    conn.execute("CREATE VIRTUAL TABLE temp.fresh_postings USING fts5vocab(temp, 'fresh', 'instance')")
    def beyond(one: str, other: str) -> int:
        columns = "term, doc, col, offset"
        return int(conn.execute(
            f"SELECT count(*) FROM (SELECT {columns} FROM temp.{one} EXCEPT SELECT {columns} FROM temp.{other})"
        ).fetchone()[0])

    return beyond("held_postings", "fresh_postings"), beyond("fresh_postings", "held_postings")


def new_store(path: Path) -> sqlite3.Connection:
    sqlite_store_at(path, sqlite_db.migrations()[-1].version)
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA foreign_keys = ON")
    return conn


def add(conn: sqlite3.Connection, n: int, conversation: str, kind: str, content: str, **more: object) -> int:
    columns = ["id", "conversation_id", "kind", "content", "note_digest", "created_at", *more]
    digest = text_digest(content) if kind == "note" else None
    values = [f"m{n}", conversation, kind, content, digest, "2026-01-01", *more.values()]
    cursor = conn.execute(  # (?2: the conversation's id again, for its key)
        f"INSERT INTO memories ({', '.join(columns)}, conversation_key)"
        f" VALUES ({', '.join('?' * len(columns))}, (SELECT key FROM conversations WHERE id = ?2))", values
    )
    return int(cursor.lastrowid or 0)


def test_after_every_statement_the_keyword_index_of_contexts_holds_exactly_the_texts_the_view_gives(
    tmp_path: Path,
) -> None:
    # Stores, notes replaced by new versions (which keep the old one's place), facts deleted with
    # their source (a cascade between the triggers of another delete), deletes of one or several
    # memories, edits, redactions, whole conversations deleted: 400 statements, three conversations.
    rnd = random.Random(19)
    conversations = ["c0", "c1", "c2"]
    with closing(new_store(tmp_path / "memory.db")) as conn:
        for conversation in conversations:
            conn.execute("INSERT INTO conversations (id, name, created_at) VALUES (?, ?, '2026-01-01')",
                         (conversation, conversation))
        n = 0

        def text() -> str:
            return " ".join(rnd.choice(WORDS) for _ in range(rnd.randint(1, 6))) + " tail" * rnd.choice([0, 0, 300])

        seen, most = set(), 0
        for _ in range(400):
            seqs = [seq for (seq,) in conn.execute("SELECT seq FROM memories")]
            most = max(most, len(seqs))
            op = rnd.choice(["store"] * 5 + ["version", "delete", "delete several", "edit", "redact", "drop"])
            if not seqs:
                op = "store"
            seen.add(op)
            conn.execute("BEGIN")
            if op == "store":
                n += 1
                kind = rnd.choice(["note", "message", "message", "summary"])
                source = add(conn, n, rnd.choice(conversations), kind, f"{text()} {n}")
                if kind == "message" and rnd.random() < 0.3:
                    n += 1
                    found = conn.execute("SELECT conversation_id FROM memories WHERE seq = ?", (source,)).fetchone()
                    add(conn, n, found[0], "fact", f"{text()} {n}", source_seq=source)
            elif op == "version":
                notes = conn.execute(
                    "SELECT seq, conversation_id FROM memories WHERE kind = 'note' AND superseded_by IS NULL"
                ).fetchall()
                if notes:
                    seq, conversation = rnd.choice(notes)
                    n += 1
                    conn.execute("UPDATE memories SET superseded_by = ? WHERE seq = ?", (f"m{n}", seq))
                    add(conn, n, conversation, "note", f"{text()} {n}", context_before=seq)
            elif op == "delete":
                conn.execute("DELETE FROM memories WHERE seq = ?", (rnd.choice(seqs),))
            elif op == "delete several":
                chosen = rnd.sample(seqs, min(len(seqs), rnd.randint(2, 5)))
                conn.execute(f"DELETE FROM memories WHERE seq IN ({', '.join('?' * len(chosen))})", chosen)
            elif op == "edit":
                conn.execute("UPDATE memories SET content = ? WHERE seq = ?", (text(), rnd.choice(seqs)))
            elif op == "redact":
                chosen = rnd.sample(seqs, min(len(seqs), rnd.randint(1, 4)))
                conn.execute(
                    "UPDATE memories SET content = 'sha256:' || lower(hex(randomblob(32))),"
                    " metadata = json_set(metadata, '$.redacted', 'audit-only')"
                    f" WHERE kind = 'message' AND seq IN ({', '.join('?' * len(chosen))})", chosen,
                )
            elif rnd.random() < 0.3:  # drop
                conversation = rnd.choice(conversations)
                conn.execute("DELETE FROM conversations WHERE id = ?", (conversation,))
                conn.execute("INSERT INTO conversations (id, name, created_at) VALUES (?, ?, '2026-01-01')",
                             (conversation, conversation))
            conn.execute("COMMIT")

            assert conn.execute("SELECT count(*) FROM memory_contexts_pending").fetchone() == (0,), op
            assert index_differences(conn) == (0, 0), op
            assert dict(conn.execute("SELECT seq, context FROM memory_contexts").fetchall()) == rule(conn), op
        assert seen == {"store", "version", "delete", "delete several", "edit", "redact", "drop"}
        assert most > 30


def test_the_view_clips_earlier_memories_to_a_thousand_characters_skipping_summaries_facts_and_redactions(
    tmp_path: Path,
) -> None:
    with closing(new_store(tmp_path / "memory.db")) as conn:
        conn.execute("INSERT INTO conversations (id, name, created_at) VALUES ('c', 'c', '2026-01-01')")
        long = "é" * 500 + "ß" * 1200  # characters, not bytes, are clipped
        first = add(conn, 1, "c", "message", long)
        add(conn, 2, "c", "summary", "a summary")
        add(conn, 3, "c", "message", "redacted turn", metadata='{"redacted": "audit-only"}')
        add(conn, 4, "c", "fact", "a fact", source_seq=first)
        add(conn, 5, "c", "message", "second")
        last = add(conn, 6, "c", "message", "third")
        context = conn.execute("SELECT context FROM memory_contexts WHERE seq = ?", (last,)).fetchone()[0]
        assert context == "ß" * 1000 + "\nsecond\nthird"
        assert conn.execute("SELECT context FROM memory_contexts WHERE seq = ?", (first,)).fetchone() == (long,)
        assert [c for (c,) in conn.execute(
            "SELECT x.context FROM memory_contexts x JOIN memories m ON m.seq = x.seq WHERE m.kind <> 'message'"
            " OR m.metadata <> '{}' ORDER BY x.seq"
        )] == ["a summary", "redacted turn", "a fact"]


def test_a_memory_placed_before_others_or_moved_to_another_conversation_is_refused_unchanged(
    tmp_path: Path,
) -> None:
    with closing(new_store(tmp_path / "memory.db")) as conn:
        for conversation in ("a", "b"):
            conn.execute("INSERT INTO conversations (id, name, created_at) VALUES (?, ?, '2026-01-01')",
                         (conversation, conversation))
        add(conn, 1, "a", "message", "one", seq=10)
        add(conn, 2, "a", "message", "two", seq=20)
        add(conn, 3, "b", "message", "elsewhere", seq=15)  # before no memory of its own conversation
        with pytest.raises(sqlite3.IntegrityError, match="must come after the memories of its conversation"):
            add(conn, 4, "a", "message", "squeezed in", seq=12)
        with pytest.raises(sqlite3.IntegrityError, match="stays in its conversation"):
            conn.execute("UPDATE memories SET conversation_id = 'b' WHERE seq = 20")
        with pytest.raises(sqlite3.IntegrityError, match="stays in its conversation"):
            conn.execute("UPDATE memories SET conversation_key = (SELECT key FROM conversations WHERE id = 'b')"
                         " WHERE seq = 20")
        with pytest.raises(sqlite3.IntegrityError, match="conversation_key must be the key of its conversation_id"):
            conn.execute(  # a row whose key names another conversation than its id
                "INSERT INTO memories (id, conversation_id, conversation_key, kind, content, created_at)"
                " VALUES ('m9', 'a', (SELECT key FROM conversations WHERE id = 'b'), 'message', 'x', '2026-01-01')"
            )
        assert conn.execute(
            "SELECT m.seq, m.conversation_id, c.id FROM memories m JOIN conversations c ON c.key = m.conversation_key"
            " ORDER BY m.seq"
        ).fetchall() == [(10, "a", "a"), (15, "b", "b"), (20, "a", "a")]
        assert index_differences(conn) == (0, 0)


async def test_an_upgraded_store_keeps_every_context_and_re_embeds_those_an_older_version_wrote_otherwise(
    tmp_path: Path, settings: Settings,
) -> None:
    path = tmp_path / "old" / "memory.db"
    sqlite_store_at(path, 18)
    with closing(sqlite3.connect(path, isolation_level=None)) as conn:
        conn.execute("INSERT INTO conversations (id, name, created_at) VALUES ('c', 'c', '2026-01-01')")
        rows = [("m1", "note", "first note"), ("m2", "message", "a reply"), ("m3", "note", "old version"),
                ("m4", "message", "after the old version"), ("m5", "note", "new version")]
        contexts = {
            "m1": "first note", "m2": "first note\na reply", "m3": "first note\na reply\nold version",
            "m4": "a reply\nold version\nafter the old version",
            "m5": "first note\na reply\nnew version",  # the old version's place (update_memory)
        }
        wrong = {"m2": "an older rule\na reply"}  # written by an older version otherwise than the rule
        for memory_id, kind, content in rows:
            conn.execute(
                "INSERT INTO memories (id, conversation_id, kind, content, content_hash, context, created_at)"
                " VALUES (?, 'c', ?, ?, ?, ?, '2026-01-01')",
                (memory_id, kind, content, content_hash(content), wrong.get(memory_id, contexts[memory_id])),
            )
        conn.execute("UPDATE memories SET superseded_by = 'm5' WHERE id = 'm3'")
        for memory_id in contexts:
            conn.execute(
                "INSERT INTO memory_embeddings (memory_seq, model, facet, chunk_index, dim, vector, created_at)"
                " SELECT seq, 'm', 'context', 0, 1, x'0000803f', '2026-01-01' FROM memories WHERE id = ?",
                (memory_id,),
            )
        changes_before = conn.execute("SELECT coalesce(max(id), 0) FROM memory_changes").fetchone()[0]

    async with open_app(replace(settings, db_path=path), background=False):
        pass

    with closing(sqlite3.connect(path)) as conn:
        assert "context" not in [c[1] for c in conn.execute("PRAGMA table_info(memories)")]
        found = dict(conn.execute("SELECT m.id, x.context FROM memory_contexts x JOIN memories m ON m.seq = x.seq"))
        assert found == contexts
        embedded = [i for (i,) in conn.execute(
            "SELECT m.id FROM memory_embeddings e JOIN memories m ON m.seq = e.memory_seq ORDER BY m.seq")]
        assert embedded == ["m1", "m3", "m4", "m5"]  # m2's context vector was of the other text
        assert conn.execute(
            "SELECT m.id FROM memory_changes c JOIN memories m ON m.seq = c.memory_seq WHERE c.id > ?",
            (changes_before,),
        ).fetchall() == [("m2",)]
        assert index_differences(conn) == (0, 0)
        assert conn.execute(
            "SELECT m.id FROM memory_contexts_fts f JOIN memories m ON m.seq = f.rowid"
            " WHERE memory_contexts_fts MATCH 'reply' ORDER BY m.seq"
        ).fetchall() == [("m2",), ("m3",), ("m4",), ("m5",)]

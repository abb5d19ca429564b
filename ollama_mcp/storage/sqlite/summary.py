"""A read-only look at a database file for ``doctor`` and ``stats`` (no migration, no lock)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from ollama_mcp.domain import StoreSummary
from ollama_mcp.errors import StorageError
from ollama_mcp.storage.sql.chat_calls import CALLS_SINCE, CHAT_JOBS_OPEN, hour_ago
from ollama_mcp.storage.sql.vectors import missing_vector
from ollama_mcp.storage.sqlite import db
from ollama_mcp.storage.sqlite.dialect import SQLITE


def summarize(path: Path, model: str) -> StoreSummary:
    """Read ``path`` read-only (no migration, no write, no lock taken) for doctor and stats."""
    try:
        with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as conn:
            conn.execute(f"PRAGMA busy_timeout = {db.BUSY_TIMEOUT_MS}")
            version = conn.execute("SELECT max(version) FROM schema_migrations").fetchone()[0] or 0
            return StoreSummary(
                schema_version=int(version),
                conversations=dict(conn.execute("SELECT status, count(*) FROM conversations GROUP BY status")),
                memories=dict(conn.execute("SELECT kind, count(*) FROM memories GROUP BY kind")),
                vectors=conn.execute(
                    "SELECT model, dim, count(DISTINCT memory_seq) FROM memory_embeddings WHERE facet = 'content'"
                    " GROUP BY model, dim ORDER BY model"
                ).fetchall(),
                pending=conn.execute(
                    f"SELECT count(*) FROM memories m WHERE {missing_vector(SQLITE, 'content')}", (model,)
                ).fetchone()[0],
                pending_context=conn.execute(
                    f"SELECT count(*) FROM memories m WHERE {missing_vector(SQLITE, 'context')}", (model,)
                ).fetchone()[0],
                jobs=dict(conn.execute("SELECT state, count(*) FROM jobs GROUP BY state")) if version >= 2 else {},
                job_problems=conn.execute(
                    "SELECT kind, state, last_error FROM jobs WHERE last_error IS NOT NULL AND state != 'done'"
                    " ORDER BY id DESC LIMIT 3"
                ).fetchall() if version >= 2 else [],
                chat_calls=tuple(conn.execute(CALLS_SINCE, (hour_ago(),)).fetchone()) if version >= 14 else (0, None),
                chat_jobs_open=conn.execute(CHAT_JOBS_OPEN).fetchone()[0] if version >= 9 else 0,
                sessions=frozenset(row[0] for row in conn.execute(
                    "SELECT json_extract(metadata, '$.session_id') FROM conversations"
                    " WHERE json_extract(metadata, '$.session_id') IS NOT NULL")),
            )
    except sqlite3.Error as exc:
        raise _unreadable(path, exc, "read the database") from exc


def free_space(path: Path) -> tuple[int, int]:
    """The bytes of ``path``'s free pages, read-only, and whether the store gives them back by
    itself (``auto_vacuum``: a store created before schema 18 does not, until ``ollama-mcp shrink``)."""
    try:
        with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as conn:
            conn.execute(f"PRAGMA busy_timeout = {db.BUSY_TIMEOUT_MS}")
            free = conn.execute("PRAGMA freelist_count").fetchone()[0] * conn.execute("PRAGMA page_size").fetchone()[0]
            return int(free), int(conn.execute("PRAGMA auto_vacuum").fetchone()[0])
    except sqlite3.Error as exc:
        raise _unreadable(path, exc, "read the database") from exc


def quick_check(path: Path) -> str | None:
    """SQLite's ``quick_check`` of ``path``, read-only: None when sound, else its first finding.
    It reads the whole file (about a second per GB): for doctor, not for every start."""
    try:
        with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as conn:
            conn.execute(f"PRAGMA busy_timeout = {db.BUSY_TIMEOUT_MS}")
            findings = [row[0] for row in conn.execute("PRAGMA quick_check(3)")]
            if findings != ["ok"] and all(f.startswith("NULL value in ") for f in findings):
                # SQLite 3.40's quick_check reports every row of a WITHOUT ROWID table whose key
                # columns are not in declared order (memory_tags) as "NULL value in ..."; the
                # full check has no such false finding, and decides.
                findings = [row[0] for row in conn.execute("PRAGMA integrity_check(3)")]
    except sqlite3.Error as exc:
        raise _unreadable(path, exc, "check the database") from exc
    return None if findings == ["ok"] else "; ".join(findings)


def _unreadable(path: Path, exc: sqlite3.Error, action: str) -> StorageError:
    if db.is_damage(exc):
        return db.damaged(path, f"SQLite: {exc}")
    if "no such table" in str(exc):
        return db.damaged(path, "a SQLite database without ollama-mcp's tables")
    return db.translate(exc, action)

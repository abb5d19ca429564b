"""Opening the SQLite file safely for several processes, and applying ``sqlite/migrations/NNNN_*.sql`` once.

Rules (measured in shared/notes/sqlite.md): WAL, a busy timeout on every connection, autocommit
mode with every write transaction opened explicitly by ``BEGIN IMMEDIATE`` so that a writer
waits for the lock instead of failing on a stale read snapshot.
"""

from __future__ import annotations

import glob
import logging
import os
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import aiosqlite
import anyio

from ollama_mcp.errors import DatabaseBusyError, SchemaError, StorageError
from ollama_mcp.storage.memory_rules import text_digest
from ollama_mcp.storage.migrations import Migration, newest, report, shipped, to_apply

log = logging.getLogger(__name__)

BUSY_TIMEOUT_MS = 10_000


def migrations() -> list[Migration]:
    """The SQLite migrations shipped with this version, in order."""
    return shipped("ollama_mcp.storage.sqlite.migrations")


# Functions of ours a migration may call, registered on the connection that applies the
# migrations (``migrate``; the tests' stores at an older schema too). Name: (arguments, function).
MIGRATION_FUNCTIONS: dict[str, tuple[int, Callable[..., Any]]] = {
    "migration_text_digest": (1, text_digest),  # schema 24: a note's digest (memory_rules)
}


async def connect(path: Path) -> aiosqlite.Connection:
    """Open (creating owner-only if new) and migrate the database at ``path``.

    Shielded from cancellation: a client that disconnects while we open must not leave the
    database thread half-open behind a closed event loop. It takes milliseconds (or, with
    another process holding the write lock, at most the busy timeout).
    """
    with anyio.CancelScope(shield=True):
        conn = await _connect(path)
    return conn


async def connect_reader(path: Path) -> aiosqlite.Connection | None:
    """Another connection to a store already open (created, in WAL mode, migrated), for one long
    read beside the store's own connection; None if the file cannot be opened (it never creates
    one). It only waits as every connection does."""
    try:
        conn = await aiosqlite.connect(f"{path.absolute().as_uri()}?mode=rw", uri=True, isolation_level=None)
    except sqlite3.Error:
        return None
    try:
        await conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
    except BaseException:
        await conn.close()
        raise
    return conn


async def _connect(path: Path) -> aiosqlite.Connection:
    _create_private(path)
    try:
        conn = await aiosqlite.connect(path, isolation_level=None)
    except sqlite3.Error as exc:
        raise StorageError(f"Could not open the database at {path}: {exc}. Check that the folder is writable.") from exc
    try:
        await conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        await conn.execute("PRAGMA foreign_keys = ON")
        await conn.execute("PRAGMA synchronous = NORMAL")
        # 1 MB of page cache: the cache fills and stays in the process, and the OS caches the file
        # anyway. 32 MB bought 0.07 ms a search at 10k memories, 8 MB nothing measurable over 2 MB
        # for 6 MB more of peak memory, 2 MB nothing over 1 MB (bench/README.md, #15).
        await conn.execute("PRAGMA cache_size = -1024")
        if (await (await conn.execute("PRAGMA page_count")).fetchone() or (0,))[0] == 0:
            # A new file: pages freed (a fold empties a block's worth of rows) can be given back to
            # the file system a few at a time (``StoreBase.give_back_free_pages``). Only settable
            # before the first table; an older store keeps reusing its free pages instead.
            await conn.execute("PRAGMA auto_vacuum = INCREMENTAL")
        mode = await _use_wal(conn)
        if mode != "wal":
            log.warning("SQLite refused WAL mode (journal_mode=%s); concurrent processes will wait longer", mode)
        await migrate(conn, path)
        _remove_vector_files(path)
    except sqlite3.DatabaseError as exc:
        await conn.close()
        if not is_damage(exc):
            raise
        raise damaged(path, str(exc)) from exc
    except BaseException:
        await conn.close()
        raise
    return conn


async def _use_wal(conn: aiosqlite.Connection) -> str:
    """Put the file in WAL mode (it stays so) and return the journal mode it is in.

    Converting needs the file to itself, and SQLite does not wait for that with the busy
    handler: while another connection writes (two servers opening one new file at once, the
    first one migrating), ``journal_mode = WAL`` fails at once with "database is locked". So
    the mode is read first (after the first open it is WAL already: no lock at all), and the
    conversion is retried, backing off, for up to the busy timeout.
    """
    deadline = anyio.current_time() + BUSY_TIMEOUT_MS / 1000
    pause = 0.005
    while True:
        found = await (await conn.execute("PRAGMA journal_mode")).fetchone()
        if found is not None and str(found[0]).lower() == "wal":
            return "wal"
        try:
            mode = await (await conn.execute("PRAGMA journal_mode = WAL")).fetchone()
            return "" if mode is None else str(mode[0]).lower()
        except sqlite3.OperationalError as exc:
            if not is_busy(exc) or anyio.current_time() + pause > deadline:
                raise
        await anyio.sleep(pause)
        pause = min(pause * 2, 0.2)


async def migrate(conn: aiosqlite.Connection, path: Path | None = None) -> int:
    """Apply the migrations this database lacks; safe when two processes start together."""
    known = migrations()
    try:
        # Off while migrating (a no-op inside a transaction, so before it): a migration that
        # copies a table into a new one must be able to drop the old one without the drop
        # cascading to the rows that reference it. PRAGMA foreign_key_check proves the result.
        await conn.execute("PRAGMA foreign_keys = OFF")
        for name, (arguments, function) in MIGRATION_FUNCTIONS.items():
            await conn.create_function(name, arguments, function, deterministic=True)
        await conn.execute("BEGIN IMMEDIATE")
        try:
            await conn.execute(
                "CREATE TABLE IF NOT EXISTS schema_migrations ("
                " version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL)"
            )
            rows = await (await conn.execute("SELECT version FROM schema_migrations")).fetchall()
            pending = to_apply(known, {row[0] for row in rows}, f"The database {path}" if path else "This database")
            for migration in pending:
                # executescript would COMMIT our transaction first, so run statement by statement.
                for statement in split_statements(migration.sql):
                    await conn.execute(statement)
                await conn.execute(
                    "INSERT INTO schema_migrations (version, name, applied_at)"
                    " VALUES (?, ?, strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))",
                    (migration.version, migration.name),
                )
                log.debug("applied schema migration %04d_%s", migration.version, migration.name)
            broken = list(await (await conn.execute("PRAGMA foreign_key_check")).fetchall()) if pending else []
            if broken:
                raise SchemaError(
                    f"A schema migration would leave {len(broken)} row(s) of {broken[0][0]} pointing at rows that"
                    " do not exist; nothing was changed. Report this with `ollama-mcp doctor` output."
                )
            await conn.execute("COMMIT")
            report(log, {row[0] for row in rows}, pending, str(path) if path else "this database")
        except BaseException:
            await conn.execute("ROLLBACK")
            raise
        finally:
            await conn.execute("PRAGMA foreign_keys = ON")
    except sqlite3.Error as exc:
        raise translate(exc, "apply the schema migrations") from exc
    return newest(known)


def _remove_vector_files(path: Path) -> None:
    """Delete the vector files versions before schema 18 kept beside the database
    (``<name>-vectors-<model>``): the vectors are in the database now, once."""
    for leftover in path.parent.glob(f"{glob.escape(path.name)}-vectors-*"):
        try:
            leftover.unlink()
            log.info("removed %s: the vectors it cached are kept in the database now", leftover)
        except OSError as exc:
            log.warning("could not remove the old vector file %s: %s", leftover, exc)


def wal_of(path: Path) -> Path:
    """The write-ahead log beside the database at ``path``."""
    return path.with_name(path.name + "-wal")


def bytes_on_disk(path: Path) -> int:
    """The database's bytes on disk with its write-ahead log (either may not exist)."""
    return sum(p.stat().st_size for p in (path, wal_of(path)) if p.exists())


def fts5_missing() -> str | None:
    """Why this Python's SQLite cannot build our keyword index, or None when it can."""
    try:
        with sqlite3.connect(":memory:") as conn:
            conn.execute("CREATE VIRTUAL TABLE t USING fts5 (x, tokenize = 'porter unicode61')")
    except sqlite3.Error as exc:
        return str(exc)
    return None


def split_statements(script: str) -> list[str]:
    """The statements of a SQL script (triggers with inner semicolons stay whole)."""
    statements: list[str] = []
    pending = ""
    for line in script.splitlines(keepends=True):
        pending += line
        if sqlite3.complete_statement(pending):
            if pending.strip():
                statements.append(pending.strip())
            pending = ""
    if pending.strip() and not all(
        part.strip().startswith("--") or not part.strip() for part in pending.splitlines()
    ):
        raise SchemaError("A schema migration ends with an incomplete SQL statement; the package is damaged.")
    return statements


def is_damage(exc: sqlite3.Error) -> bool:
    """Whether SQLite says the file is not a database, or a damaged one."""
    return getattr(exc, "sqlite_errorcode", 0) & 0xFF in (sqlite3.SQLITE_NOTADB, sqlite3.SQLITE_CORRUPT)


def damaged(path: Path, cause: str) -> StorageError:
    """The one message for a file at OLLAMA_MCP_DB that cannot serve as the store: which file, why,
    and what to do, every option keeping the file (it may be the user's only copy)."""
    return StorageError(
        f"The file {path} is not a usable ollama-mcp database ({cause}); it was left as it is. "
        "Move it aside to start a new store there, restore a backup (or re-import an export), "
        "or set OLLAMA_MCP_DB to another file."
    )


def is_busy(exc: sqlite3.Error) -> bool:
    """Whether another connection held the lock ``exc`` needed (SQLITE_BUSY or SQLITE_LOCKED)."""
    return getattr(exc, "sqlite_errorcode", 0) & 0xFF in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)


def translate(exc: sqlite3.Error, action: str, path: Path | None = None) -> StorageError:
    """Turn a sqlite3 error into the StorageError a user can act on (by SQLite's error code);
    ``path``: the database file, named when the error says the file is damaged."""
    if path is not None and is_damage(exc):
        return damaged(path, f"SQLite: {exc}")
    if is_busy(exc):
        return DatabaseBusyError(
            f"Could not {action}: the database stayed locked by another process for "
            f"{BUSY_TIMEOUT_MS // 1000} s. Nothing was changed; try again."
        )
    code = getattr(exc, "sqlite_errorcode", 0) & 0xFF
    if code == sqlite3.SQLITE_FULL:
        return StorageError(f"Could not {action}: the disk is full. Nothing was changed; free some space and retry.")
    if code in (sqlite3.SQLITE_READONLY, sqlite3.SQLITE_CANTOPEN, sqlite3.SQLITE_PERM, sqlite3.SQLITE_IOERR):
        return StorageError(
            f"Could not {action}: the database file or its folder cannot be written ({exc}). "
            "Nothing was changed; fix the permissions or free disk space, or set OLLAMA_MCP_DB to a writable path."
        )
    return StorageError(f"Could not {action}: SQLite said {str(exc)!r}. Nothing was changed.")


def _create_private(path: Path) -> None:
    """Create the folder (0700) and the file (0600) if missing, so no one else can read memories."""
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        os.close(fd)
    except OSError as exc:
        raise StorageError(
            f"Could not create the database at {path}: {exc.strerror}. "
            "Set OLLAMA_MCP_DB to an absolute path in a folder you can write to."
        ) from exc

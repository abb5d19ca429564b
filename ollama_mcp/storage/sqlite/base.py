"""The store's plumbing: one connection per process, its lock, transactions and error translation."""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import Any, Self

import aiosqlite
import anyio

from ollama_mcp import audit
from ollama_mcp.domain import EmbeddingRow, Shrunk
from ollama_mcp.errors import StorageError
from ollama_mcp.storage.sql.parts import SqlParts
from ollama_mcp.storage.sqlite import block_read, db
from ollama_mcp.storage.sqlite.dialect import SQLITE
from ollama_mcp.storage.sqlite.rows import insert_embedding_rows


def identity(path: Path) -> tuple[int, int] | None:
    """Which file ``path`` names now (device, inode); None when there is none. A stat: ~2 µs.

    SQLite keeps writing to an open file after it was unlinked or replaced; comparing this before
    each commit is how a write into a file that no longer has a name is refused, not acknowledged."""
    try:
        stat = path.stat()
    except OSError:
        return None
    return (stat.st_dev, stat.st_ino)


# Free pages a store keeps for its next writes before giving them back (4 MB of 4 KB pages).
FREE_PAGES_KEPT = 1024

# The stores (by id) whose transaction the current task holds, seen by the tasks it starts too (they
# copy it): a read of such a store belongs to that transaction. Any other task's read of it waits
# for the transaction to end. Per store: one process holds a store per principal.
_HOLDING: ContextVar[frozenset[int]] = ContextVar("ollama_mcp_sqlite_holding", default=frozenset())


class StoreBase(SqlParts):
    """The connection a store's parts share; open with ``await Store.open(path)``, close with ``aclose``."""

    def __init__(self, conn: aiosqlite.Connection, path: Path) -> None:
        self._conn = conn
        self.path = path
        self._identity = identity(path)  # the file this connection opened, to notice it vanish
        self._lock = anyio.Lock()
        self._keyword_scratch = False  # temp tables of this connection (keyword_rows) created
        # Reads of vectors a load left on disk (``vector_index``), on a connection of their own.
        self.blobs = block_read.Blobs(path)

    @classmethod
    async def open(cls, path: Path) -> Self:
        return cls(await db.connect(path), path)

    async def aclose(self) -> None:
        self.blobs.close()
        await self._conn.close()

    @asynccontextmanager
    async def bulk_load(self) -> AsyncIterator[None]:
        """Nothing to postpone: SQLite's keyword index keeps up by itself, and vectors are ranked in memory."""
        yield

    @asynccontextmanager
    async def _transaction(self, action: str, *, write: bool = True) -> AsyncIterator[aiosqlite.Connection]:
        async with self._lock:
            holding = _HOLDING.set(_HOLDING.get() | {id(self)})
            try:
                await self._conn.execute("BEGIN IMMEDIATE" if write else "BEGIN")
                try:
                    record = audit.take_pending() if write else None
                    if record is not None:  # the write's audit row commits with it
                        await self._conn.execute(
                            "INSERT INTO write_audit (at, door, principal, action, conversation_id, memory_id,"
                            " arguments_digest, redacted) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                            (record.at, record.door, record.principal, record.action, record.conversation_id,
                             record.memory_id, record.arguments_digest, record.redacted),
                        )
                    yield self._conn
                except BaseException:
                    await self._conn.execute("ROLLBACK")
                    raise
                if write and identity(self.path) != self._identity:
                    await self._conn.execute("ROLLBACK")
                    raise StorageError(self._gone(action))
                await self._conn.execute("COMMIT")
            except sqlite3.Error as exc:
                if self._conn.in_transaction:
                    await self._conn.execute("ROLLBACK")
                raise db.translate(exc, action, self.path) from exc
            finally:
                _HOLDING.reset(holding)

    def _snapshot(self, action: str) -> AbstractAsyncContextManager[aiosqlite.Connection]:
        """Reads that see one state of the file (a read transaction)."""
        return self._transaction(action, write=False)

    def _gone(self, action: str) -> str:
        return (
            f"Could not {action}: the database file {self.path} was deleted, moved or replaced while "
            "this server was running, and a change saved now would go to a file nobody can open "
            "again. Nothing was changed. Restart the MCP client (or the server) to open the store "
            f"at {self.path} again, or put the file back there."
        )

    async def _fetchall(self, sql: str, params: Sequence[Any], action: str) -> list[sqlite3.Row | tuple[Any, ...]]:
        """One statement on its own. The connection is shared: issued while another task's
        transaction is open, it would run inside it and read that transaction's snapshot (a
        conversation's rolling summary written by another process a moment before was not seen)
        or its uncommitted rows, so it waits for that transaction to end."""
        try:
            if id(self) in _HOLDING.get():
                return list(await self._conn.execute_fetchall(sql, params))
            async with self._lock:
                return list(await self._conn.execute_fetchall(sql, params))
        except sqlite3.Error as exc:
            raise db.translate(exc, action, self.path) from exc

    _dialect = SQLITE

    async def _insert_vectors(
        self, conn: aiosqlite.Connection, rows: Sequence[EmbeddingRow], *, backfill: bool = False
    ) -> int:
        return await insert_embedding_rows(conn, rows)

    async def _vectors_stored(self, rows: Sequence[EmbeddingRow]) -> None:
        """Nothing to prepare: vectors are ranked in memory, from the table (and its blocks)."""

    async def _vectors_dropped(self, conn: aiosqlite.Connection, model: str) -> None:
        """The model's rows are gone: so are the blocks their vectors were folded into."""
        await conn.execute("DELETE FROM vector_blocks WHERE model = ?", (model,))

    async def give_back_free_pages(self, at_least: int = FREE_PAGES_KEPT) -> int:
        """Truncate the file by its free pages when there are more than ``at_least`` and the store
        was created to allow it (``auto_vacuum = INCREMENTAL``, every store schema 18 created);
        returns the pages given back. An older store reuses its free pages for new rows."""
        async with self._lock:
            try:
                mode = await (await self._conn.execute("PRAGMA auto_vacuum")).fetchone()
                free = await (await self._conn.execute("PRAGMA freelist_count")).fetchone()
                if mode is None or free is None or mode[0] != 2 or free[0] <= at_least:
                    return 0
                # As a script: Python's execute steps a statement without result columns once,
                # and each step of this one frees a single page.
                await self._conn.executescript("PRAGMA incremental_vacuum;")
                left = await (await self._conn.execute("PRAGMA freelist_count")).fetchone()
            except sqlite3.Error as exc:
                raise db.translate(exc, "give free pages back to the file system", self.path) from exc
        return int(free[0]) - int(left[0] if left else 0)

    async def settle(self) -> None:
        """What a quiet store's upkeep does last: every free page goes back to the file system, and
        the write-ahead log is checkpointed and truncated to nothing, unless another connection
        is reading or writing it then (never waited for: the next quiet upkeep tries again)."""
        await self.give_back_free_pages(0)
        async with self._lock:
            try:
                await self._truncate_log()
            except sqlite3.Error as exc:
                raise db.translate(exc, "truncate the write-ahead log", self.path) from exc

    async def _truncate_log(self) -> None:
        """Checkpoint the write-ahead log and truncate it to nothing, unless another connection is
        reading or writing it then (never waited for). Call it holding ``_lock``."""
        await self._conn.execute("PRAGMA busy_timeout = 0")
        try:
            await (await self._conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")).fetchall()
        except sqlite3.Error as exc:
            if exc.sqlite_errorcode & 0xFF not in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED):
                raise
        finally:
            await self._conn.execute(f"PRAGMA busy_timeout = {db.BUSY_TIMEOUT_MS}")

    async def shrink(self) -> Shrunk:
        """Rewrite the file without its free pages (``VACUUM``), made able to give free pages back
        from then on (``auto_vacuum = INCREMENTAL``: a store created before schema 18 gains it
        here), then empty the write-ahead log the rewrite went through, unless another connection
        reads it then. Every key another process or a vector block holds is an INTEGER PRIMARY KEY
        (conversations' since schema 21), which VACUUM keeps. It holds the write lock while it
        copies the file: other processes' writes wait for it (up to ``BUSY_TIMEOUT_MS``)."""
        before = db.bytes_on_disk(self.path)
        async with self._lock:
            try:
                await self._conn.execute("PRAGMA auto_vacuum = INCREMENTAL")
                await self._conn.execute("VACUUM")
                await self._truncate_log()
            except sqlite3.Error as exc:
                raise db.translate(exc, "give the database's free space back", self.path) from exc
        wal = db.wal_of(self.path)
        return Shrunk(before, db.bytes_on_disk(self.path), wal.stat().st_size if wal.exists() else 0)

    async def purge_removed_text(self) -> str:
        """Merge the keyword indexes (FTS5 keeps a deleted entry's words in its older segments
        until then), then rewrite the file without its free pages (``shrink``)."""
        async with self._transaction("merge the keyword indexes") as conn:
            for table in ("memories_fts", "memory_contexts_fts"):
                await conn.execute(f"INSERT INTO {table} ({table}) VALUES ('optimize')")
        shrunk = await self.shrink()
        return (f"merged the keyword index and rewrote {self.path} without its free pages "
                f"({shrunk.before:,} -> {shrunk.after:,} bytes): the old texts are gone from the file")

    async def data_version(self) -> int:
        """Changes whenever another connection commits: lets caches notice other processes."""
        rows = await self._fetchall("PRAGMA data_version", (), "read the data version")
        return int(rows[0][0])

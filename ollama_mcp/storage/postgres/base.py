"""The PostgreSQL store's plumbing: a connection pool, transactions and error translation.

The pool checks a connection before lending it when it may be dead (a server restart leaves dead
ones behind: they are replaced, so the call after a restart succeeds without restarting
ollama-mcp; ``_Liveness``) and waits at most ``POOL_TIMEOUT_S`` for one, so an unreachable server
fails a call with a clear error instead of hanging it.
"""

from __future__ import annotations

import hashlib
import select
import time
import uuid
import weakref
from collections.abc import AsyncIterator, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any, Self

import anyio
import psycopg
import psycopg_pool
from pgvector.psycopg import register_vector_async
from psycopg import sql

from ollama_mcp import audit
from ollama_mcp.domain import EmbeddingRow
from ollama_mcp.errors import StorageError
from ollama_mcp.storage.postgres import db
from ollama_mcp.storage.postgres.dialect import POSTGRES
from ollama_mcp.storage.postgres.rows import insert_embedding_rows
from ollama_mcp.storage.sql.parts import SqlParts

POOL_MIN = 1
POOL_MAX = 8
POOL_TIMEOUT_S = 5.0  # a server that gives no connection this long is reported as unreachable
# While every connection is in use by this instance, a call queues this long (clients give up at 60 s).
POOL_BUSY_WAIT_S = 30.0
RELEASE_SECONDS = 2.0  # at shutdown: giving back leases, then the pool's workers, each at most this
# HNSW build parameters; recall at the shipped ef_search: bench/README.md. m is pgvector's default.
HNSW_M = 16
# pgvector's default 64 gave recall@10 0.83 at 1M memories (ef_search 100); 128 gives 0.97 for a
# build about as long on this machine (bench/README.md).
HNSW_EF_CONSTRUCTION = 128
# A connection idle in the pool longer than this is checked by a round trip before it is lent:
# what cuts an idle connection without a word (a firewall's or a load balancer's idle timeout)
# takes minutes, not seconds.
IDLE_CHECK_S = 5.0


FACETS = ("content", "context")


def vector_index_name(model: str, dim: int, facet: str) -> str:
    """The HNSW index of one (model, dimension, facet): a stable name whatever characters the model
    has (postgres/migrations/0003 computes the same name in SQL)."""
    return f"memory_embeddings_hnsw_{hashlib.sha256(f'{model}/{dim}/{facet}'.encode()).hexdigest()[:16]}"


# Every connection of an instance names it (``application_name``), so that a lease it holds counts
# only while it has a connection open: the leases of an instance killed mid-batch lapse at once,
# not after EMBEDDING_LEASE (its connections close with it; the pool always keeps one open).
APPLICATION_PREFIX = "ollama-mcp "
HOLDER_ALIVE = (
    "EXISTS (SELECT 1 FROM pg_stat_activity a WHERE a.application_name = '"
    + APPLICATION_PREFIX
    + "' || {lease}.holder)"
)


def _connection_kwargs(holder: str) -> dict[str, Any]:
    """How every connection of an instance is opened: autocommit (every write is an explicit
    transaction), named for its leases (``APPLICATION_PREFIX``), and without server-side prepared
    statements: after five runs PostgreSQL may switch a prepared query to a generic plan, which for
    "ORDER BY distance LIMIT $n" can drop the HNSW index."""
    return {"autocommit": True, "connect_timeout": db.CONNECT_TIMEOUT_S, "prepare_threshold": None,
            "application_name": APPLICATION_PREFIX + holder}


class _Liveness:
    """The pool's check of a connection before it lends it: psycopg_pool's own (an empty query, a
    round trip), made only when the connection may be dead. That is when it lay idle over
    IDLE_CHECK_S, or when its socket has something to read while nothing was asked: a server
    that shuts down (a restart) or ends an idle session says so, then closes the connection. A
    connection given back a moment ago with nothing to read is lent as it is. A search takes a
    connection five to seven times, and those round trips were 1.1 ms of an 11 ms search at 10k
    memories (bench/README.md)."""

    def __init__(self, idle_check_s: float = IDLE_CHECK_S) -> None:
        self._idle_check_s = idle_check_s
        self._returned: weakref.WeakKeyDictionary[psycopg.AsyncConnection, float] = weakref.WeakKeyDictionary()

    def returned(self, conn: psycopg.AsyncConnection) -> None:
        """``conn`` goes back to the pool now, alive (as far as its last statement showed)."""
        self._returned[conn] = time.monotonic()

    async def check(self, conn: psycopg.AsyncConnection) -> None:
        returned = self._returned.pop(conn, None)
        if returned is None or time.monotonic() - returned > self._idle_check_s or _has_input(conn):
            await psycopg_pool.AsyncConnectionPool.check_connection(conn)


def _has_input(conn: psycopg.AsyncConnection) -> bool:
    """The idle connection's socket is readable (a message, or the end of the stream), or gone.
    By ``poll`` where there is one: ``select`` refuses a descriptor past 1,023, which a busy HTTP
    server's sockets reach (it is Windows's only way, where that limit does not apply)."""
    try:
        fd = conn.fileno()
        if hasattr(select, "poll"):
            poller = select.poll()
            poller.register(fd, select.POLLIN | select.POLLPRI)  # (errors and hang-ups are always reported)
            return bool(poller.poll(0))
        readable, _, _ = select.select([fd], [], [], 0)
        return bool(readable)
    except (OSError, ValueError, psycopg.Error):
        return True


class PgStoreBase(SqlParts):
    """The pool a store's parts share; open with ``await PgStore.open(url)``, close with ``aclose``."""

    def __init__(
        self, pool: psycopg_pool.AsyncConnectionPool, url: str, schema_version: int, holder: str,
        liveness: _Liveness,
    ) -> None:
        self._pool = pool
        self._liveness = liveness  # the pool's check; told of each connection given back whole
        self.url = url
        self.where = db.describe(url)  # host:port/database, never the password
        self.schema_version = schema_version
        self._indexed: set[tuple[str, int]] = set()  # (model, dim) whose HNSW index exists
        self._postponed: set[tuple[str, int]] | None = None  # inside bulk_load: indexes to build at its end
        self._index_lock = anyio.Lock()  # one check per process, not one per concurrent first store
        self.holder = holder  # this instance, in the leases it takes (see APPLICATION_PREFIX)
        self._stalled = False  # the pool lent nothing when asked, not being busy: see _checkout

    @classmethod
    async def open(cls, url: str) -> Self:
        await db.provision(url)  # a principal's role and schema, before its first connection
        conn = await db.connect(url)
        try:
            version = await db.migrate(conn, url)
        finally:
            await conn.close()
        holder = uuid.uuid4().hex
        liveness = _Liveness()
        pool = psycopg_pool.AsyncConnectionPool(
            url, min_size=POOL_MIN, max_size=POOL_MAX, open=False, timeout=POOL_TIMEOUT_S,
            kwargs=_connection_kwargs(holder), configure=register_vector_async, check=liveness.check,
            name="ollama-mcp",
        )
        try:
            await pool.open(wait=True, timeout=POOL_TIMEOUT_S)
        except psycopg_pool.PoolTimeout as exc:
            await pool.close()
            raise StorageError(
                f"Could not open connections to PostgreSQL at {db.describe(url)} within {POOL_TIMEOUT_S:.0f} s; "
                "check that the server is running and accepts connections."
            ) from exc
        return cls(pool, url, version, holder, liveness)

    async def aclose(self) -> None:
        """Give back this instance's backfill leases (another instance may embed those memories at
        once), then close the pool."""
        try:
            # Briefly: at shutdown, not the 5-30 s a call may wait for a connection.
            with anyio.move_on_after(RELEASE_SECONDS):
                async with self._connection("release embedding leases") as conn:
                    await conn.execute("DELETE FROM embedding_leases WHERE holder = %s", (self.holder,))
        except StorageError:
            pass  # the server is gone: the leases lapse by themselves (so do they with this instance)
        finally:
            await self._pool.close(timeout=RELEASE_SECONDS)

    async def ensure_vector_index(self, model: str, dim: int) -> None:
        """Create the HNSW indexes (cosine) of ``model``'s ``dim``-dimensional vectors unless they
        exist: one partial index per facet over ``vector::vector(dim)``, which the ranker's queries
        name exactly. One per facet, because a scan filtered to one facet after the index stops at
        ef_search rows: over both facets, half of them were wasted (recall@10 0.72 at 100k)."""
        if (model, dim) in self._indexed:
            return
        if self._postponed is not None:
            self._postponed.add((model, dim))
            return
        async with self._index_lock:
            if (model, dim) in self._indexed:
                return
            async with self._transaction("create the vector index") as conn:
                await conn.execute("SELECT pg_advisory_xact_lock(%s)", (db.MIGRATION_LOCK,))
                for facet in FACETS:
                    await conn.execute(
                        sql.SQL(
                            "CREATE INDEX IF NOT EXISTS {} ON memory_embeddings USING hnsw ((vector::vector({}))"
                            " vector_cosine_ops)"
                            " WITH (m = {}, ef_construction = {}) WHERE model = {} AND dim = {} AND facet = {}"
                        ).format(
                            sql.Identifier(vector_index_name(model, dim, facet)),
                            sql.Literal(dim),
                            sql.Literal(HNSW_M),
                            sql.Literal(HNSW_EF_CONSTRUCTION),
                            sql.Literal(model),
                            sql.Literal(dim),
                            sql.Literal(facet),
                        )
                    )
            self._indexed.add((model, dim))

    @asynccontextmanager
    async def bulk_load(self) -> AsyncIterator[None]:
        """HNSW indexes that do not exist yet are built once at the end, from all the vectors:
        several times faster than growing them one insert at a time (bench/README.md). An index
        that exists already is kept current by each insert as usual."""
        postponed: set[tuple[str, int]] = set()
        self._postponed = postponed
        try:
            yield
        finally:
            self._postponed = None
        # Not after a failure: the next write of a vector builds them (ensure_vector_index).
        for model, dim in sorted(postponed):
            await self.ensure_vector_index(model, dim)

    async def shrink(self) -> None:
        """Nothing to do: PostgreSQL's autovacuum makes the space of deleted rows reusable, and the
        server's administrator decides about giving it back (``VACUUM FULL``)."""

    async def purge_removed_text(self) -> str:
        """``VACUUM FULL`` of the tables rewritten: PostgreSQL keeps a row's old version until its
        space is reused, and only a full vacuum rewrites the table (and its indexes) without it.
        It holds each table's lock while it copies it."""
        async with self._connection("vacuum the rewritten tables") as conn:
            for table in ("memories", "conversations", "open_turns"):
                await conn.execute(f"VACUUM FULL {table}")
        return "ran VACUUM FULL on memories, conversations and open_turns: the old row versions are gone"

    @asynccontextmanager
    async def _connection(self, action: str) -> AsyncIterator[psycopg.AsyncConnection]:
        """A pooled connection (autocommit), with errors translated once; while the pool has
        none to lend after an outage, one of the call's own (``_checkout``)."""
        conn, pooled = await self._checkout(action)
        try:
            yield conn
        except psycopg.Error as exc:
            raise db.translate(exc, action, self.url) from exc
        else:
            if pooled:
                self._liveness.returned(conn)  # (after a failure, checked by a round trip when next lent)
        finally:
            if pooled:
                await self._pool.putconn(conn)
            else:
                await conn.close()

    async def _checkout(self, action: str) -> tuple[psycopg.AsyncConnection, bool]:
        """A connection from the pool, and whether it is the pool's. A burst of calls queues for
        one while all of this instance's connections are in use; a server that gives none is
        reported as unreachable.

        After an outage the pool reconnects with a growing backoff (1, 2, 4, ... s), so the calls
        made once the server is back would wait out a backoff and fail. So when the pool lends
        nothing, the call connects by itself before failing, and while the pool is ``_stalled``
        (until it lends a connection again) calls that find none available connect by themselves
        at once: the first call after a restart succeeds.
        """
        if self._stalled and not self._pool.get_stats().get("pool_available", 0) and not self._busy():
            try:
                return await self._own_connection(), False
            except psycopg.Error as exc:
                raise self._unreachable(action) from exc
        waited = 0.0
        while True:
            try:
                conn = await self._pool.getconn(timeout=POOL_TIMEOUT_S)
            except psycopg_pool.PoolTimeout as exc:
                waited += POOL_TIMEOUT_S
                busy = self._busy()
                if busy and waited < POOL_BUSY_WAIT_S:
                    continue
                if busy:
                    raise StorageError(
                        f"Could not {action}: PostgreSQL at {self.where} is busy; all {POOL_MAX} connections of "
                        f"this server stayed in use for {waited:.0f} s. Retry; if it lasts, see the server's load."
                    ) from exc
                self._stalled = True
                try:
                    return await self._own_connection(), False
                except psycopg.Error:
                    raise self._unreachable(action) from exc
            self._stalled = False
            return conn, True

    def _busy(self) -> bool:
        """Every connection this instance may open is open and in use (a burst, not an outage)."""
        stats = self._pool.get_stats()
        return stats.get("pool_size", 0) >= POOL_MAX and stats.get("pool_available", 0) == 0

    async def _own_connection(self) -> psycopg.AsyncConnection:
        """A connection opened for one call, configured as the pool's are."""
        async with AsyncExitStack() as unless_configured:  # closed if configuring it fails
            conn = await psycopg.AsyncConnection.connect(self.url, **_connection_kwargs(self.holder))
            unless_configured.push_async_callback(conn.close)
            await register_vector_async(conn)
            unless_configured.pop_all()
        return conn

    def _unreachable(self, action: str) -> StorageError:
        return StorageError(
            f"Could not {action}: no connection to PostgreSQL at {self.where} within {POOL_TIMEOUT_S:.0f} s. "
            "Check that the server is running; ollama-mcp reconnects by itself once it is."
        )

    @asynccontextmanager
    async def _transaction(self, action: str, *, write: bool = True) -> AsyncIterator[psycopg.AsyncConnection]:
        """One transaction: everything inside commits together or not at all, the write's audit
        record (``audit.recording``) included."""
        async with self._connection(action) as conn, conn.transaction():
            record = audit.take_pending() if write else None
            if record is not None:
                await conn.execute(
                    "INSERT INTO write_audit (at, door, principal, action, conversation_id, memory_id,"
                    " arguments_digest, redacted)"
                    " VALUES (%s, %s, %s, %s, %s, %s, %s, %s)",
                    (
                        record.at,
                        record.door,
                        record.principal,
                        record.action,
                        record.conversation_id,
                        record.memory_id,
                        record.arguments_digest,
                        record.redacted,
                    ),
                )
            yield conn

    @asynccontextmanager
    async def _snapshot(self, action: str) -> AsyncIterator[psycopg.AsyncConnection]:
        """Reads that see one snapshot (REPEATABLE READ, read only)."""
        async with self._connection(action) as conn, conn.transaction():
            await conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
            yield conn

    @asynccontextmanager
    async def reading(self, action: str) -> AsyncIterator[psycopg.AsyncConnection]:
        """A connection inside a transaction for a sequence of reads (the ranker's: its SET LOCAL
        settings end with it)."""
        async with self._transaction(action, write=False) as conn:
            yield conn

    _dialect = POSTGRES

    async def _insert_vectors(
        self, conn: psycopg.AsyncConnection, rows: Sequence[EmbeddingRow], *, backfill: bool = False
    ) -> int:
        """Insert vectors (see ``insert_embedding_rows``). The backfill's end its memories' leases in
        the same transaction; a store's own vectors (a new memory: no lease) skip that statement."""
        written = await insert_embedding_rows(conn, rows)
        if backfill and rows:
            await conn.execute(
                "DELETE FROM embedding_leases WHERE memory_seq = ANY(%s)", (list({row.memory_seq for row in rows}),)
            )
        return written

    async def _vectors_dropped(self, conn: psycopg.AsyncConnection, model: str) -> None:
        """The model's backfill leases go with its vectors: every memory is pending for anyone."""
        await conn.execute("DELETE FROM embedding_leases WHERE model = %s", (model,))

    async def _vectors_stored(self, rows: Sequence[EmbeddingRow]) -> None:
        """The HNSW indexes of the vectors' models and dimensions, once the transaction committed."""
        for model, dim in sorted({(row.model, row.dim) for row in rows}):
            await self.ensure_vector_index(model, dim)

    async def _fetchall(self, sql: Any, params: Sequence[Any] | dict[str, Any], action: str) -> list[tuple[Any, ...]]:
        async with self._connection(action) as conn:
            cursor = await conn.execute(sql, params)
            return await cursor.fetchall()

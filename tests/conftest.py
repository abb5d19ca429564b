"""Shared fixtures: the test's database on each backend (a real SQLite file, and a real PostgreSQL
database from pgserver or OLLAMA_MCP_TEST_POSTGRES_URL), the fake Ollama on a loopback port, MCP
clients.

Every test that uses ``settings`` (or ``app``, ``db``, ``database_url``) runs once per backend.
A test about one backend's own behaviour is marked ``@pytest.mark.sqlite_only`` (or
``postgres_only``). ``OLLAMA_MCP_TEST_BACKENDS=sqlite`` runs one backend only, for a quick loop.
"""

from __future__ import annotations

import json
import os
import sqlite3
import tempfile
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager, closing
from dataclasses import replace
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import anyio
import numpy as np
import psycopg
import pytest
from mcp import Client
from psycopg import sql

from ollama_mcp.app import App, open_app
from ollama_mcp.config import Settings
from ollama_mcp.mcp.server import build_server
from ollama_mcp.storage.sqlite import db as sqlite_db
from tests.support.fake_ollama import FakeOllama

BACKENDS = [
    name.strip() for name in os.environ.get("OLLAMA_MCP_TEST_BACKENDS", "sqlite,postgres").split(",") if name.strip()
]


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "sqlite_only: behaviour of the SQLite backend alone")
    config.addinivalue_line("markers", "postgres_only: behaviour of the PostgreSQL backend alone")
    config.addinivalue_line(
        "markers", "slow: over ~10 s on a loaded machine (processes, outages, big stores); -m 'not slow' skips them"
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Leave out the other backend's run of a backend-specific test (deselected, not skipped)."""
    kept: list[Any] = []
    dropped: list[Any] = []
    for item in items:
        callspec = getattr(item, "callspec", None)
        backend = callspec.params.get("backend") if callspec else None
        other = {"sqlite": "postgres_only", "postgres": "sqlite_only"}.get(str(backend))
        (dropped if other and item.get_closest_marker(other) else kept).append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    """The storage backend this run of the test uses."""
    return str(request.param)


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[str]:
    """A PostgreSQL server for the whole session: OLLAMA_MCP_TEST_POSTGRES_URL (a superuser's
    URL), else a private one from the pgserver wheel (PostgreSQL 16 + pgvector, about 1 s).

    Its data folder is not under pytest's basetemp: pytest deletes all but the newest three of
    those, so a fourth test session started meanwhile would pull the folder, and the socket,
    from under this session's server."""
    external = os.environ.get("OLLAMA_MCP_TEST_POSTGRES_URL")
    if external:
        yield external
        return
    import pgserver  # noqa: PLC0415 - only when the session needs PostgreSQL

    server = pgserver.get_server(tempfile.mkdtemp(prefix="ollama-mcp-test-pg-"), cleanup_mode="delete")
    try:
        _without_flushing_to_disk(server.get_uri())
        yield server.get_uri()
    finally:
        server.cleanup()  # stops it and removes its folder


def _without_flushing_to_disk(url: str) -> None:
    """The private server does not wait for the disk: its databases live for one test, and what a
    test checks of durability is our process killed, never the machine. Each test's database is
    made and migrated in about 0.29 s instead of 0.39 (CREATE DATABASE, every migration, DROP).
    Not done to a server of OLLAMA_MCP_TEST_POSTGRES_URL: that one is the user's."""
    with psycopg.connect(url, autocommit=True) as admin:
        for setting in ("fsync", "synchronous_commit", "full_page_writes"):
            admin.execute(sql.SQL("ALTER SYSTEM SET {} = off").format(sql.Identifier(setting)))
        admin.execute("SELECT pg_reload_conf()")


def with_database(url: str, name: str) -> str:
    """``url`` (a postgresql:// URL, as users write them) naming database ``name`` instead."""
    parts = urlsplit(url)
    return urlunsplit(parts._replace(path=f"/{name}"))


@pytest.fixture
def postgres_databases(postgres_server: str) -> Iterator[Callable[[], str]]:
    """Make fresh, empty databases on the session's server (URLs); all are dropped after the test."""
    made: list[str] = []

    def make() -> str:
        name = f"test_{uuid.uuid4().hex[:12]}"
        with psycopg.connect(postgres_server, autocommit=True) as admin:
            admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        made.append(name)
        return with_database(postgres_server, name)

    yield make
    with psycopg.connect(postgres_server, autocommit=True) as admin:
        for name in made:
            admin.execute(sql.SQL("DROP DATABASE {} WITH (FORCE)").format(sql.Identifier(name)))


@pytest.fixture
def postgres_url(postgres_databases: Callable[[], str]) -> str:
    """A fresh, empty database on the session's server, dropped after the test."""
    return postgres_databases()


@pytest.fixture
def fake_ollama() -> Iterator[FakeOllama]:
    fake = FakeOllama().start()
    yield fake
    fake.stop()


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "data" / "memory.db"


@pytest.fixture
def database_url(backend: str, db_path: Path, request: pytest.FixtureRequest) -> str:
    """OLLAMA_MCP_DB for the test's backend: the SQLite file's path, or a fresh PostgreSQL database."""
    return str(db_path) if backend == "sqlite" else str(request.getfixturevalue("postgres_url"))


@pytest.fixture
def another_database(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> Callable[[], Database]:
    """Make another empty database of the test's backend (a copy's destination, say)."""
    count = 0

    def make() -> Database:
        nonlocal count
        count += 1
        if backend == "sqlite":
            return Database(backend, str(tmp_path / f"other{count}" / "memory.db"))
        return Database(backend, request.getfixturevalue("postgres_databases")())

    return make


class Database:
    """Plain SQL on the test's database, whichever the backend: to assert what was stored, or to
    set a row up. ``?`` placeholders work on both."""

    def __init__(self, backend: str, url: str) -> None:
        self.backend = backend
        self.url = url

    def rows(self, query: str, *params: Any) -> list[tuple[Any, ...]]:
        if self.backend == "sqlite":
            # (sqlite3's own context manager commits but does not close: the connection would
            # stay open, holding the file and its WAL, until the garbage collector ran)
            with closing(sqlite3.connect(self.url)) as conn, conn:
                return [tuple(row) for row in conn.execute(query, params).fetchall()]
        with psycopg.connect(self.url, autocommit=True) as pg:
            cursor = pg.execute(query.replace("?", "%s"), params)
            return [tuple(row) for row in cursor.fetchall()] if cursor.description else []

    def count(self, query: str, *params: Any) -> int:
        return int(self.rows(query, *params)[0][0])

    def tags(self) -> list[str]:
        """Every memory's tags, sorted (a table of their own on SQLite, an array column on PostgreSQL)."""
        query = "SELECT tag FROM memory_tags" if self.backend == "sqlite" else "SELECT unnest(tags) FROM memories"
        return sorted(row[0] for row in self.rows(query))

    def keyword_matches(self, facet: str, word: str) -> int:
        """Memories whose content (or context) the backend's keyword index finds ``word`` in."""
        if self.backend == "sqlite":
            table = "memories_fts" if facet == "content" else "memory_contexts_fts"
            return self.count(f"SELECT count(*) FROM {table} WHERE {table} MATCH ?", word)
        column = "content_words" if facet == "content" else "context_words"
        return self.count(f"SELECT count(*) FROM memories WHERE {column} @@ plainto_tsquery('english', ?)", word)

    def vectors(self) -> list[np.ndarray]:
        """Every stored vector, in insertion order."""
        if self.backend == "sqlite":
            return [
                np.frombuffer(row[0], dtype="<f4")
                for row in self.rows("SELECT vector FROM memory_embeddings ORDER BY id")
            ]
        found = self.rows("SELECT vector::text FROM memory_embeddings ORDER BY id")
        return [np.array(json.loads(row[0]), dtype=np.float32) for row in found]

    def settings(self, base: Settings) -> Settings:
        """``base`` pointed at this database."""
        if self.backend == "sqlite":
            return replace(base, db_path=Path(self.url), postgres_url=None)
        return replace(base, postgres_url=self.url)


@pytest.fixture
def db(backend: str, database_url: str) -> Database:
    return Database(backend, database_url)


@pytest.fixture
def settings(database_url: str, fake_ollama: FakeOllama) -> Settings:
    base = Settings.from_env({
        "OLLAMA_MCP_DB": database_url,
        "OLLAMA_HOST": fake_ollama.url,
        "OLLAMA_MCP_EMBED_TIMEOUT": "2",
    })
    # Tests wait for recovery and retries; short ceilings keep those waits small.
    return replace(base, backfill_max_delay=0.2, job_max_delay=0.2, chat_timeout=2.0)


@asynccontextmanager
async def connect(settings: Settings, mode: str = "auto") -> AsyncIterator[Client]:
    async with Client(build_server(settings), mode=mode) as client:
        yield client


@pytest.fixture
async def app(settings: Settings) -> AsyncIterator[App]:
    """The service without MCP or the background backfill (tests drive backfill_once)."""
    async with open_app(settings, background=False) as opened:
        yield opened


async def backfill(app: App) -> None:
    """Embed everything pending, as the background backfill would (``app`` opened without it)."""
    while await app.indexer.backfill_once():
        pass


async def eventually(check: Callable[[], Awaitable[Any]], timeout: float = 20.0) -> Any:
    """Poll ``check`` until it returns something truthy; fail after ``timeout`` seconds. The bound
    is what background work may take on a loaded machine: the backfill retries after 1, 2, 4 and
    8 s, so a recovery can wait out one 8 s step (at 5 s, a recovery test timed out in each of two
    full runs on this shared machine, a different one each time)."""
    with anyio.fail_after(timeout):
        while True:
            result = await check()
            if result:
                return result
            await anyio.sleep(0.02)


def sqlite_store_at(path: Path, version: int) -> None:
    """A new SQLite store as ollama-mcp left it at schema ``version`` (to test the next migrations)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with closing(sqlite3.connect(path, isolation_level=None)) as conn:
        for name, (arguments, function) in sqlite_db.MIGRATION_FUNCTIONS.items():
            conn.create_function(name, arguments, function, deterministic=True)
        conn.execute(
            "CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL)"
        )
        for migration in [m for m in sqlite_db.migrations() if m.version <= version]:
            for statement in sqlite_db.split_statements(migration.sql):
                conn.execute(statement)
            conn.execute(
                "INSERT INTO schema_migrations VALUES (?, ?, '2026-01-01')", (migration.version, migration.name)
            )

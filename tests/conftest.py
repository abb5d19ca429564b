"""Shared fixtures: a real SQLite file per test, a real PostgreSQL database per test (pgserver, or
OLLAMA_MCP_TEST_POSTGRES_URL), the fake Ollama on a loopback port, MCP clients."""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

import anyio
import psycopg
import pytest
from mcp import Client
from psycopg import sql
from psycopg.conninfo import make_conninfo

from ollama_mcp.app import App, open_app
from ollama_mcp.config import Settings
from ollama_mcp.server import build_server
from tests.fake_ollama import FakeOllama


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="session")
def postgres_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A PostgreSQL server for the whole session: OLLAMA_MCP_TEST_POSTGRES_URL (a superuser's
    URL), else a private one from the pgserver wheel (PostgreSQL 16 + pgvector, about 1 s)."""
    external = os.environ.get("OLLAMA_MCP_TEST_POSTGRES_URL")
    if external:
        yield external
        return
    import pgserver  # noqa: PLC0415 - only when the session needs PostgreSQL

    server = pgserver.get_server(tmp_path_factory.mktemp("postgres"), cleanup_mode="stop")
    yield server.get_uri()


@pytest.fixture
def postgres_url(postgres_server: str) -> Iterator[str]:
    """A fresh, empty database on the session's server, dropped after the test."""
    name = f"test_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(postgres_server, autocommit=True) as admin:
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    yield make_conninfo(postgres_server, dbname=name)
    with psycopg.connect(postgres_server, autocommit=True) as admin:
        admin.execute(sql.SQL("DROP DATABASE {} WITH (FORCE)").format(sql.Identifier(name)))


@pytest.fixture
def fake_ollama() -> Iterator[FakeOllama]:
    fake = FakeOllama().start()
    yield fake
    fake.stop()


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "data" / "memory.db"


@pytest.fixture
def settings(db_path: Path, fake_ollama: FakeOllama) -> Settings:
    base = Settings.from_env({
        "OLLAMA_MCP_DB": str(db_path),
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


async def eventually(check: Callable[[], Awaitable[Any]], timeout: float = 5.0) -> Any:
    """Poll ``check`` until it returns something truthy; fail after ``timeout`` seconds."""
    with anyio.fail_after(timeout):
        while True:
            result = await check()
            if result:
                return result
            await anyio.sleep(0.02)

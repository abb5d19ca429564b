"""Shared fixtures: a real SQLite file per test, the fake Ollama on a loopback port, MCP clients."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from ollama_mcp.app import App, open_app
from ollama_mcp.config import Settings
from ollama_mcp.server import build_server
from tests.fake_ollama import FakeOllama


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


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

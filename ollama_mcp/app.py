"""The composition root: builds store → Ollama client → embedder → service, runs the background
backfill, and closes everything in reverse order."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

import anyio

from ollama_mcp.config import Settings
from ollama_mcp.embeddings import Embedder
from ollama_mcp.ollama_client import OllamaClient
from ollama_mcp.search import SearchTuning
from ollama_mcp.service import MemoryService
from ollama_mcp.store import Store


@dataclass(frozen=True)
class App:
    settings: Settings
    service: MemoryService


@asynccontextmanager
async def open_app(
    settings: Settings, *, background: bool = True, tuning: SearchTuning | None = None
) -> AsyncIterator[App]:
    """Open the database and Ollama client; with ``background``, embed pending memories meanwhile.

    ``tuning`` overrides the ranking defaults (benchmarks only; the server always uses defaults).
    """
    store = await Store.open(settings.db_path)
    client = OllamaClient(settings.ollama_host, timeout=settings.embed_timeout, connect_timeout=settings.connect_timeout)
    try:
        service = MemoryService(
            store, Embedder(client, settings.embed_model),
            max_content_chars=settings.max_content_chars, backfill_max_delay=settings.backfill_max_delay,
            tuning=tuning,
        )
        async with anyio.create_task_group() as tasks:
            if background:
                tasks.start_soon(service.run_backfill)
            try:
                yield App(settings, service)
            finally:
                tasks.cancel_scope.cancel()
    finally:
        # Shielded: at shutdown this runs inside a cancelled scope, and an unawaited close
        # would leave the database thread running after the event loop is gone.
        with anyio.CancelScope(shield=True):
            await client.aclose()
            await store.aclose()

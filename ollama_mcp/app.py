"""The composition root: builds store → Ollama clients → embedder, summarizer → service → lifecycle → agent,
runs the background work (loading the search indexes, embedding backfill, jobs, retention sweep,
keyword index upkeep), and closes everything in reverse order."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

import anyio

from ollama_mcp.agent import Agent
from ollama_mcp.config import Settings
from ollama_mcp.embeddings import Embedder
from ollama_mcp.jobs import JobRunner
from ollama_mcp.lifecycle import ConversationLifecycle
from ollama_mcp.ollama_client import OllamaClient
from ollama_mcp.search import SearchTuning
from ollama_mcp.service import MemoryService
from ollama_mcp.store import Store
from ollama_mcp.summaries import Summarizer


@dataclass(frozen=True)
class App:
    settings: Settings
    service: MemoryService
    lifecycle: ConversationLifecycle
    agent: Agent


@asynccontextmanager
async def open_app(
    settings: Settings, *, background: bool = True, tuning: SearchTuning | None = None
) -> AsyncIterator[App]:
    """Open the database and Ollama client; with ``background``, embed pending memories meanwhile.

    ``tuning`` overrides the ranking defaults (benchmarks only; the server always uses defaults).
    """
    store = await Store.open(settings.db_path)
    client = OllamaClient(settings.ollama_host, timeout=settings.embed_timeout, connect_timeout=settings.connect_timeout)
    # Chat replies take far longer than embeddings: a client of their own, with its own timeout.
    chat_client = OllamaClient(
        settings.ollama_host, timeout=settings.chat_timeout, connect_timeout=settings.connect_timeout,
        model_setting="OLLAMA_MCP_CHAT_MODEL", timeout_setting="OLLAMA_MCP_CHAT_TIMEOUT",
    )
    try:
        jobs = JobRunner(store, lease=settings.job_lease, max_delay=settings.job_max_delay)
        service = MemoryService(
            store, Embedder(client, settings.embed_model),
            max_content_chars=settings.max_content_chars, backfill_max_delay=settings.backfill_max_delay,
            tuning=tuning, jobs=jobs, summaries=settings.chat_model is not None,
        )
        summarizer = None if settings.chat_model is None else Summarizer(chat_client, settings.chat_model)
        lifecycle = ConversationLifecycle(
            service, summarizer, compact_messages=settings.compact_messages, compact_tokens=settings.compact_tokens,
            retention_days=settings.retention_days,
        )
        agent = Agent(
            lifecycle, chat_client, settings.agent_chat_model, allowed=settings.agent_tools,
            max_steps=settings.agent_max_steps, deadline=settings.agent_deadline,
        )
        failure: Exception | None = None
        async with anyio.create_task_group() as tasks:
            if background:
                tasks.start_soon(service.warm_up)
                tasks.start_soon(service.run_backfill)
                tasks.start_soon(jobs.run_forever)
                tasks.start_soon(lifecycle.run_retention, settings.retention_interval)
                tasks.start_soon(service.run_upkeep, settings.upkeep_interval, settings.upkeep_min_new)
            try:
                yield App(settings, service, lifecycle, agent)
            except Exception as exc:  # re-raised below as itself, not wrapped in an ExceptionGroup
                failure = exc
            finally:
                tasks.cancel_scope.cancel()
        if failure is not None:
            raise failure
    finally:
        # Shielded: at shutdown this runs inside a cancelled scope, and an unawaited close
        # would leave the database thread running after the event loop is gone.
        with anyio.CancelScope(shield=True):
            await chat_client.aclose()
            await client.aclose()
            await store.aclose()

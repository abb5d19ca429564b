"""The read-only reports of the CLI: ``doctor`` (checks what normal use needs and says, in plain
words, how to fix what fails) and ``stats`` (what the store holds).

Neither changes anything: the database is opened read-only (or, if it does not exist yet, only
its folder is checked), and ``doctor`` asks Ollama to describe the model and embed one probe text.
"""

from __future__ import annotations

import os
from datetime import UTC, datetime

from ollama_mcp.config import Settings
from ollama_mcp.domain import Check, StoreSummary, counted
from ollama_mcp.errors import OllamaError, OllamaModelError
from ollama_mcp.ollama.client import OllamaClient
from ollama_mcp.ollama.embeddings import Embedder
from ollama_mcp.services import claude_history
from ollama_mcp.services.chat_budget import BudgetState
from ollama_mcp.storage import backends

MIN_FREE_BYTES = 50 * 2**20  # below this a new store (and its WAL) soon fills the disk


async def run_checks(settings: Settings) -> list[Check]:
    """The store's checks (its backend's), then Ollama's and the chat models', then Claude Code's
    transcripts (where this process's environment says its folder is)."""
    database, summary = backends.health(settings)
    unread = [Check("settings", False, said, blocking=False) for said in settings.unread]
    budget = [] if summary is None or settings.chat_model is None else [_budget(settings, summary)]
    history = claude_history.transcripts(os.environ)
    transcripts = [] if history is None else [
        Check("claude-code", *history.report(set(summary.sessions) if summary else set()), blocking=False)]
    return [*unread, *database, *budget, *await _ollama(settings, summary), *transcripts]


def budget_state(settings: Settings, summary: StoreSummary) -> BudgetState:
    """The chat-model budget of background work as the store records it (``chat_budget``)."""
    used, oldest = summary.chat_calls
    return BudgetState.of(settings.chat_calls_per_hour, used, oldest, datetime.now(UTC))


def _budget(settings: Settings, summary: StoreSummary) -> Check:
    """How much of the hour's chat-model calls background work used, and what waits for them: a
    warning only when work waits on a paused budget (it would wait forever)."""
    state = budget_state(settings, summary)
    stuck = state.paused and summary.chat_jobs_open > 0
    return Check("budget", not stuck, state.describe(summary.chat_jobs_open), blocking=False)


async def _ollama(settings: Settings, summary: StoreSummary | None) -> list[Check]:
    client = OllamaClient(
        settings.ollama_host, timeout=settings.embed_timeout, connect_timeout=settings.connect_timeout
    )
    embedder = Embedder(client, settings.embed_model)
    try:
        try:
            info = await embedder.info()
            vector = await embedder.embed_query("ollama-mcp doctor probe")
        except OllamaError as exc:
            return [Check("ollama", False, str(exc))]
        chat = await _chat_models(settings, client)
    finally:
        await client.aclose()
    checks = [Check("ollama", True, f"{settings.ollama_host} answers; model {settings.embed_model!r} "
                    f"embeds {vector.size}-dimensional vectors (context {info.context_length or '?'} tokens)"), *chat]
    if summary is None:
        return checks
    stored = [dim for model, dim, _ in summary.vectors if model == settings.embed_model]
    if stored and stored[0] != vector.size:
        checks.append(Check("vectors", False, f"stored vectors of {settings.embed_model!r} have {stored[0]} "
                            f"dimensions but the model now returns {vector.size}: the model changed under the same "
                            "name. Pull the original model again, or set OLLAMA_MCP_EMBED_MODEL to a new name so "
                            "every memory is embedded again."))
    if summary.pending or summary.pending_context:
        checks.append(
            Check(
                "pending",
                True,
                f"{summary.pending:,} memories wait for their vectors and {summary.pending_context:,} for their "
                "in-context vectors (searches rank those by a stand-in, so results can still move); the server "
                "embeds them in the background while it runs (or run `ollama-mcp reembed`)",
                blocking=False,
            )
        )
    waiting = summary.jobs.get("queued", 0) + summary.jobs.get("running", 0)
    if waiting:
        checks.append(Check("jobs", True, f"{waiting:,} background job(s) (summaries, compaction) wait to run; "
                            "the server runs them while it is running", blocking=False))
    if summary.jobs.get("failed"):
        checks.append(Check("jobs", False, f"{summary.jobs['failed']:,} background job(s) gave up; the newest "
                            "reasons are below", blocking=False))
    for kind, state, error in summary.job_problems:
        checks.append(Check("jobs", False, f"{kind} ({state}): {error}", blocking=False))
    return checks


async def _chat_models(settings: Settings, client: OllamaClient) -> list[Check]:
    """The chat model (summaries) and the agent's model: pulled, and able to call tools."""
    models: dict[str | None, str] = {settings.chat_model: "summaries"}
    agent = settings.agent_chat_model
    models[agent] = "summaries and ask_agent" if agent in models else "ask_agent"
    checks = []
    for model, use in models.items():
        if model is None:
            checks.append(Check("chat", True, "no chat model (OLLAMA_MCP_CHAT_MODEL=none): summaries only when "
                                "the client writes them, and no ask_agent", blocking=False))
            continue
        try:
            info = await client.show(model)
        except OllamaModelError:
            setting = "OLLAMA_MCP_CHAT_MODEL" if use.startswith("summaries") else "OLLAMA_MCP_AGENT_MODEL"
            advice = await client.missing_model(model, setting)
            checks.append(Check("chat", False, f"{advice} Until then {use} cannot run.", blocking=False))
            continue
        except OllamaError as exc:
            checks.append(Check("chat", False, str(exc), blocking=False))
            continue
        tools = "tools" in info.capabilities
        if use.endswith("ask_agent") and not tools:
            checks.append(Check("chat", False, f"model {model!r} cannot call tools, which ask_agent needs; set "
                                "OLLAMA_MCP_AGENT_MODEL to a model such as qwen2.5:3b", blocking=False))
        else:
            checks.append(Check("chat", True, f"chat model {model!r} is pulled ({use})"))
    return checks


def stats(settings: Settings) -> list[tuple[str, str]]:
    """What the store holds, as (label, value) lines; read-only."""
    before, summary, after = backends.holdings(settings)
    return [*before, *([] if summary is None else _holdings(summary, settings)), *after]


def _holdings(summary: StoreSummary, settings: Settings) -> list[tuple[str, str]]:
    """What a store holds, the same lines on every backend."""
    conversations, kinds = summary.conversations, summary.memories
    lines = [
        ("conversations", f"{sum(conversations.values()):,} ({conversations.get('active', 0):,} active, "
                          f"{conversations.get('completed', 0):,} completed)"),
        ("memories", f"{counted(kinds.get('note', 0), 'note')}, "
                     f"{counted(kinds.get('summary', 0), 'summary', 'summaries')}, "
                     f"{counted(kinds.get('message', 0), 'message')}"
                     + (f", {counted(kinds['fact'], 'fact')}" if kinds.get("fact") else "")),
        ("pending", f"{summary.pending:,} without a vector of {settings.embed_model!r} (the configured model); "
                    f"{summary.pending_context:,} waiting for their in-context vector (searched by a stand-in "
                    "meanwhile, so results can still move)"),
        ("jobs", ", ".join(f"{count:,} {state}" for state, count in sorted(summary.jobs.items())) or "none"),
        ("chat budget", budget_state(settings, summary).describe(summary.chat_jobs_open)),
    ]
    lines += [("vectors", f"{m}: {count:,} memories, {dim} dimensions") for m, dim, count in summary.vectors]
    return lines

"""The read-only reports of the CLI: ``doctor`` (checks what normal use needs and says, in plain
words, how to fix what fails) and ``stats`` (what the store holds).

Neither changes anything: the database is opened read-only (or, if it does not exist yet, only
its folder is checked), and ``doctor`` asks Ollama to describe the model and embed one probe text.
"""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
from dataclasses import dataclass
from pathlib import Path
from sqlite3 import sqlite_version

from ollama_mcp.config import Settings
from ollama_mcp.domain import StoreSummary
from ollama_mcp.errors import OllamaError, OllamaModelError, StorageError
from ollama_mcp.ollama.client import OllamaClient
from ollama_mcp.ollama.embeddings import Embedder
from ollama_mcp.storage.sqlite.db import damaged, fts5_missing, migrations
from ollama_mcp.storage.sqlite.summary import quick_check, summarize

MIN_FREE_BYTES = 50 * 2**20  # below this a new store (and its WAL) soon fills the disk


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    detail: str
    blocking: bool = True  # a failure that stops normal use (exit code 1)


async def run_checks(settings: Settings) -> list[Check]:
    if settings.postgres_url is not None:
        database, summary = _postgres(settings.store_url, settings.embed_model)
        return [*database, *await _ollama(settings, summary)]
    database, summary = _database(settings.store_path, settings.embed_model)
    return [_sqlite_features(), *database, *await _ollama(settings, summary)]


def _sqlite_features() -> Check:
    missing = fts5_missing()
    if missing:
        return Check("sqlite", False, f"SQLite {sqlite_version} lacks FTS5 ({missing}); use a Python built with FTS5.")
    return Check("sqlite", True, f"SQLite {sqlite_version} with FTS5")


def _database(path: Path, model: str) -> tuple[list[Check], StoreSummary | None]:
    if not path.exists():
        return [_creatable(path)], None
    checks = []
    if not os.access(path, os.R_OK | os.W_OK) or not os.access(path.parent, os.W_OK | os.X_OK):
        checks.append(Check("database", False, f"{path} or its folder is not writable by you; fix the permissions "
                            "or set OLLAMA_MCP_DB to a writable path."))
    mode = stat.S_IMODE(path.stat().st_mode)
    if mode & 0o077:
        checks.append(Check("permissions", False, f"{path} is readable by others (mode {mode:o}); "
                            f"run `chmod 600 {path}` to keep memories private.", blocking=False))
    try:
        summary = summarize(path, model)
        problem = quick_check(path)
    except StorageError as exc:
        return [*checks, Check("database", False, str(exc))], None
    if problem is not None:
        return [*checks, Check("database", False, str(damaged(path, f"SQLite's quick_check found: {problem}")))], None
    newest = migrations()[-1].version
    if summary.schema_version > newest:
        checks.append(Check("schema", False, f"{path} was written by a newer ollama-mcp (schema "
                            f"{summary.schema_version}, this version knows {newest}); upgrade ollama-mcp."))
        return checks, None
    note = (
        "" if summary.schema_version == newest else f"; it will be upgraded from {summary.schema_version} on first use"
    )
    memories = sum(summary.memories.values())
    checks.append(Check("database", True, f"{path}: {memories:,} memories, schema {newest}{note}"))
    return checks, summary


def _creatable(path: Path) -> Check:
    """Whether the server could create the store at ``path``: tried, not guessed from permission
    bits (root passes every access() test, and /sys or a read-only mount still refuse), with a
    probe file in the nearest folder that exists, removed at once."""
    folder = next((p for p in [path.parent, *path.parent.parents] if p.exists()), Path("/"))
    fix = "Set OLLAMA_MCP_DB to an absolute path in a folder you can write to."
    if not folder.is_dir():
        return Check("database", False, f"{path} cannot be created: {folder} is not a folder. {fix}")
    try:
        with tempfile.TemporaryFile(dir=folder, prefix=".ollama-mcp-doctor-"):
            pass
    except OSError as exc:
        return Check("database", False, f"{path} cannot be created: {folder} refuses new files ({exc.strerror}). {fix}")
    free = shutil.disk_usage(folder).free
    if free < MIN_FREE_BYTES:
        return Check("database", False, f"{path} cannot be created: only {free / 2**20:.1f} MiB are free on the disk "
                     f"of {folder}. Free some space, or {fix[0].lower()}{fix[1:]}")
    return Check("database", True, f"{path} does not exist yet; it will be created on first use "
                 f"({free / 2**30:.1f} GiB free)")


def _postgres(url: str, model: str) -> tuple[list[Check], StoreSummary | None]:
    """The PostgreSQL store: reachable, pgvector present, schema current, vector indexes ready."""
    from ollama_mcp.storage.postgres import db as pg_db  # noqa: PLC0415 - psycopg only for PostgreSQL users
    from ollama_mcp.storage.postgres.summary import summarize as pg_summarize  # noqa: PLC0415

    where = pg_db.describe(url)
    try:
        found = pg_summarize(url, model)
    except StorageError as exc:
        return [Check("database", False, str(exc))], None
    checks = [Check("postgres", True, f"PostgreSQL {found.server_version} at {where}")]
    if found.pgvector_version is not None:
        checks.append(Check("pgvector", True, f"pgvector {found.pgvector_version}"))
    elif found.pgvector_available is None:
        checks.append(Check("pgvector", False, f"the PostgreSQL server of {where} does not have pgvector installed; "
                            "install it there (https://github.com/pgvector/pgvector#installation)."))
    elif found.superuser:
        checks.append(Check("pgvector", True, f"pgvector {found.pgvector_available} is installed; ollama-mcp "
                            "creates the extension on first use"))
    else:
        checks.append(Check("pgvector", False, f"the pgvector extension is not created in {where} and this user "
                            "may not create it; run `CREATE EXTENSION vector;` there once as a superuser."))
    newest = pg_db.migrations()[-1].version
    if found.store is None:
        checks.append(Check("database", True, f"{where} has no ollama-mcp tables yet; they are created on first use"))
        return checks, None
    summary = found.store
    if summary.schema_version > newest:
        checks.append(Check("schema", False, f"{where} was written by a newer ollama-mcp (schema "
                            f"{summary.schema_version}, this version knows {newest}); upgrade ollama-mcp."))
        return checks, None
    note = (
        "" if summary.schema_version == newest else f"; it will be upgraded from {summary.schema_version} on first use"
    )
    checks.append(Check("database", True, f"{where}: {sum(summary.memories.values()):,} memories, "
                        f"schema {summary.schema_version}{note}"))
    for index_model, dim, facet, ready in found.vector_indexes:
        if not ready:
            checks.append(
                Check(
                    "index",
                    False,
                    f"the HNSW index of {index_model!r} ({dim} dimensions, {facet}) is not valid "
                    "(a build was interrupted); searches by meaning of that model scan every vector. "
                    "Run `REINDEX TABLE memory_embeddings;` on the database.",
                    blocking=False,
                )
            )
    return checks, summary


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
    if summary.pending:
        checks.append(
            Check(
                "pending",
                True,
                f"{summary.pending:,} memories wait for their vectors; the server "
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
    if settings.postgres_url is not None:
        return _postgres_stats(settings.store_url, settings.embed_model)
    path = settings.store_path
    if not path.exists():
        return [("database", f"{path} (not created yet)")]
    size = sum(p.stat().st_size for p in (path, path.with_name(path.name + "-wal")) if p.exists())
    summary = summarize(path, settings.embed_model)
    return [("backend", f"SQLite {sqlite_version}"), ("database", f"{path} ({size / 2**20:.1f} MiB)"),
            ("schema", str(summary.schema_version)), *_holdings(summary, settings.embed_model)]


def _postgres_stats(url: str, model: str) -> list[tuple[str, str]]:
    from ollama_mcp.storage.postgres import db as pg_db  # noqa: PLC0415 - psycopg only for PostgreSQL users
    from ollama_mcp.storage.postgres.summary import summarize as pg_summarize  # noqa: PLC0415

    found = pg_summarize(url, model)
    lines = [
        ("backend", f"PostgreSQL {found.server_version}, pgvector {found.pgvector_version or 'not created'}"),
        ("database", f"{pg_db.describe(url)} ({found.size_bytes / 2**20:.1f} MiB)"),
    ]
    if found.store is None:
        return [*lines, ("schema", "none yet (created on first use)")]
    indexes = [("index", f"HNSW {m} ({dim} dimensions, {facet}): {'ready' if ready else 'INVALID, run REINDEX'}")
               for m, dim, facet, ready in found.vector_indexes]
    return [*lines, ("schema", str(found.store.schema_version)), *_holdings(found.store, model), *indexes]


def _holdings(summary: StoreSummary, model: str) -> list[tuple[str, str]]:
    """What a store holds, the same lines on every backend."""
    conversations, kinds = summary.conversations, summary.memories
    lines = [
        ("conversations", f"{sum(conversations.values()):,} ({conversations.get('active', 0):,} active, "
                          f"{conversations.get('completed', 0):,} completed)"),
        ("memories", f"{kinds.get('note', 0):,} notes, {kinds.get('summary', 0):,} summaries, "
                     f"{kinds.get('message', 0):,} messages"
                     + (f", {kinds['fact']:,} facts" if kinds.get("fact") else "")),
        ("pending", f"{summary.pending:,} without a vector of {model!r} (the configured model)"),
        ("jobs", ", ".join(f"{count:,} {state}" for state, count in sorted(summary.jobs.items())) or "none"),
    ]
    lines += [("vectors", f"{model}: {count:,} memories, {dim} dimensions") for model, dim, count in summary.vectors]
    return lines

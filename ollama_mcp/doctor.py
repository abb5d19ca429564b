"""The read-only reports of the CLI: ``doctor`` (checks what normal use needs and says, in plain
words, how to fix what fails) and ``stats`` (what the store holds).

Neither changes anything: the database is opened read-only (or, if it does not exist yet, only
its folder is checked), and ``doctor`` asks Ollama to describe the model and embed one probe text.
"""

from __future__ import annotations

import os
import sqlite3
import stat
from dataclasses import dataclass
from pathlib import Path

from ollama_mcp.config import Settings
from ollama_mcp.db import migrations
from ollama_mcp.embeddings import Embedder
from ollama_mcp.errors import OllamaError, StorageError
from ollama_mcp.ollama_client import OllamaClient


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    detail: str
    blocking: bool = True  # a failure that stops normal use (exit code 1)


async def run_checks(settings: Settings) -> list[Check]:
    checks = [_sqlite_features(), *_database(settings.db_path)]
    checks.extend(await _ollama(settings))
    return checks


def _sqlite_features() -> Check:
    try:
        with sqlite3.connect(":memory:") as conn:
            conn.execute("CREATE VIRTUAL TABLE t USING fts5 (x, tokenize = 'porter unicode61')")
    except sqlite3.Error as exc:
        return Check("sqlite", False, f"SQLite {sqlite3.sqlite_version} lacks FTS5 ({exc}); use a Python built with FTS5.")
    return Check("sqlite", True, f"SQLite {sqlite3.sqlite_version} with FTS5")


def _database(path: Path) -> list[Check]:
    if not path.exists():
        folder = next((p for p in [path.parent, *path.parent.parents] if p.exists()), Path("/"))
        if folder.is_dir() and os.access(folder, os.W_OK | os.X_OK):
            return [Check("database", True, f"{path} does not exist yet; it will be created on first use")]
        return [Check("database", False, f"{path} cannot be created: {folder} is not a writable folder. "
                      "Set OLLAMA_MCP_DB to an absolute path in a folder you can write to.")]
    checks = []
    if not os.access(path, os.R_OK | os.W_OK) or not os.access(path.parent, os.W_OK | os.X_OK):
        checks.append(Check("database", False, f"{path} or its folder is not writable by you; fix the permissions "
                            "or set OLLAMA_MCP_DB to a writable path."))
    mode = stat.S_IMODE(path.stat().st_mode)
    if mode & 0o077:
        checks.append(Check("permissions", False, f"{path} is readable by others (mode {mode:o}); "
                            f"run `chmod 600 {path}` to keep memories private.", blocking=False))
    try:
        with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as conn:
            version = conn.execute("SELECT max(version) FROM schema_migrations").fetchone()[0] or 0
            memories = conn.execute("SELECT count(*) FROM memories").fetchone()[0]
    except sqlite3.Error as exc:
        return [*checks, Check("database", False, f"{path} could not be read as an ollama-mcp database ({exc}).")]
    newest = migrations()[-1].version
    if version > newest:
        checks.append(Check("schema", False, f"{path} was written by a newer ollama-mcp (schema {version}, this "
                            f"version knows {newest}); upgrade ollama-mcp."))
    else:
        note = "" if version == newest else f"; it will be upgraded from {version} on first use"
        checks.append(Check("database", True, f"{path}: {memories:,} memories, schema {newest}{note}"))
    return checks


async def _ollama(settings: Settings) -> list[Check]:
    client = OllamaClient(settings.ollama_host, timeout=settings.embed_timeout, connect_timeout=settings.connect_timeout)
    embedder = Embedder(client, settings.embed_model)
    try:
        try:
            info = await embedder.info()
            vector = await embedder.embed_query("ollama-mcp doctor probe")
        except OllamaError as exc:
            return [Check("ollama", False, str(exc))]
        checks = [Check("ollama", True, f"{settings.ollama_host} answers; model {settings.embed_model!r} "
                        f"embeds {vector.size}-dimensional vectors (context {info.context_length or '?'} tokens)")]
        checks.extend(_stored_vectors(settings, vector.size))
        return checks
    finally:
        await client.aclose()


def _stored_vectors(settings: Settings, dim: int) -> list[Check]:
    if not settings.db_path.exists():
        return []
    try:
        return _vector_checks(settings, dim)
    except sqlite3.Error as exc:
        return [Check("vectors", False, f"the stored vectors could not be read ({exc}).")]


def _vector_checks(settings: Settings, dim: int) -> list[Check]:
    with sqlite3.connect(f"file:{settings.db_path}?mode=ro", uri=True) as conn:
        stored = conn.execute(
            "SELECT dim FROM memory_embeddings WHERE model = ? LIMIT 1", (settings.embed_model,)
        ).fetchone()
        pending = conn.execute(
            "SELECT count(*) FROM memories m WHERE NOT EXISTS (SELECT 1 FROM memory_embeddings e"
            " WHERE e.memory_seq = m.seq AND e.model = ? AND e.facet = 'content')",
            (settings.embed_model,),
        ).fetchone()[0]
    checks = []
    if stored and stored[0] != dim:
        checks.append(Check("vectors", False, f"stored vectors of {settings.embed_model!r} have {stored[0]} "
                            f"dimensions but the model now returns {dim}: the model changed under the same name. "
                            "Pull the original model again, or set OLLAMA_MCP_EMBED_MODEL to a new name so "
                            "every memory is embedded again."))
    if pending:
        checks.append(Check("pending", True, f"{pending:,} memories wait for their vectors; the server embeds "
                            "them in the background while it runs", blocking=False))
    return checks


def stats(settings: Settings) -> list[tuple[str, str]]:
    """What the store holds, as (label, value) lines; read-only."""
    path = settings.db_path
    if not path.exists():
        return [("database", f"{path} (not created yet)")]
    size = sum(p.stat().st_size for p in (path, path.with_name(path.name + "-wal")) if p.exists())
    try:
        return _stats(settings, path, size)
    except sqlite3.Error as exc:
        raise StorageError(f"{path} could not be read as an ollama-mcp database ({exc}); run `ollama-mcp doctor`.") from exc


def _stats(settings: Settings, path: Path, size: int) -> list[tuple[str, str]]:
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as conn:
        conversations = dict(conn.execute("SELECT status, count(*) FROM conversations GROUP BY status").fetchall())
        kinds = dict(conn.execute("SELECT kind, count(*) FROM memories GROUP BY kind").fetchall())
        models = conn.execute(
            "SELECT model, dim, count(DISTINCT memory_seq) FROM memory_embeddings WHERE facet = 'content'"
            " GROUP BY model, dim ORDER BY model"
        ).fetchall()
        pending = conn.execute(
            "SELECT count(*) FROM memories m WHERE NOT EXISTS (SELECT 1 FROM memory_embeddings e"
            " WHERE e.memory_seq = m.seq AND e.model = ? AND e.facet = 'content')",
            (settings.embed_model,),
        ).fetchone()[0]
    lines = [
        ("database", f"{path} ({size / 2**20:.1f} MiB)"),
        ("conversations", f"{sum(conversations.values()):,} ({conversations.get('active', 0):,} active, "
                          f"{conversations.get('completed', 0):,} completed)"),
        ("memories", f"{kinds.get('note', 0):,} notes, {kinds.get('summary', 0):,} summaries, "
                     f"{kinds.get('message', 0):,} messages"),
        ("pending", f"{pending:,} without a vector of {settings.embed_model!r} (the configured model)"),
    ]
    lines += [("vectors", f"{model}: {count:,} memories, {dim} dimensions") for model, dim, count in models]
    return lines

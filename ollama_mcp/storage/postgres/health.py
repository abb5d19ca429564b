"""The PostgreSQL store as ``doctor`` and ``stats`` see it: reachable, pgvector present, schema
current, vector indexes ready; read-only."""

from __future__ import annotations

from ollama_mcp.domain import Check, StoreSummary
from ollama_mcp.errors import StorageError
from ollama_mcp.storage.migrations import schema_check
from ollama_mcp.storage.postgres import db as pg_db
from ollama_mcp.storage.postgres.summary import summarize as pg_summarize


def holdings(url: str, model: str) -> tuple[list[tuple[str, str]], StoreSummary | None, list[tuple[str, str]]]:
    """``stats``' lines before what the store holds, its summary, and the lines after."""
    found = pg_summarize(url, model)
    lines = [
        ("backend", f"PostgreSQL {found.server_version}, pgvector {found.pgvector_version or 'not created'}"),
        ("database", f"{pg_db.describe(url)} ({found.size_bytes / 2**20:.1f} MiB)"),
    ]
    if found.store is None:
        return [*lines, ("schema", "none yet (created on first use)")], None, []
    indexes = [("index", f"HNSW {m} ({dim} dimensions, {facet}): {'ready' if ready else 'INVALID, run REINDEX'}")
               for m, dim, facet, ready in found.vector_indexes]
    return [*lines, ("schema", str(found.store.schema_version))], found.store, indexes


def checks(url: str, model: str) -> tuple[list[Check], StoreSummary | None]:
    """The PostgreSQL store: reachable, pgvector present, schema current, vector indexes ready."""
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
    state = schema_check(where, summary.schema_version, newest, sum(summary.memories.values()))
    checks.append(state)
    if not state.ok:
        return checks, None
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

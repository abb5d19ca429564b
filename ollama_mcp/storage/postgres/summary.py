"""A read-only look at a PostgreSQL store for ``doctor`` and ``stats``: what it holds, the server's
and pgvector's versions, the schema version and the state of the vector indexes. Nothing is
migrated, created or locked."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg import sql

from ollama_mcp.domain import StoreSummary
from ollama_mcp.storage.postgres.db import CONNECT_TIMEOUT_S, as_server, role_of, schema_of, translate
from ollama_mcp.storage.postgres.dialect import POSTGRES
from ollama_mcp.storage.sql.chat_calls import CALLS_SINCE, CHAT_JOBS_OPEN, hour_ago
from ollama_mcp.storage.sql.vectors import missing_vector


@dataclass(frozen=True)
class PgSummary:
    store: StoreSummary | None  # None: the schema is not there yet (created on first use)
    server_version: str
    pgvector_version: str | None  # None: the extension is not created in this database
    pgvector_available: str | None  # the version the server could create (None: not installed there)
    superuser: bool  # whether this user may create the extension
    size_bytes: int
    vector_indexes: list[tuple[str, str, str, bool]]  # (model, dimension, facet, ready) per HNSW index


def summarize(url: str, model: str) -> PgSummary:
    """Read the database at ``url`` without changing it."""
    try:
        with psycopg.connect(as_server(url), autocommit=True, connect_timeout=CONNECT_TIMEOUT_S) as conn:
            conn.execute("SET default_transaction_read_only = on")
            server = str(_one(conn, "SHOW server_version"))
            pgvector = _one(conn, "SELECT max(extversion) FROM pg_extension WHERE extname = 'vector'")
            size = int(_one(conn, "SELECT pg_database_size(current_database())"))
            available = _one(conn, "SELECT max(default_version) FROM pg_available_extensions WHERE name = 'vector'")
            superuser = bool(_one(conn, "SELECT rolsuper FROM pg_roles WHERE rolname = current_user"))
            facts = (server, pgvector, available, superuser, size)
            schema = schema_of(url)  # a principal's: until it exists, names would resolve to public's tables
            if schema is not None:
                if _one(conn, "SELECT to_regnamespace(%(s)s) IS NULL", {"s": schema}):
                    return PgSummary(None, *facts, [])
                # As the principal's role, which alone may read its schema (postgres.db.provision).
                conn.execute(sql.SQL("SET ROLE {}; SET search_path = {}, public").format(
                    sql.Identifier(str(role_of(url))), sql.Identifier(schema)))
            if _one(conn, "SELECT to_regclass('memories') IS NULL"):
                return PgSummary(None, *facts, [])
            store = StoreSummary(
                schema_version=int(_one(conn, "SELECT coalesce(max(version), 0) FROM schema_migrations")),
                conversations=dict(
                    conn.execute("SELECT status, count(*) FROM conversations GROUP BY status").fetchall()
                ),
                memories=dict(conn.execute("SELECT kind, count(*) FROM memories GROUP BY kind").fetchall()),
                vectors=[
                    tuple(row)
                    for row in conn.execute(
                        "SELECT model, dim, count(DISTINCT memory_seq) FROM memory_embeddings WHERE facet = 'content'"
                        " GROUP BY model, dim ORDER BY model"
                    ).fetchall()
                ],
                pending=int(
                    _one(
                        conn,
                        f"SELECT count(*) FROM memories m WHERE {missing_vector(POSTGRES, 'content', '%(model)s')}",
                        {"model": model},
                    )
                ),
                pending_context=int(
                    _one(
                        conn,
                        f"SELECT count(*) FROM memories m WHERE {missing_vector(POSTGRES, 'context', '%(model)s')}",
                        {"model": model},
                    )
                ),
                jobs=dict(conn.execute("SELECT state, count(*) FROM jobs GROUP BY state").fetchall()),
                job_problems=[
                    tuple(row)
                    for row in conn.execute(
                        "SELECT kind, state, last_error FROM jobs WHERE last_error IS NOT NULL AND state <> 'done'"
                        " ORDER BY id DESC LIMIT 3"
                    ).fetchall()
                ],
                chat_calls=(0, None) if _one(conn, "SELECT to_regclass('chat_calls') IS NULL")
                else tuple(conn.execute(POSTGRES.sql(CALLS_SINCE), (hour_ago(),)).fetchone() or (0, None)),
                chat_jobs_open=int(_one(conn, CHAT_JOBS_OPEN)),
                sessions=frozenset(row[0] for row in conn.execute(
                    "SELECT metadata->>'session_id' FROM conversations WHERE metadata ? 'session_id'").fetchall()),
            )
            indexes = conn.execute(
                "SELECT replace(substring(pg_get_expr(i.indpred, i.indrelid) FROM 'model = ''(.*?)''::text'), '''''',"
                " ''''),"
                " substring(pg_get_indexdef(i.indexrelid) FROM 'vector\\((\\d+)\\)'),"
                " substring(pg_get_expr(i.indpred, i.indrelid) FROM 'facet = ''(\\w+)''::text'), i.indisvalid AND"
                " i.indisready"
                " FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid"
                " WHERE c.relname LIKE 'memory_embeddings_hnsw_%'"
                " AND i.indrelid = 'memory_embeddings'::regclass ORDER BY 1, 2, 3"  # this store's (schema's) only
            ).fetchall()
            return PgSummary(store, *facts, [tuple(row) for row in indexes])
    except psycopg.Error as exc:
        raise translate(exc, "connect" if isinstance(exc, psycopg.OperationalError) else "read the store", url) from exc


def _one(conn: psycopg.Connection, query: str, params: dict[str, Any] | None = None) -> Any:
    """The first column of the first row."""
    row = conn.execute(query, params).fetchone()
    return None if row is None else row[0]

"""Connecting to PostgreSQL and applying ``schema_postgres/NNNN_*.sql`` once, however many
server processes start at the same moment.

Errors are translated here, once: every message names the server as ``host:port/database``
(never the password a URL may carry) and says what to do.
"""

from __future__ import annotations

import logging
import re

import psycopg
from psycopg import errors as pg_errors
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from ollama_mcp.errors import SchemaError, StorageError
from ollama_mcp.migrations import Migration, shipped

log = logging.getLogger(__name__)

CONNECT_TIMEOUT_S = 10
# pg_advisory_xact_lock key for migrations: one instance migrates, the others wait, then find
# nothing left to do. Any fixed 64-bit number no other application on the database uses.
MIGRATION_LOCK = 0x6F6C6C616D61_01  # "ollama" + 1


def migrations() -> list[Migration]:
    """The PostgreSQL migrations shipped with this version, in order."""
    return shipped("ollama_mcp.schema_postgres")


def describe(url: str) -> str:
    """``host:port/database`` of a libpq URL or conninfo string, without user or password."""
    try:
        params = conninfo_to_dict(url)
    except psycopg.ProgrammingError:
        return "the PostgreSQL server in OLLAMA_MCP_DB"
    host = str(params.get("host") or "localhost")
    port = str(params.get("port") or "5432")
    return f"{host}:{port}/{params.get('dbname') or params.get('user') or 'postgres'}"


_SCHEMA_OPTION = re.compile(r"-c search_path=(ollama_mcp_[a-z0-9_]+),public")


def in_schema(url: str, schema: str) -> str:
    """``url`` with ``schema`` first on the search path of every connection made with it: a
    principal's memory lives in a schema of its own (the local principal's in ``public``). Tables
    are named without a schema in every statement, so they resolve to ``schema``'s, which
    ``migrate`` creates before anything else; ``public`` stays on the path for pgvector's types."""
    options = str(conninfo_to_dict(url).get("options") or "")
    return make_conninfo(url, options=f"{options} -c search_path={schema},public".strip())


def schema_of(url: str) -> str | None:
    """The principal's schema ``in_schema`` put into ``url`` (None: the database's default)."""
    found = _SCHEMA_OPTION.search(str(conninfo_to_dict(url).get("options") or ""))
    return found.group(1) if found else None


async def connect(url: str) -> psycopg.AsyncConnection:
    """Open one connection (autocommit: every write is an explicit transaction)."""
    try:
        return await psycopg.AsyncConnection.connect(url, autocommit=True, connect_timeout=CONNECT_TIMEOUT_S)
    except psycopg.Error as exc:
        raise translate(exc, "connect", url) from exc


async def migrate(conn: psycopg.AsyncConnection, url: str) -> int:
    """Apply the migrations this database lacks, in one transaction under an advisory lock, so
    that ten instances starting at once migrate once. Returns the schema version."""
    known = migrations()
    newest_known = known[-1].version if known else 0
    try:
        async with conn.transaction():
            await conn.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK,))
            schema = schema_of(url)
            if schema is not None:  # first: a table created before it would land in public
                await conn.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(schema)))
            await conn.execute(
                "CREATE TABLE IF NOT EXISTS schema_migrations ("
                " version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())"
            )
            cursor = await conn.execute("SELECT version FROM schema_migrations")
            applied = {row[0] for row in await cursor.fetchall()}
            if applied and max(applied) > newest_known:
                raise SchemaError(
                    f"The database {describe(url)} was written by a newer ollama-mcp (schema version "
                    f"{max(applied)}; this version knows up to {newest_known}). Upgrade ollama-mcp; the "
                    "database was not changed."
                )
            for migration in known:
                if migration.version in applied:
                    continue
                await conn.execute(migration.sql)  # a whole file of statements: fine without parameters
                await conn.execute(
                    "INSERT INTO schema_migrations (version, name) VALUES (%s, %s)", (migration.version, migration.name)
                )
                log.info("applied PostgreSQL schema migration %04d_%s", migration.version, migration.name)
    except psycopg.Error as exc:
        raise translate(exc, "apply the schema migrations", url) from exc
    return newest_known


# SQLSTATEs (or their class, two characters) whose cause and fix are known, for what a user sees.
_KNOWN_CAUSES = {
    "53100": "the server's disk is full; free space there, then retry.",
    "53200": "the server ran out of memory; retry, or ask its administrator.",
    "53300": "the server (or this user's connection limit) has no connection slot left; retry later, or "
    "raise max_connections there (each ollama-mcp process keeps up to 8 connections).",
    "42501": "this user lacks a privilege ollama-mcp needs on the database; grant it (the owner of the "
    "database, or CREATE on its public schema).",
    "25006": "the server is read-only (a standby, or default_transaction_read_only); point OLLAMA_MCP_DB at "
    "the primary.",
    "57": "the server is shutting down or cancelled the statement; retry once it is back.",
    "40": "the transaction hit a conflict with another one (serialization or deadlock); retry.",
}


def translate(exc: psycopg.Error, action: str, url: str) -> StorageError:
    """A psycopg error as a StorageError that names the server (never the password) and the fix."""
    where = describe(url)
    if isinstance(exc, pg_errors.InsufficientPrivilege | pg_errors.FeatureNotSupported | pg_errors.UndefinedFile) \
            and "vector" in str(exc):
        return SchemaError(
            f"The pgvector extension is missing in {where}, and this user may not create it. Run "
            "`CREATE EXTENSION vector;` once in that database as a superuser (pgvector must be installed "
            "on the server), then start ollama-mcp again."
        )
    # A refused connection carries no SQLSTATE in psycopg, only the server's FATAL line (in English).
    fatal = str(exc).partition("FATAL:")[2] if isinstance(exc, psycopg.OperationalError) else ""
    login_refused = "password authentication failed" in fatal or ("role" in fatal and "does not exist" in fatal)
    if isinstance(exc, pg_errors.InvalidPassword | pg_errors.InvalidAuthorizationSpecification) or login_refused:
        return StorageError(
            f"PostgreSQL at {where} refused the login; check the user and password (in the URL, "
            "PGPASSWORD or ~/.pgpass)."
        )
    if "database" in fatal and "does not exist" in fatal:
        return StorageError(
            f"PostgreSQL answers, but the database of {where} does not exist; create it (`createdb NAME`, "
            "or CREATE DATABASE as a user who may) or fix the database name in OLLAMA_MCP_DB."
        )
    state = exc.sqlstate or ("53300" if "too many connections" in fatal else "57" if "shutting down" in fatal
                             or "starting up" in fatal else "")
    known = _KNOWN_CAUSES.get(state) or _KNOWN_CAUSES.get(state[:2])
    if known is not None:
        return StorageError(f"Could not {action} on PostgreSQL at {where}: {known} Nothing was changed.")
    if isinstance(exc, psycopg.OperationalError):
        return StorageError(
            f"Could not {action} to PostgreSQL at {where}: the server is unreachable or refused the "
            "connection. Check that it is running and that OLLAMA_MCP_DB names the right host and port."
            if action == "connect" else
            f"Could not {action} on PostgreSQL at {where}: the connection failed. Check that the server is running."
        )
    # The primary message names the failure without row values (the detail may quote a row, and
    # users' words stay out of logs); the SQLSTATE lets an administrator look it up.
    log.warning("PostgreSQL error while trying to %s: %s [%s]", action, exc.diag.message_primary, exc.sqlstate)
    return StorageError(
        f"Could not {action} on PostgreSQL at {where} ({type(exc).__name__}, SQLSTATE {exc.sqlstate}); "
        "details are in the server log."
    )

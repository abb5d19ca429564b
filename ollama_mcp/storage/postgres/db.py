"""Connecting to PostgreSQL and applying ``postgres/migrations/NNNN_*.sql`` once, however many
server processes start at the same moment.

Errors are translated here, once: every message names the server as ``host:port/database``
(never the password a URL may carry) and says what to do.
"""

from __future__ import annotations

import getpass
import hashlib
import logging
import os
import re

import psycopg
from psycopg import errors as pg_errors
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from ollama_mcp.errors import SchemaError, StorageError
from ollama_mcp.storage.migrations import Migration, newest, report, shipped, to_apply

log = logging.getLogger(__name__)

CONNECT_TIMEOUT_S = 10
# pg_advisory_xact_lock key for migrations: one instance migrates, the others wait, then find
# nothing left to do. Any fixed 64-bit number no other application on the database uses.
MIGRATION_LOCK = 0x6F6C6C616D61_01  # "ollama" + 1


def migrations() -> list[Migration]:
    """The PostgreSQL migrations shipped with this version, in order."""
    return shipped("ollama_mcp.storage.postgres.migrations")


def describe(url: str) -> str:
    """``host:port/database`` of a libpq URL or conninfo string, without user or password."""
    try:
        params = conninfo_to_dict(url)
    except psycopg.ProgrammingError:
        return "the PostgreSQL server in OLLAMA_MCP_DB"
    host = str(params.get("host") or "localhost")
    port = str(params.get("port") or "5432")
    return f"{host}:{port}/{params.get('dbname') or params.get('user') or 'postgres'}"


_PRINCIPAL_OPTIONS = re.compile(r"-c search_path=(ollama_mcp_[a-z0-9_]+),public -c role=(ollama_mcp_[a-z0-9_]+)")


def in_schema(url: str, schema: str) -> str:
    """``url`` for a principal's memory, which lives in a schema of its own (the local principal's
    in ``public``), owned by a role of its own (``provision``). Every connection made with it acts
    as that role (``-c role``: the session's own default, which ``RESET ROLE`` returns to), so the
    database itself refuses it every other principal's rows, whatever a query names; and it has
    ``schema`` first on its search path, so the tables every statement names without a schema are
    that principal's. ``public`` stays on the path for pgvector's types."""
    options = str(conninfo_to_dict(url).get("options") or "")
    role = f"{schema}_{hashlib.sha256(_database(url).encode()).hexdigest()[:8]}"
    return make_conninfo(url, options=f"{options} -c search_path={schema},public -c role={role}".strip())


def _database(url: str) -> str:
    """The database ``url`` connects to, as libpq resolves it. Roles belong to the whole server,
    not to one database, so a principal's role name carries its database's (hashed): two
    databases on one server, each with its own server role, never contend for one role."""
    params = conninfo_to_dict(url)
    return str(params.get("dbname") or os.environ.get("PGDATABASE") or params.get("user")
               or os.environ.get("PGUSER") or getpass.getuser())


def schema_of(url: str) -> str | None:
    """The principal's schema ``in_schema`` put into ``url`` (None: the database's default)."""
    found = _PRINCIPAL_OPTIONS.search(str(conninfo_to_dict(url).get("options") or ""))
    return found.group(1) if found else None


def role_of(url: str) -> str | None:
    """The principal's role ``in_schema`` put into ``url`` (None: the server's own)."""
    found = _PRINCIPAL_OPTIONS.search(str(conninfo_to_dict(url).get("options") or ""))
    return found.group(2) if found else None


def as_server(url: str) -> str:
    """``url`` without what ``in_schema`` added: a connection as the server's own role."""
    params = conninfo_to_dict(url)
    options = _PRINCIPAL_OPTIONS.sub("", str(params.pop("options", None) or "")).strip()
    return make_conninfo("", **params, **({"options": options} if options else {}))


async def connect(url: str) -> psycopg.AsyncConnection:
    """Open one connection (autocommit: every write is an explicit transaction)."""
    try:
        return await psycopg.AsyncConnection.connect(url, autocommit=True, connect_timeout=CONNECT_TIMEOUT_S)
    except psycopg.Error as exc:
        raise translate(exc, "connect", url) from exc


async def principal_schemas(url: str) -> list[str]:
    """The schemas ``in_schema`` gave principals in this database (``ollama_mcp_alice``), by name."""
    conn = await connect(as_server(url))
    try:
        cursor = await conn.execute(
            "SELECT nspname FROM pg_namespace WHERE starts_with(nspname, 'ollama_mcp_') ORDER BY nspname"
        )
        return [row[0] for row in await cursor.fetchall()]
    except psycopg.Error as exc:
        raise translate(exc, "list the principals' schemas", url) from exc
    finally:
        await conn.close()


async def provision(url: str) -> None:
    """Before a principal's first connection (``in_schema``): its role and its schema, as the
    server's own role, once however many instances start at once.

    The role cannot log in; the server's role may ``SET ROLE`` to it but (on PostgreSQL 16 and
    later) does not inherit its privileges, so a query made as the server's role cannot read a
    principal's rows either. The schema belongs to the role, which therefore owns every table its
    migrations create, and has no privilege on any other principal's schema or on ``public``'s
    tables (the local principal's). pgvector is created in ``public`` first: created by a
    principal's migrations, it would land in that principal's schema."""
    schema, name = schema_of(url), role_of(url)
    if schema is None or name is None:
        return
    base = as_server(url)
    conn = await connect(base)
    role = sql.Identifier(name)
    try:
        async with conn.transaction():
            await conn.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK,))
            await conn.execute("CREATE EXTENSION IF NOT EXISTS vector WITH SCHEMA public")
            cursor = await conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (name,))
            if await cursor.fetchone() is None:
                try:
                    async with conn.transaction():  # a savepoint: another database may create it at once
                        await conn.execute(sql.SQL("CREATE ROLE {} NOLOGIN").format(role))
                except pg_errors.DuplicateObject:
                    pass
            cursor = await conn.execute("SELECT current_setting('server_version_num')::int >= 160000")
            row = await cursor.fetchone()
            modern = bool(row and row[0])  # PostgreSQL 16: a membership may allow SET ROLE without inheriting
            cursor = await conn.execute(
                "SELECT 1 FROM pg_auth_members m JOIN pg_roles r ON r.oid = m.roleid JOIN pg_roles u ON u.oid ="
                " m.member"
                " WHERE r.rolname = %s AND u.rolname = current_user"
                + (" AND m.set_option AND NOT m.inherit_option" if modern else ""),
                (name,),
            )
            if await cursor.fetchone() is None:  # else granted already (perhaps by an administrator)
                grant = (
                    "GRANT {} TO CURRENT_USER WITH INHERIT FALSE, SET TRUE" if modern else "GRANT {} TO CURRENT_USER"
                )
                await conn.execute(sql.SQL(grant).format(role))
            await conn.execute(
                sql.SQL("CREATE SCHEMA IF NOT EXISTS {} AUTHORIZATION {}").format(sql.Identifier(schema), role)
            )
    except psycopg.Error as exc:
        if isinstance(exc, pg_errors.InsufficientPrivilege) and "vector" not in str(exc):
            raise StorageError(
                f"Could not prepare the PostgreSQL role {name} and schema {schema} for a principal at "
                f"{describe(base)}: {exc.diag.message_primary}. Let the server's role create roles (ALTER ROLE <its "
                f"name> CREATEROLE), or create them yourself: CREATE ROLE {name} NOLOGIN; GRANT {name} TO <its name> "
                f"WITH INHERIT FALSE, SET TRUE; CREATE SCHEMA {schema} AUTHORIZATION {name};"
            ) from exc
        raise translate(exc, f"prepare the role {name} and schema {schema}", base) from exc
    finally:
        await conn.close()


async def migrate(conn: psycopg.AsyncConnection, url: str) -> int:
    """Apply the migrations this database lacks, in one transaction under an advisory lock, so
    that ten instances starting at once migrate once. Returns the schema version."""
    known = migrations()
    try:
        async with conn.transaction():
            await conn.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK,))
            await conn.execute(
                "CREATE TABLE IF NOT EXISTS schema_migrations ("
                " version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())"
            )
            cursor = await conn.execute("SELECT version FROM schema_migrations")
            applied = {row[0] for row in await cursor.fetchall()}
            pending = to_apply(known, applied, f"The database {describe(url)}")
            for migration in pending:
                await conn.execute(migration.sql)  # a whole file of statements: fine without parameters
                await conn.execute(
                    "INSERT INTO schema_migrations (version, name) VALUES (%s, %s)", (migration.version, migration.name)
                )
                log.debug("applied PostgreSQL schema migration %04d_%s", migration.version, migration.name)
        report(log, applied, pending, f"PostgreSQL {describe(url)}")
    except psycopg.Error as exc:
        raise translate(exc, "apply the schema migrations", url) from exc
    return newest(known)


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

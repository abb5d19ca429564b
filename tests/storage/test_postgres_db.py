"""The PostgreSQL opener against a real server: migrations under an advisory lock, and errors
that name the server and the fix without ever printing a password."""

from __future__ import annotations

from typing import Any

import anyio
import psycopg
import pytest
from psycopg import sql
from psycopg.conninfo import make_conninfo

from ollama_mcp.errors import SchemaError, StorageError
from ollama_mcp.storage.postgres import db

pytestmark = pytest.mark.anyio


def rows(url: str, query: str) -> list[tuple[Any, ...]]:
    with psycopg.connect(url) as conn:
        return conn.execute(query).fetchall()


async def open_and_migrate(url: str) -> int:
    conn = await db.connect(url)
    try:
        return await db.migrate(conn, url)
    finally:
        await conn.close()


async def test_ten_instances_starting_at_once_apply_each_migration_once(postgres_url: str) -> None:
    versions: list[int] = []
    errors: list[Exception] = []

    async def instance() -> None:
        try:
            versions.append(await open_and_migrate(postgres_url))
        except Exception as exc:  # collected: the assertion below shows them all
            errors.append(exc)

    with anyio.fail_after(60):
        async with anyio.create_task_group() as tasks:
            for _ in range(10):
                tasks.start_soon(instance)
    newest = db.migrations()[-1].version
    assert errors == [] and versions == [newest] * 10
    assert rows(postgres_url, "SELECT version, name FROM schema_migrations ORDER BY version") == [
        (m.version, m.name) for m in db.migrations()
    ]
    assert rows(postgres_url, "SELECT count(*) FROM pg_extension WHERE extname = 'vector'") == [(1,)]


async def test_a_database_from_a_newer_version_is_refused_and_left_unchanged(postgres_url: str) -> None:
    await open_and_migrate(postgres_url)
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute("INSERT INTO schema_migrations (version, name) VALUES (9999, 'from_the_future')")
    with pytest.raises(SchemaError, match=r"newer ollama-mcp \(schema version 9999.*Upgrade ollama-mcp"):
        await open_and_migrate(postgres_url)
    assert rows(postgres_url, "SELECT max(version), count(*) FROM schema_migrations") == [
        (9999, len(db.migrations()) + 1)
    ]


async def test_a_user_who_may_not_create_pgvector_is_told_to_ask_a_superuser(
    postgres_server: str,
) -> None:
    role, database, password = "member_no_vector", "team_no_vector", "pw-never-printed"
    with psycopg.connect(postgres_server, autocommit=True) as admin:
        admin.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(database)))
        admin.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(role)))
        admin.execute(sql.SQL("CREATE ROLE {} LOGIN PASSWORD {}").format(sql.Identifier(role), sql.Literal(password)))
        admin.execute(sql.SQL("CREATE DATABASE {} OWNER {}").format(sql.Identifier(database), sql.Identifier(role)))
    url = make_conninfo(postgres_server, user=role, password=password, dbname=database)
    try:
        with pytest.raises(SchemaError) as refused:
            await open_and_migrate(url)
        message = str(refused.value)
        assert "CREATE EXTENSION vector;" in message and "superuser" in message
        assert f"/{database}" in message and password not in message
        # Nothing was half-applied: the migration table was rolled back with the failed extension.
        assert rows(url, "SELECT to_regclass('schema_migrations') IS NULL") == [(True,)]
    finally:
        with psycopg.connect(postgres_server, autocommit=True) as admin:
            admin.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(database)))
            admin.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(role)))


async def test_an_unreachable_server_is_named_by_host_and_port_without_the_password() -> None:
    url = "postgresql://ana:s3cret-pw@127.0.0.1:1/team_memory?connect_timeout=2"
    with pytest.raises(StorageError) as failed:
        await db.connect(url)
    message = str(failed.value)
    assert "127.0.0.1:1/team_memory" in message and "unreachable" in message
    assert "s3cret-pw" not in message and "ana:" not in message


@pytest.mark.parametrize(("case", "said"), [
    ("missing database", "PostgreSQL answers, but the database of"),
    ("unknown user", "refused the login; check the user and password"),
    ("no connection slot", "has no connection slot left"),
])
async def test_a_refused_connection_is_told_by_its_cause_not_as_an_unreachable_server(
    postgres_server: str, case: str, said: str
) -> None:
    role, password = "member_limited", "pw-never-printed"
    with psycopg.connect(postgres_server, autocommit=True) as admin:
        admin.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(role)))
        limit = 0 if case == "no connection slot" else -1
        admin.execute(sql.SQL("CREATE ROLE {} LOGIN PASSWORD {} CONNECTION LIMIT {}").format(
            sql.Identifier(role), sql.Literal(password), sql.Literal(limit)))
    url = {
        "missing database": make_conninfo(postgres_server, dbname="no_such_memory"),
        "unknown user": make_conninfo(postgres_server, user="ghost"),
        "no connection slot": make_conninfo(postgres_server, user=role, password=password),
    }[case]
    try:
        with pytest.raises(StorageError) as refused:
            await db.connect(url)
    finally:
        with psycopg.connect(postgres_server, autocommit=True) as admin:
            admin.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(role)))
    message = str(refused.value)
    assert said in message and "unreachable" not in message and password not in message


async def test_an_hnsw_index_over_both_facets_is_replaced_by_one_per_facet_on_upgrade(postgres_url: str) -> None:
    from ollama_mcp.storage.postgres.base import vector_index_name  # noqa: PLC0415

    await open_and_migrate(postgres_url)
    with psycopg.connect(postgres_url, autocommit=True) as conn:  # a database as version 2 left it
        conn.execute("DELETE FROM schema_migrations WHERE version = 3")
        conn.execute(
            "CREATE INDEX memory_embeddings_hnsw_0123456789abcdef ON memory_embeddings USING hnsw"
            " ((vector::vector(4)) vector_cosine_ops) WHERE model = 'it''s:7b' AND dim = 4"
        )
    await open_and_migrate(postgres_url)
    indexes = rows(
        postgres_url,
        "SELECT indexname, indexdef FROM pg_indexes WHERE indexname LIKE 'memory_embeddings_hnsw_%' ORDER BY indexname",
    )
    assert sorted(name for name, _ in indexes) == sorted(
        vector_index_name("it's:7b", 4, facet) for facet in ("content", "context")
    )
    assert all("vector(4)" in str(definition) and "model = 'it''s:7b'" in str(definition) for _, definition in indexes)
    assert {str(definition).split("facet = ")[1][:9] for _, definition in indexes} == {"'content'", "'context'"}


async def test_a_server_role_that_may_not_create_roles_is_told_how_to_give_principals_theirs(
    postgres_server: str,
) -> None:
    role_name, database = "member_no_createrole", "team_no_createrole"
    with psycopg.connect(postgres_server, autocommit=True) as admin:
        admin.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(database)))
        admin.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(role_name)))
        admin.execute(sql.SQL("CREATE ROLE {} LOGIN").format(sql.Identifier(role_name)))
        admin.execute(
            sql.SQL("CREATE DATABASE {} OWNER {}").format(sql.Identifier(database), sql.Identifier(role_name))
        )
    with psycopg.connect(make_conninfo(postgres_server, dbname=database), autocommit=True) as admin:
        admin.execute("CREATE EXTENSION vector")
    url = make_conninfo(postgres_server, user=role_name, dbname=database)
    try:
        carol = db.in_schema(url, "ollama_mcp_carol")
        role = db.role_of(carol)
        assert role is not None and role.startswith("ollama_mcp_carol_")
        with pytest.raises(StorageError) as refused:
            await db.provision(carol)
        message = str(refused.value)
        assert f"role {role} and schema ollama_mcp_carol" in message and "CREATEROLE" in message
        assert f"GRANT {role} TO <its name> WITH INHERIT FALSE, SET TRUE" in message
        assert rows(url, "SELECT to_regnamespace('ollama_mcp_carol') IS NULL") == [(True,)]
        # Once an administrator made them as the message says, the principal's store opens.
        with psycopg.connect(make_conninfo(postgres_server, dbname=database), autocommit=True) as admin:
            admin.execute(f"CREATE ROLE {role} NOLOGIN")
            admin.execute(f"GRANT {role} TO {role_name} WITH INHERIT FALSE, SET TRUE")
            admin.execute(f"CREATE SCHEMA ollama_mcp_carol AUTHORIZATION {role}")
        await db.provision(carol)
        assert await open_and_migrate(carol) >= 7
        assert rows(carol, "SELECT current_user, to_regclass('memories')::text") == [(role, "memories")]
    finally:
        with psycopg.connect(postgres_server, autocommit=True) as admin:
            admin.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(database)))
            admin.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(role_name)))
            admin.execute(f"DROP ROLE IF EXISTS {db.role_of(db.in_schema(url, 'ollama_mcp_carol'))}")

"""Choosing the storage backend: the one place that knows there are two.

A file path in ``OLLAMA_MCP_DB`` opens the SQLite store and its in-memory ranker; a PostgreSQL URL
opens the PostgreSQL store and its in-database ranker. Everything above (``app`` and the layers it
builds) sees only ``storage.Storage`` and ``storage.Ranker``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ollama_mcp.config import LOCAL_PRINCIPAL, Settings, is_principal_name
from ollama_mcp.domain import Check, StoreSummary
from ollama_mcp.errors import ConfigError

if TYPE_CHECKING:  # head_start asks where the store lives before numpy is imported: keep this module light
    from ollama_mcp.storage.protocols import Storage
    from ollama_mcp.storage.ranker import Ranker
    from ollama_mcp.storage.ranking import SearchTuning
    from ollama_mcp.storage.sqlite.vector_index import EarlyLoad


async def open_backend(
    settings: Settings, tuning: SearchTuning | None = None, early_load: EarlyLoad | None = None,
) -> tuple[Storage, Ranker]:
    """The store and ranker ``settings`` name, opened (migrated, connected). ``early_load``: where
    SQLite's ranker may find its vectors already read (``head_start``)."""
    if settings.postgres_url is None:
        from ollama_mcp.storage.sqlite.search import HybridSearch  # noqa: PLC0415 - each backend loads only its own modules
        from ollama_mcp.storage.sqlite.store import Store  # noqa: PLC0415

        store = await Store.open(settings.store_path)
        return store, HybridSearch(store, settings.embed_model, tuning, early_load)
    try:
        from ollama_mcp.storage.postgres.search import PgRanker  # noqa: PLC0415 - the optional extra's modules
        from ollama_mcp.storage.postgres.store import PgStore  # noqa: PLC0415
    except ImportError as exc:
        raise ConfigError(
            f"OLLAMA_MCP_DB names a PostgreSQL database, but the PostgreSQL driver is not installed ({exc.name}); "
            "install it with `pip install 'ollama-mcp[postgres]'`."
        ) from exc
    pg = await PgStore.open(settings.store_url)
    return pg, PgRanker(pg, settings.embed_model, tuning)


async def principal_stores(settings: Settings) -> list[str]:
    """The principals other than the local one whose memory exists in the database ``settings``
    names (a file in ``memory.principals/``, or a schema of PostgreSQL), by name."""
    if settings.postgres_url is None:
        folder = settings.principals_folder
        found = sorted(path.stem for path in folder.glob("*.db")) if folder.is_dir() else []
    else:
        from ollama_mcp.storage.postgres.db import principal_schemas  # noqa: PLC0415 - the optional extra's modules

        found = [schema.removeprefix("ollama_mcp_") for schema in await principal_schemas(settings.postgres_url)]
    return [name for name in found if is_principal_name(name) and name != LOCAL_PRINCIPAL]


def health(settings: Settings) -> tuple[list[Check], StoreSummary | None]:
    """``doctor``'s checks of the store ``settings`` name, read-only, and what it holds (None
    when it cannot be read or does not exist yet)."""
    if settings.postgres_url is None:
        from ollama_mcp.storage.sqlite import health as sqlite_health  # noqa: PLC0415 - each backend its own

        return sqlite_health.checks(settings.store_path, settings.embed_model)
    from ollama_mcp.storage.postgres import health as pg_health  # noqa: PLC0415 - psycopg only for PostgreSQL

    return pg_health.checks(settings.store_url, settings.embed_model)


def holdings(settings: Settings) -> tuple[list[tuple[str, str]], StoreSummary | None, list[tuple[str, str]]]:
    """``stats``' backend lines before what the store holds, its summary, and the lines after."""
    if settings.postgres_url is None:
        from ollama_mcp.storage.sqlite import health as sqlite_health  # noqa: PLC0415 - each backend its own

        return sqlite_health.holdings(settings.store_path, settings.embed_model)
    from ollama_mcp.storage.postgres import health as pg_health  # noqa: PLC0415 - psycopg only for PostgreSQL

    return pg_health.holdings(settings.store_url, settings.embed_model)

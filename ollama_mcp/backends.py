"""Choosing the storage backend: the one place that knows there are two.

A file path in ``OLLAMA_MCP_DB`` opens the SQLite store and its in-memory ranker; a PostgreSQL URL
opens the PostgreSQL store and its in-database ranker. Everything above (``app`` and the layers it
builds) sees only ``storage.Storage`` and ``storage.Ranker``.
"""

from __future__ import annotations

from ollama_mcp.config import Settings
from ollama_mcp.errors import ConfigError
from ollama_mcp.ranking import SearchTuning
from ollama_mcp.storage import Ranker, Storage


async def open_backend(settings: Settings, tuning: SearchTuning | None = None) -> tuple[Storage, Ranker]:
    """The store and ranker ``settings`` name, opened (migrated, connected)."""
    if settings.postgres_url is None:
        from ollama_mcp.search import HybridSearch  # noqa: PLC0415 - each backend loads only its own modules
        from ollama_mcp.store import Store  # noqa: PLC0415

        store = await Store.open(settings.store_path)
        return store, HybridSearch(store, settings.embed_model, tuning)
    try:
        from ollama_mcp.postgres.search import PgRanker  # noqa: PLC0415 - the optional extra's modules
        from ollama_mcp.postgres.store import PgStore  # noqa: PLC0415
    except ImportError as exc:
        raise ConfigError(
            f"OLLAMA_MCP_DB names a PostgreSQL database, but the PostgreSQL driver is not installed ({exc.name}); "
            "install it with `pip install 'ollama-mcp[postgres]'`."
        ) from exc
    pg = await PgStore.open(settings.store_url)
    return pg, PgRanker(pg, settings.embed_model, tuning)

"""What the store parts both SQL backends share stand on: each backend's base class
(``sqlite.base.StoreBase``, ``postgres.base.PgStoreBase``) provides these, and a part written
here runs unchanged on both.

SQL here is written once, with ``?`` placeholders; ``_dialect.sql`` turns it into the backend's
own (PostgreSQL's ``%s``), and the rest of ``_dialect`` spells what the two write differently
(``dialect.py``).
Where they differ in more than words (vector search, full-text, migrations) the code stays in
the backend's folder.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractAsyncContextManager
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from ollama_mcp.domain import EmbeddingRow
from ollama_mcp.storage.sql.dialect import Dialect


class SqlParts:
    """The seam between a shared store part and its backend (declared for the type checker only,
    so nothing here can shadow the backend's own methods)."""

    if TYPE_CHECKING:
        _dialect: Dialect

        def _transaction(self, action: str, *, write: bool = True) -> AbstractAsyncContextManager[Any]: ...

        def _snapshot(self, action: str) -> AbstractAsyncContextManager[Any]: ...

        async def _fetchall(self, sql: Any, params: Sequence[Any], action: str) -> list[Any]: ...

        async def _insert_vectors(self, conn: Any, rows: Sequence[EmbeddingRow], *, backfill: bool = False) -> int: ...

        async def _vectors_stored(self, rows: Sequence[EmbeddingRow]) -> None: ...

        async def _vectors_dropped(self, conn: Any, model: str) -> None: ...


@lru_cache(maxsize=512)
def pyformat(text: str) -> str:
    """``?`` placeholders as psycopg's ``%s`` (a literal ``%`` doubled first). The SQL written
    once holds no ``?`` but its placeholders (PostgreSQL's jsonb ``?`` stays in postgres/)."""
    return text.replace("%", "%%").replace("?", "%s")

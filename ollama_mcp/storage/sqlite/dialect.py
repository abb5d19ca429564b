"""SQLite's spelling of the shared SQL (``storage/sql/dialect.py``): JSON through ``json_extract``
and ``json_each``, tags in their own rows, no row locks (a write holds the file)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import aiosqlite

from ollama_mcp.storage.records import dump_json
from ollama_mcp.storage.sql.dialect import Dialect

NOTES_OF_C = (
    "(SELECT count(*) FROM memories m WHERE m.conversation_id = c.id AND m.kind = 'note' AND m.superseded_by IS NULL)"
)


class SqliteDialect(Dialect):
    conversation_key = "rowid"
    greatest = "max"
    for_update = ""
    for_key_share = ""

    def sql(self, text: str) -> str:
        return text

    def json_text(self, column: str, key: str) -> str:
        return f"json_extract({column}, '$.{key}')"

    def json_true(self, column: str, key: str) -> str:
        return f"json_extract({column}, '$.{key}') = 1"

    def json_has(self, column: str, key: str) -> str:
        return f"json_extract({column}, '$.{key}') IS NOT NULL"

    def json_with(self, column: str, key: str) -> str:
        return f"json_set({column}, '$.{key}', ?)"

    def json_with_true(self, column: str, key: str) -> str:
        return f"json_set({column}, '$.{key}', json('true'))"

    def json_pair(self, column: str) -> str:
        return (
            f"EXISTS (SELECT 1 FROM json_each({column}) j WHERE j.key = ? AND CASE j.type"
            " WHEN 'true' THEN 'true' WHEN 'false' THEN 'false' ELSE CAST(j.value AS TEXT) END = ?)"
        )

    def in_list(self, column: str) -> str:
        return f"{column} IN (SELECT value FROM json_each(?))"

    def listed(self, values: Sequence[Any]) -> str:
        return json.dumps(list(values))

    def json(self, value: Any) -> str:
        return dump_json(value) if isinstance(value, dict) else json.dumps(value)

    def tags(self, tags: Sequence[str]) -> str:
        return json.dumps(list(tags))

    def from_json(self, cell: Any) -> Any:
        return json.loads(cell)

    def from_tags(self, cell: Any) -> tuple[str, ...]:
        return tuple(json.loads(cell))

    def vector_bytes(self, cell: Any) -> bytes:
        return bytes(cell)

    def name_like(self, column: str) -> str:
        return f"{column} LIKE ? ESCAPE '\\'"  # case-insensitive for ASCII, as SQLite's LIKE is

    def memory_count(self, counted: bool) -> str:
        return NOTES_OF_C if counted else "0"

    def message_count(self) -> str:
        return "(SELECT count(*) FROM memories m WHERE m.conversation_id = c.id AND m.kind = 'message')"

    def limit(self, count: int) -> int:
        return count  # SQLite reads a negative LIMIT as none

    async def execute_many(self, conn: aiosqlite.Connection, sql: str, rows: Sequence[Sequence[Any]]) -> int:
        if not rows:
            return 0
        cursor = await conn.executemany(sql, rows)
        return max(cursor.rowcount, 0)

    async def keep_tags(self, conn: aiosqlite.Connection, pairs: Sequence[tuple[int, str]]) -> None:
        if pairs:
            await conn.executemany("INSERT OR IGNORE INTO memory_tags (memory_seq, tag) VALUES (?, ?)", pairs)

    async def keep_conversation_tags(self, conn: aiosqlite.Connection, conversation_id: str) -> None:
        await conn.execute(
            "INSERT OR IGNORE INTO memory_tags (memory_seq, tag) SELECT m.seq, t.value FROM memories m,"
            " json_each(m.tags) t WHERE m.conversation_id = ?",
            (conversation_id,),
        )

    async def lock_fact_keys(self, conn: aiosqlite.Connection, keys: Sequence[str]) -> None:
        """Nothing: the write transaction holds the whole file."""


SQLITE = SqliteDialect()

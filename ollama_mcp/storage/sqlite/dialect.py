"""SQLite's spelling of the shared SQL (``storage/sql/dialect.py``): JSON through ``json_extract``
and ``json_each``, tags in their own rows, no row locks (a write holds the file)."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

import aiosqlite

from ollama_mcp.storage.sql.dialect import Dialect
from ollama_mcp.storage.sql.fragments import dump_json


class SqliteDialect(Dialect):
    greatest = "max"
    for_update = ""
    for_key_share = ""
    serialize_chat_calls = ""
    JSON_TEXT = "json_extract({column}, '$.{key}')"
    JSON_TRUE = "json_extract({column}, '$.{key}') = 1"
    JSON_WITH = "json_set({column}, '$.{key}', ?)"
    JSON_WITH_TRUE = "json_set({column}, '$.{key}', json('true'))"
    JSON_PAIR = (
        "EXISTS (SELECT 1 FROM json_each({column}) j WHERE j.key = ? AND CASE j.type"
        " WHEN 'true' THEN 'true' WHEN 'false' THEN 'false' ELSE CAST(j.value AS TEXT) END = ?)"
    )
    IN_LIST = "{column} IN (SELECT value FROM json_each({value}))"
    NAME_LIKE = "{column} LIKE ? ESCAPE '\\'"  # case-insensitive for ASCII, as SQLite's LIKE is
    NOTES_OF_C = (
        "(SELECT count(*) FROM memories m WHERE m.conversation_key = c.key AND m.kind = 'note'"
        " AND m.superseded_by IS NULL)"
    )
    MESSAGES_OF_C = "(SELECT count(*) FROM memories m WHERE m.conversation_key = c.key AND m.kind = 'message')"
    OF_CONVERSATION = "{alias}conversation_key = (SELECT k_.key FROM conversations k_ WHERE k_.id = {value})"
    IN_CONVERSATIONS = (
        "{alias}.conversation_key IN (SELECT k_.key FROM conversations k_"
        " WHERE k_.id IN (SELECT value FROM json_each({value})))"
    )
    SAME_CONVERSATION = "{a}.conversation_key = {b}.conversation_key"
    OF_C = "{alias}.conversation_key = c.key"
    NOTE_ONCE = "conversation_key, note_digest"
    KEY_COLUMN = ", conversation_key"
    KEY_VALUE = ", (SELECT k_.key FROM conversations k_ WHERE k_.id = ?2)"  # ?2: conversation_id again
    LAST_MEMORY_OF_C = "c.last_memory_at"
    notes_cost = True
    stores_context = False
    CONTEXT_OF = "(SELECT x.context FROM memory_contexts x WHERE x.seq = {alias}.seq)"

    def tags_all(self, tags: Sequence[str], bind: Callable[[Any], str]) -> str:
        return (
            f"m.seq IN (SELECT memory_seq FROM memory_tags WHERE {self.in_list('tag', bind(self.listed(tags)))}"
            f" GROUP BY memory_seq HAVING count(*) = {bind(len(tags))})"
        )

    def sql(self, text: str) -> str:
        return text

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

    def limit(self, count: int) -> int:
        return count  # SQLite reads a negative LIMIT as none

    async def execute_many(self, conn: aiosqlite.Connection, sql: str, rows: Sequence[Sequence[Any]]) -> int:
        if not rows:
            return 0
        cursor = await conn.executemany(sql, rows)
        return max(cursor.rowcount, 0)

    async def keep_tags(self, conn: aiosqlite.Connection, pairs: Sequence[tuple[int, str]]) -> None:
        """The memory_tags rows that tag filters read."""
        if pairs:
            await conn.executemany("INSERT OR IGNORE INTO memory_tags (memory_seq, tag) VALUES (?, ?)", pairs)

    async def keep_conversation_tags(self, conn: aiosqlite.Connection, conversation_id: str) -> None:
        await conn.execute(
            "INSERT OR IGNORE INTO memory_tags (memory_seq, tag) SELECT m.seq, t.value FROM memories m,"
            f" json_each(m.tags) t WHERE {self.of_conversation('m')}",
            (conversation_id,),
        )

    async def keep_times(self, conn: aiosqlite.Connection, named: Sequence[tuple[int, str]]) -> None:
        await conn.executemany(
            "UPDATE memories SET spoken_of = ? WHERE seq = ? AND spoken_of IS NULL", [(t, s) for s, t in named]
        )

    async def lock_fact_keys(self, conn: aiosqlite.Connection, keys: Sequence[str]) -> None:
        """Nothing: the write transaction holds the whole file."""


SQLITE = SqliteDialect()

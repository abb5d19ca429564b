"""Every text a store holds, read in order and rewritten in place (``secret_storage``): for
``ollama-mcp redact --scan --apply``, on either backend. A rewritten memory keeps its id, seq,
kind, time and place; like an edited turn (``revisions.py``), its keyword entries follow by
trigger (SQLite) or generated column (PostgreSQL), its vectors go for the backfill, and the
memories whose context held its old text get theirs rewritten."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ollama_mcp.domain import Memory
from ollama_mcp.storage.memory_rules import is_redacted, note_digest, own_context, text_digest
from ollama_mcp.storage.secret_storage import OtherText
from ollama_mcp.storage.sql.parts import SqlParts
from ollama_mcp.storage.sql.placing import claims_to_keep
from ollama_mcp.storage.sql.rows import (
    context_followers,
    execute,
    fetchone,
    memory_columns,
    memory_from_row,
    rewrite_followers,
)
from ollama_mcp.when import times_named

_OTHER = (("conversations", "name"), ("conversations", "summary"), ("conversations", "rolling_summary"),
          ("open_turns", "content"))


class SecretStore(SqlParts):
    """Texts read whole and rewritten in place."""

    async def memories_after(self, after_seq: int, limit: int) -> list[Memory]:
        d = self._dialect
        rows = await self._fetchall(
            d.sql(f"SELECT {memory_columns(d)} FROM memories m WHERE m.seq > ? ORDER BY m.seq LIMIT ?"),
            (after_seq, limit), "read the memories",
        )
        return [memory_from_row(d, row) for row in rows]

    async def rewrite_texts(self, memories: Sequence[Memory]) -> tuple[list[int], list[int]]:
        d = self._dialect
        gone: list[int] = []
        contexts: list[int] = []
        async with self._transaction("rewrite the memories' texts") as conn:
            for memory in memories:
                row = await fetchone(conn, d, f"SELECT m.content, {d.context_of('m')} FROM memories m WHERE m.seq = ?",
                                     (memory.seq,))
                if row is None or is_redacted(memory):
                    continue  # deleted since it was read, or its text is gone already
                followers = await context_followers(conn, d, memory.conversation_id, [memory.seq])
                set_context = ""
                params: tuple[str, ...] = ()
                if d.stores_context:  # its context ends with its own text, whole (``compose_context``)
                    old_text, context = str(row[0]), str(row[1] or "")
                    context = memory.content if own_context(memory) or not old_text else context.replace(
                        old_text, memory.content)
                    set_context, params = ", context = ?", (context,)
                await execute(
                    conn, d,
                    f"UPDATE memories SET content = ?{set_context}, note_digest = ?, spoken_of = ?, claims = ?,"
                    " metadata = ?, tool_calls = ? WHERE seq = ?",
                    (memory.content, *params, await _digest(conn, d, memory),
                     times_named(memory.content, memory.occurred_at), await claims_to_keep(conn, d, memory),
                     d.json(memory.metadata), d.json(list(memory.tool_calls)) if memory.tool_calls else None,
                     memory.seq),
                )
                await execute(conn, d, "DELETE FROM memory_embeddings WHERE memory_seq = ?", (memory.seq,))
                gone.append(memory.seq)
                contexts += await rewrite_followers(conn, d, followers)
        return gone, contexts

    async def other_texts(self) -> list[OtherText]:
        found: list[OtherText] = []
        for table, column in _OTHER:
            rows = await self._fetchall(
                self._dialect.sql(f"SELECT id, {column} FROM {table} WHERE {column} IS NOT NULL AND {column} <> ''"),
                (), "read the conversations' texts",
            )
            found += [(table, str(row_id), column, str(text)) for row_id, text in rows]  # type: ignore[misc]
        return found

    async def rewrite_other_texts(self, texts: Sequence[OtherText]) -> None:
        async with self._transaction("rewrite the conversations' texts") as conn:
            for table, row_id, column, text in texts:
                if (table, column) in _OTHER:  # never a name from elsewhere in SQL
                    await execute(conn, self._dialect, f"UPDATE {table} SET {column} = ? WHERE id = ?",
                                  (text, row_id))


async def _digest(conn: Any, d: Any, memory: Memory) -> bytes | None:
    """The note's digest of its new text (so a retry of it is found), unless a current note of
    its conversation has that text already: then one of its own, which no store ever matches."""
    digest = note_digest(memory)
    if digest is None:
        return None
    taken = await fetchone(
        conn, d, f"SELECT 1 FROM memories WHERE {d.of_conversation('')} AND kind = 'note' AND note_digest = ?"
        " AND superseded_by IS NULL AND seq <> ?", (memory.conversation_id, digest, memory.seq),
    )
    return digest if taken is None else text_digest(f"{memory.id}\x00{memory.content}")

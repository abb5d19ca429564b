"""Turns being streamed (the ``open_turns`` table), on either SQL backend: opened in an active
conversation, grown chunk by chunk, then committed (the transcript message takes its id, in the
transaction that removes it from here) or aborted (kept, marked). Nothing indexes or embeds an
open turn; only the committed message is searched."""

from __future__ import annotations

from typing import Any

from ollama_mcp.domain import CompactAt, Memory, OpenTurn
from ollama_mcp.errors import ConversationClosedError, not_open
from ollama_mcp.storage.sql.parts import SqlParts
from ollama_mcp.storage.sql.rows import (
    compact_if_due,
    execute,
    fetchall,
    fetchone,
    insert_memory_row,
    lock_conversation,
    memory_by_seq,
    memory_where,
)

COLUMNS = "id, conversation_id, fields, content, state, created_at, updated_at"


class OpenTurnStore(SqlParts):
    """Open turns: open, append, read, commit, abort."""

    async def open_turn(self, turn_id: str, conversation_id: str, fields: dict[str, Any], now: str) -> OpenTurn:
        d = self._dialect
        async with self._transaction("open a turn") as conn:
            if await lock_conversation(conn, d, conversation_id) != "active":
                raise ConversationClosedError(conversation_id)
            await execute(
                conn, d, "INSERT INTO open_turns (id, conversation_id, fields, created_at, updated_at)"
                " VALUES (?, ?, ?, ?, ?)", (turn_id, conversation_id, d.json(fields), now, now),
            )
        return OpenTurn(turn_id, conversation_id, fields, "", "open", now, now)

    async def append_to_turn(self, turn_id: str, chunk: str, now: str) -> OpenTurn:
        """Add ``chunk`` to an open turn's text; ``TurnNotFoundError`` for one that is not open."""
        d = self._dialect
        async with self._transaction("add to the turn") as conn:
            rows = await fetchall(
                conn, d, f"UPDATE open_turns SET content = content || ?, updated_at = ? WHERE id = ? AND state = 'open'"
                f" RETURNING {COLUMNS}", (chunk, now, turn_id),
            )
        if not rows:
            raise not_open(turn_id, await self._turn_state(turn_id))
        return self._open_turn(rows[0])

    async def get_open_turn(self, turn_id: str) -> OpenTurn:
        rows = await self._fetchall(
            self._dialect.sql(f"SELECT {COLUMNS} FROM open_turns WHERE id = ?"), (turn_id,), "read the turn"
        )
        if not rows:
            raise not_open(turn_id, await self._turn_state(turn_id))
        return self._open_turn(rows[0])

    async def open_turns(self, conversation_id: str) -> list[OpenTurn]:
        """The conversation's turns being written, oldest first."""
        rows = await self._fetchall(
            self._dialect.sql(f"SELECT {COLUMNS} FROM open_turns WHERE conversation_id = ? AND state = 'open'"
                              " ORDER BY created_at, id"), (conversation_id,), "read the open turns",
        )
        return [self._open_turn(row) for row in rows]

    async def commit_turn(
        self, turn_id: str, message: Memory, *, compact: CompactAt | None = None
    ) -> tuple[Memory, bool]:
        """Store ``message`` (its id the turn's) and remove the open turn, in one transaction (with
        ``compact``, the compaction a transcript that crossed it is due, queued in it too); the
        message, and whether a compaction was queued. A commit that already happened (a retry)
        returns the message it stored."""
        d = self._dialect
        async with self._transaction("commit the turn") as conn:
            done = await memory_where(conn, d, "m.id = ?", (turn_id,))
            if done is not None:
                return done, False
            if await lock_conversation(conn, d, message.conversation_id) != "active":
                raise ConversationClosedError(message.conversation_id)
            if not await fetchone(conn, d, "SELECT 1 FROM open_turns WHERE id = ? AND state = 'open'", (turn_id,)):
                raise not_open(turn_id, await self._turn_state(turn_id))
            seq = await insert_memory_row(conn, d, message)
            assert seq is not None, "only notes are de-duplicated by the unique index"
            await execute(conn, d, "DELETE FROM open_turns WHERE id = ?", (turn_id,))
            queued = compact is not None and await compact_if_due(
                conn, d, message.conversation_id, compact, message.created_at
            )
            return await memory_by_seq(conn, d, seq), queued

    async def abort_turn(self, turn_id: str, now: str) -> OpenTurn:
        """Mark an open turn aborted; it is kept, and never becomes a message."""
        d = self._dialect
        async with self._transaction("abort the turn") as conn:
            rows = await fetchall(
                conn, d, f"UPDATE open_turns SET state = 'aborted', updated_at = ? WHERE id = ? AND state = 'open'"
                f" RETURNING {COLUMNS}", (now, turn_id),
            )
        if not rows:
            raise not_open(turn_id, await self._turn_state(turn_id))
        return self._open_turn(rows[0])

    async def _turn_state(self, turn_id: str) -> str | None:
        """What became of a turn that is not open: "aborted", "committed", or None (never was)."""
        d = self._dialect
        rows = await self._fetchall(d.sql("SELECT state FROM open_turns WHERE id = ?"), (turn_id,), "read the turn")
        if rows:
            return str(rows[0][0])
        done = await self._fetchall(
            d.sql("SELECT 1 FROM memories WHERE id = ? AND kind = 'message'"), (turn_id,), "read the turn"
        )
        return "committed" if done else None

    def _open_turn(self, row: Any) -> OpenTurn:
        return OpenTurn(row[0], row[1], self._dialect.from_json(row[2]), row[3], row[4], row[5], row[6])

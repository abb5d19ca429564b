"""The chat-model calls background work made (the ``chat_calls`` table), on either SQL backend:
counted over the last hour and taken one at a time, so every process on one store keeps to one
budget (``services/chat_budget.py`` decides what the budget is and what waits)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from ollama_mcp.domain import format_timestamp
from ollama_mcp.storage.sql.parts import SqlParts
from ollama_mcp.storage.sql.rows import execute, fetchone

# For the read-only reports (``stats``, ``doctor``), on either backend's own connection: the calls
# made after the one ``?`` (an hour ago), with the oldest's time; and the jobs that call the chat
# model and wait (services/chat_budget.CHAT_JOBS).
CALLS_SINCE = "SELECT count(*), min(at) FROM chat_calls WHERE at > ?"
CHAT_JOBS_OPEN = (
    "SELECT count(*) FROM jobs WHERE state IN ('queued', 'running') AND kind IN ('summarize', 'compact', 'facts')"
)


def hour_ago() -> str:
    return format_timestamp(datetime.now(UTC) - timedelta(hours=1))


class ChatCallStore(SqlParts):
    """Chat-model calls: take one within a limit, give one back, count them."""

    async def take_chat_call(self, kind: str, now: str, since: str, limit: int) -> tuple[int | None, str | None]:
        """Record a call of ``kind`` at ``now`` if fewer than ``limit`` were made since ``since``:
        returns its id, else None with the time of the oldest call counted (when one frees up is
        that plus the window). One transaction, serialized across processes (``serialize_chat_calls``);
        calls older than ``since`` are deleted on the way."""
        d = self._dialect
        async with self._transaction("count the chat-model calls") as conn:
            if d.serialize_chat_calls:
                await execute(conn, d, d.serialize_chat_calls)
            await execute(conn, d, "DELETE FROM chat_calls WHERE at <= ?", (since,))
            used, oldest = await fetchone(conn, d, "SELECT count(*), min(at) FROM chat_calls", ())
            if int(used) >= limit:
                return None, oldest
            row = await fetchone(conn, d, "INSERT INTO chat_calls (at, kind) VALUES (?, ?) RETURNING id", (now, kind))
        return int(row[0]), None

    async def give_back_chat_call(self, call_id: int) -> None:
        """Forget a call that never reached the model (Ollama did not answer)."""
        async with self._transaction("give back a chat-model call") as conn:
            await execute(conn, self._dialect, "DELETE FROM chat_calls WHERE id = ?", (call_id,))

    async def chat_calls_since(self, since: str) -> tuple[int, str | None]:
        """How many calls were made after ``since``, and when the oldest of them was."""
        rows = await self._fetchall(
            self._dialect.sql(CALLS_SINCE), (since,),
            "count the chat-model calls",
        )
        return int(rows[0][0]), rows[0][1]

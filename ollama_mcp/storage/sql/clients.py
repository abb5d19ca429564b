"""The current conversations of clients any instance may serve (the current_conversations table)."""

from __future__ import annotations

from ollama_mcp.storage.sql.parts import SqlParts


class ClientStore(SqlParts):
    """The current conversation of each client that is not bound to one process (a token used
    without an MCP session), so that every instance of the HTTP server continues it."""

    async def current_conversation(self, client: str) -> str | None:
        rows = await self._fetchall(
            self._dialect.sql("SELECT conversation_id FROM current_conversations WHERE client = ?"),
            (client,),
            "read the current conversation",
        )
        return str(rows[0][0]) if rows else None

    async def set_current_conversation(self, client: str, conversation_id: str, at: str) -> None:
        async with self._transaction("keep the current conversation") as conn:
            await conn.execute(
                self._dialect.sql(
                    "INSERT INTO current_conversations (client, conversation_id, updated_at) VALUES (?, ?, ?)"
                    " ON CONFLICT (client) DO UPDATE SET conversation_id = excluded.conversation_id, updated_at ="
                    " excluded.updated_at"
                ),
                (client, conversation_id, at),
            )

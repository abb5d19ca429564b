"""Conversations shared between principals of the HTTP server (the conversation_shares table)."""

from __future__ import annotations

from ollama_mcp.domain import ConversationShare
from ollama_mcp.storage.sql.parts import SqlParts

_COLUMNS = "conversation_id, grantee, owner, access, granted_at"


class ShareStore(SqlParts):
    """Who may read or write which principal's conversation; kept in the local principal's store."""

    async def set_share(self, share: ConversationShare) -> None:
        async with self._transaction("share the conversation") as conn:
            await conn.execute(
                self._dialect.sql(
                    f"INSERT INTO conversation_shares ({_COLUMNS}) VALUES (?, ?, ?, ?, ?)"
                    " ON CONFLICT (conversation_id, grantee) DO UPDATE SET access = excluded.access,"
                    " granted_at = excluded.granted_at"
                ),
                (share.conversation_id, share.grantee, share.owner, share.access, share.granted_at),
            )

    async def remove_share(self, conversation_id: str, grantee: str) -> bool:
        async with self._transaction("stop sharing the conversation") as conn:
            cursor = await conn.execute(
                self._dialect.sql("DELETE FROM conversation_shares WHERE conversation_id = ? AND grantee = ?"),
                (conversation_id, grantee),
            )
            return bool(cursor.rowcount == 1)

    async def share_of(self, conversation_id: str, grantee: str) -> ConversationShare | None:
        rows = await self._fetchall(
            self._dialect.sql(f"SELECT {_COLUMNS} FROM conversation_shares WHERE conversation_id = ? AND grantee = ?"),
            (conversation_id, grantee),
            "read the conversation's share",
        )
        return ConversationShare(*rows[0]) if rows else None

    async def shares_with(self, grantee: str) -> list[ConversationShare]:
        rows = await self._fetchall(
            self._dialect.sql(
                f"SELECT {_COLUMNS} FROM conversation_shares WHERE grantee = ?"
                " ORDER BY granted_at DESC, conversation_id"
            ),
            (grantee,),
            "list the conversations shared with a principal",
        )
        return [ConversationShare(*row) for row in rows]

    async def shares_of(self, conversation_id: str) -> list[ConversationShare]:
        rows = await self._fetchall(
            self._dialect.sql(f"SELECT {_COLUMNS} FROM conversation_shares WHERE conversation_id = ? ORDER BY grantee"),
            (conversation_id,),
            "list whom the conversation is shared with",
        )
        return [ConversationShare(*row) for row in rows]

    async def all_shares(self) -> list[ConversationShare]:
        """Every share, by conversation and grantee (``migrate`` copies them)."""
        rows = await self._fetchall(
            self._dialect.sql(f"SELECT {_COLUMNS} FROM conversation_shares ORDER BY conversation_id, grantee"),
            (),
            "read the shares",
        )
        return [ConversationShare(*row) for row in rows]

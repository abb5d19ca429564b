"""Who may read or write whose conversation on a server with tokens: the shares, the principals
the tokens open, and the check of a presented token. All of it is kept in the server's own (the
local principal's) store; the MCP edge asks here, never the store."""

from __future__ import annotations

import difflib
from typing import TYPE_CHECKING, Protocol

from ollama_mcp.domain import AccessToken, ConversationShare
from ollama_mcp.errors import InvalidInputError
from ollama_mcp.services import tokens

if TYPE_CHECKING:
    from ollama_mcp.storage.protocols import ShareStorage, TokenStorage

    class Registry(ShareStorage, TokenStorage, Protocol):
        """What the registry reads and writes of a store."""


class ShareRegistry:
    """Shares and tokens of one server (its local principal's store)."""

    def __init__(self, store: Registry) -> None:
        self._store = store

    async def share_of(self, conversation_id: str, grantee: str) -> ConversationShare | None:
        return await self._store.share_of(conversation_id, grantee)

    async def shares_of(self, conversation_id: str) -> list[ConversationShare]:
        return await self._store.shares_of(conversation_id)

    async def shares_with(self, grantee: str) -> list[ConversationShare]:
        return await self._store.shares_with(grantee)

    async def grant(self, share: ConversationShare) -> None:
        """Keep ``share``; refused for a grantee no active token opens: a typo would look shared
        and stay readable by whoever later gets a token of that name."""
        known = sorted({t.principal for t in await self._store.list_tokens() if t.revoked_at is None} - {share.owner})
        if share.grantee not in known:
            close = difflib.get_close_matches(share.grantee, known, n=1)
            raise InvalidInputError(
                "principal",
                f"no active token of this server opens {share.grantee!r}"
                + (f" (did you mean {close[0]!r}?)" if close else ""),
                f"share with one of: {', '.join(known) or 'nobody yet'}; or first make {share.grantee} a token "
                f"(ollama-mcp token create NAME --principal {share.grantee})",
            )
        await self._store.set_share(share)

    async def withdraw(self, conversation_id: str, grantee: str) -> None:
        """Stop sharing with ``grantee`` (nothing to stop is no error)."""
        await self._store.remove_share(conversation_id, grantee)

    async def forget(self, conversation_id: str) -> None:
        """A conversation its owner deleted is shared with nobody any more."""
        for share in await self._store.shares_of(conversation_id):
            await self._store.remove_share(conversation_id, share.grantee)

    async def token(self, secret: str) -> AccessToken | None:
        """The active token ``secret`` is; None if it is not one (malformed, unknown or revoked)."""
        return await tokens.verify(self._store, secret)

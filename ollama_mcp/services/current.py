"""Each client's current conversation: the one a call that names none writes to and reads.

A stdio server has one client; an HTTP server one per MCP session (or token). A client bound to
this process (stdio's, an MCP session's) is remembered here, the least recently used forgotten
first; one that any instance may serve (``caller.served_anywhere``) is remembered in the store.
"""

from __future__ import annotations

from collections import OrderedDict

from ollama_mcp import caller
from ollama_mcp.domain import utc_now
from ollama_mcp.storage.protocols import ClientStorage

MAX_CLIENTS = 10_000  # current conversations remembered (each a few hundred bytes)


class CurrentConversations:
    """Which conversation is current for the calling client (``caller.client()``)."""

    def __init__(self, store: ClientStorage) -> None:
        self._store = store
        self._current: OrderedDict[str, str] = OrderedDict()

    async def id(self) -> str | None:
        """The calling client's current conversation, if it has one."""
        key = caller.client()
        if caller.served_anywhere():
            return await self._store.current_conversation(key)
        found = self._current.get(key)
        if found is not None:
            self._current.move_to_end(key)
        return found

    async def make(self, conversation_id: str) -> None:
        """Make ``conversation_id`` the calling client's current conversation."""
        key = caller.client()
        if caller.served_anywhere():
            await self._store.set_current_conversation(key, conversation_id, utc_now())
            return
        self._current[key] = conversation_id
        self._current.move_to_end(key)
        while len(self._current) > MAX_CLIENTS:
            self._current.popitem(last=False)

    def forget(self, conversation_id: str) -> None:
        """An ended or deleted conversation stops being current for every client of this process
        (the store forgets it for the others as it ends or deletes it)."""
        for key in [key for key, current in self._current.items() if current == conversation_id]:
            del self._current[key]

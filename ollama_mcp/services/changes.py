"""What changed in a store, for those who watch it: the marks live updates compare (a
conversation's, the conversation list's) and the write audit (every write through any door,
without its text)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ollama_mcp.domain import WriteRecord
from ollama_mcp.storage.protocols import Storage


class Changes:
    def __init__(self, store: Storage) -> None:
        self._store = store

    async def write_records(self, since: str | None, limit: int) -> list[WriteRecord]:
        """The write audit, newest first."""
        return await self._store.write_records(since, limit)

    async def change_marks(self, conversation_ids: Sequence[str]) -> dict[str, tuple[Any, ...]]:
        """What changes when one of these conversations changes (live updates compare them)."""
        return await self._store.change_marks(conversation_ids)

    async def conversations_mark(self) -> tuple[Any, ...]:
        """What changes when the conversation list changes."""
        return await self._store.conversations_mark()

"""Retention: deleting what has expired, through the one delete path of each thing — whole
conversations past their TTL (or, with a retention period, idle for longer), and memories past
their conversation's ``memory_ttl_hours``. Runs as a background step and from ``prune``."""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta

from ollama_mcp import audit
from ollama_mcp.background import Step
from ollama_mcp.domain import Conversation, format_timestamp
from ollama_mcp.errors import ConversationNotFoundError
from ollama_mcp.inputs.conversations import ConversationSettings
from ollama_mcp.services.conversations import Conversations
from ollama_mcp.services.memories import Memories
from ollama_mcp.storage.protocols import Storage

log = logging.getLogger(__name__)


class Retention:
    def __init__(
        self, store: Storage, conversations: Conversations, memories: Memories, *, retention_days: float | None = None,
    ) -> None:
        self._store = store
        self._conversations = conversations
        self._memories = memories
        self._retention_days = retention_days

    async def expired(self) -> list[Conversation]:
        """The conversations the next sweep deletes."""
        found = []
        for conversation_id in await self._expired_ids():
            try:
                found.append(await self._store.get_conversation(conversation_id))
            except ConversationNotFoundError:
                continue
        return found

    async def _expired_ids(self) -> list[str]:
        now = datetime.now(UTC)
        cutoff = None
        if self._retention_days:
            cutoff = format_timestamp(now - timedelta(days=self._retention_days))
        return await self._store.expired_conversations(format_timestamp(now), cutoff)

    async def sweep(self) -> list[str]:
        """Delete every conversation past its TTL or (with a retention period) idle for longer,
        then, in conversations that set ``memory_ttl_hours``, every memory stored longer ago."""
        deleted = []
        for conversation_id in await self._expired_ids():
            try:
                with audit.through("retention"):
                    await self._conversations.delete(conversation_id)
            except ConversationNotFoundError:
                continue  # another process swept it first
            deleted.append(conversation_id)
        if deleted:
            log.info("retention: deleted %d expired conversations", len(deleted))
        forgotten = 0
        now = datetime.now(UTC)
        for conversation_id, metadata in await self._store.conversations_with_setting("memory_ttl_hours"):
            hours = ConversationSettings.of(metadata).memory_ttl_hours
            if hours is not None:
                with audit.through("retention"):
                    forgotten += await self._memories.forget_older(
                        format_timestamp(now - timedelta(hours=hours)), conversation_id
                    )
        if forgotten:
            log.info("retention: deleted %d memories past their conversation's memory_ttl_hours", forgotten)
        return deleted

    def step(self, interval: float) -> Step:
        """A step for ``background.supervise``: sweep, then wait ``interval`` seconds."""

        async def step() -> float:
            await self.sweep()
            return interval

        return step

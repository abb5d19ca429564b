"""Conversations: starting one (made current, or minted by a REST client), finding the one a call
writes to, listing, ending and deleting them, and what the edges read of them.

Ending queues the summary and fact extraction in the same transaction (the store's
``end_conversation``); deleting removes every memory, vector, keyword entry, job and audit row of
the conversation at once: the one delete path of every caller (the tool, the agent, ``forget``,
retention).
"""

from __future__ import annotations

import uuid
from contextlib import suppress
from datetime import UTC, datetime, timedelta

from ollama_mcp import audit, redaction
from ollama_mcp.domain import (
    Conversation,
    ConversationQuery,
    DeletedConversation,
    EndedConversation,
    Memory,
    format_timestamp,
    utc_now,
)
from ollama_mcp.errors import ConversationClosedError, ConversationNotFoundError, InvalidInputError, StorageError
from ollama_mcp.inputs.conversations import NewConversation, facts_wanted
from ollama_mcp.services.current import CurrentConversations
from ollama_mcp.services.indexer import Indexer
from ollama_mcp.services.jobs import JobRunner
from ollama_mcp.services.redacting import Redacting
from ollama_mcp.storage.protocols import Storage


class Conversations:
    """The conversations of one store and which one a call means."""

    def __init__(
        self, store: Storage, indexer: Indexer, jobs: JobRunner, current: CurrentConversations, redacting: Redacting,
        *, summaries: bool = False, facts: bool = False,
    ) -> None:
        self._store = store
        self._redacting = redacting  # a name's secrets are replaced as a memory's are
        self._indexer = indexer
        self._jobs = jobs
        self._current = current
        self._summaries = summaries  # a chat model is configured to write missing summaries
        self._facts_default = facts  # conversations that do not say (metadata.facts) have facts extracted

    async def start(self, new: NewConversation) -> Conversation:
        """A new conversation, made current (init_conversation)."""
        conversation, _ = await self.create(new)
        await self._current.make(conversation.id)
        return conversation

    async def create(self, new: NewConversation) -> tuple[Conversation, bool]:
        """A new conversation, not made current (a REST client names its conversation on every
        call), and True. With an id the client minted that a conversation of this store has
        already: that one unchanged, and False (creating it again is a retry)."""
        if new.id is not None:
            with suppress(ConversationNotFoundError):
                return await self._store.get_conversation(new.id, count_memories=True), False
        meta = new.metadata
        if (new.settings.retention or "full") != "full" and not self._summaries:
            raise InvalidInputError(
                "metadata.retention", f"is {meta['retention']!r}, but no chat model is configured "
                "(OLLAMA_MCP_CHAT_MODEL=none): no summary would ever cover a turn, so every turn would be kept",
                "set OLLAMA_MCP_CHAT_MODEL to a chat model such as qwen2.5:3b, or use ttl_hours to delete the "
                "conversation after a time",
            )
        if meta.get("facts") is True and not self._summaries:
            raise InvalidInputError(
                "metadata.facts",
                "is true, but no chat model is configured (OLLAMA_MCP_CHAT_MODEL=none) to extract them",
                "set OLLAMA_MCP_CHAT_MODEL to a chat model such as qwen2.5:3b, or leave facts out",
            )
        now = datetime.now(UTC)
        expires_at = None if new.ttl_hours is None else format_timestamp(now + timedelta(hours=new.ttl_hours))
        new_id = new.id or str(uuid.uuid4())
        name = new.name
        found: redaction.Found = ()
        if name and self._redacting.applies_to(new.settings):
            named = redaction.redact(name)
            name, found = named.text, named.found
        given = [name, *new.given[1:]] if found and new.given else list(new.given)
        try:
            with audit.recording("init_conversation", new_id, arguments=given, redacted=found):
                conversation = await self._store.create_conversation(
                    new_id, name, meta, anonymous=False, created_at=format_timestamp(now), expires_at=expires_at,
                    follows=new.follows,
                )
        except ConversationNotFoundError as exc:
            if exc.conversation_id != new.follows:
                raise
            raise InvalidInputError(
                "follows", f"names no conversation ({new.follows})",
                "pass the id of the conversation this one continues (list_conversations shows them), or leave it out",
            ) from None
        except StorageError:
            if new.id is None:
                raise
            # Two creates of one minted id at once: the other made it.
            return await self._store.get_conversation(new.id, count_memories=True), False
        return conversation, True

    async def resolve(self, conversation_id: str | None, *, create: bool = False) -> Conversation | None:
        """The given conversation (which must be active), else the current one, else (with
        ``create``) a new anonymous one that becomes current, else None."""
        if conversation_id is None and not create and await self._current.id() is None:
            return None
        return await self.for_writing(conversation_id)

    async def for_writing(self, conversation_id: str | None) -> Conversation:
        """The conversation a write goes to: the given one, else the current one, else a new
        anonymous one made current; it must be active."""
        current = None if conversation_id is not None else await self._current.id()
        if conversation_id is not None:
            conversation = await self._store.get_conversation(conversation_id)
        elif current is not None:
            conversation = await self._store.get_conversation(current)
        else:
            new_id = str(uuid.uuid4())
            with audit.recording("start_conversation", new_id):
                conversation = await self._store.create_conversation(
                    new_id, None, {}, anonymous=True, created_at=utc_now()
                )
            await self._current.make(conversation.id)
        if conversation.status != "active":
            raise ConversationClosedError(conversation.id)
        return conversation

    async def current(self) -> Conversation | None:
        """The calling client's current conversation, if any (and if it still exists)."""
        current = await self._current.id()
        if current is None:
            return None
        return await self._store.get_conversation(current, count_memories=True)

    async def listed(self, query: ConversationQuery) -> list[Conversation]:
        """Conversations with their counts and last activity, as ``query`` filters and orders them."""
        return await self._store.list_conversations(query)

    async def get(self, conversation_id: str) -> Conversation:
        """One conversation by id (``ConversationNotFoundError`` when there is none)."""
        return await self._store.get_conversation(conversation_id)

    async def ids(self, *, idle_before: str | None = None) -> list[str]:
        """Every conversation's id; with ``idle_before``, only those idle since before it."""
        if idle_before is None:
            return await self._store.conversation_ids()
        return await self._store.expired_conversations("", idle_before)  # idle only: no TTL is "now" at ""

    async def snapshot(self, conversation_id: str) -> tuple[Conversation, list[Memory], int]:
        """A conversation with every memory (all versions, messages and summaries) and their count."""
        return await self._store.conversation_snapshot(conversation_id)

    async def memory_total(self, conversation_id: str) -> int:
        """What deleting the conversation removes: every memory, versions and messages too."""
        return await self._store.memory_total(conversation_id)

    async def end(self, conversation_id: str | None = None, summary: str | None = None) -> EndedConversation:
        """End the given (or current) conversation, with the caller's summary or one the chat model
        writes in the background (queued with the end, as its fact extraction)."""
        target = conversation_id or await self._current.id()
        if target is None:
            raise InvalidInputError(
                "conversation_id", "is missing and no conversation is current", "pass the id of the conversation to end"
            )
        ended_at = utc_now()
        summary_memory = None
        if summary is not None:
            summary_memory = Memory(
                id=str(uuid.uuid4()), seq=0, conversation_id=target, kind="summary", content=summary,
                tags=("summary",), metadata={}, created_at=ended_at,
            )
        facts = self._summaries and facts_wanted(
            (await self._store.get_conversation(target)).metadata, self._facts_default
        )
        with audit.recording("end_conversation", target, arguments=summary):
            conversation, count = await self._store.end_conversation(
                target, ended_at, summary_memory, queue_summary=self._summaries, queue_facts=facts
            )
        self._current.forget(target)
        if summary_memory is not None:
            self._indexer.added()  # the summary is embedded in the background like any pending memory
        # The chat model writes a summary in the background (the call returns now), or the given
        # one is compared with the other conversations' (the relate job the store queued).
        self._jobs.wakeup.set()
        return EndedConversation(conversation, count)

    async def delete(self, conversation_id: str) -> DeletedConversation:
        """Delete a conversation with every memory version, message, summary, vector, keyword
        entry, job and audit row, in one transaction."""
        conversation = await self._store.get_conversation(conversation_id)
        with audit.recording("delete_conversation", conversation_id):
            seqs = await self._store.delete_conversation(conversation_id)
        await self._indexer.removed(seqs)
        self._current.forget(conversation_id)
        return DeletedConversation(conversation, len(seqs))

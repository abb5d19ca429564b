"""A conversation's transcript: recording turns (a client's, a hook's, the agent's, a REST chat
app's), revising one, reading it back page by page, and who took part.

Messages are memories of kind ``message``: they share the store's one search, index, vector and
delete path with notes. A write that makes the transcript due for compaction queues it in its own
transaction (``Summarizing.compact_at``); the chat model's work never makes a call wait.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from ollama_mcp import audit
from ollama_mcp.domain import Memory, Participant, Role, format_timestamp, utc_now
from ollama_mcp.errors import InvalidInputError
from ollama_mcp.inputs.context import HistoryRequest
from ollama_mcp.inputs.turns import Turn, parse_turn
from ollama_mcp.redaction import Found
from ollama_mcp.services.conversations import Conversations
from ollama_mcp.services.current import CurrentConversations
from ollama_mcp.services.indexer import Indexer
from ollama_mcp.services.jobs import JobRunner
from ollama_mcp.services.redacting import Redacting
from ollama_mcp.services.summarizing import Summarizing
from ollama_mcp.services.superseding import Superseding
from ollama_mcp.services.turns import RETRY_WINDOW, message_of
from ollama_mcp.storage.protocols import Storage


class Transcript:
    """The turns of the conversations of one store."""

    def __init__(
        self, store: Storage, conversations: Conversations, current: CurrentConversations, indexer: Indexer,
        jobs: JobRunner, summarizing: Summarizing, superseding: Superseding, redacting: Redacting, *,
        max_content_chars: int,
    ) -> None:
        self._store = store
        self._redacting = redacting
        self._superseding = superseding
        self._conversations = conversations
        self._current = current
        self._indexer = indexer
        self._jobs = jobs
        self._summarizing = summarizing
        self._max_content_chars = max_content_chars

    async def add_message(
        self, conversation_id: str, role: Role, content: str, *, actor: str | None = None,
        tool_calls: Sequence[dict[str, Any]] = (), tool_call_id: str | None = None,
    ) -> Memory:
        """Append one message of our own (the agent's question, its tool turns, its answer) to an
        active conversation's transcript; it is embedded in the background. Its text is held to
        the same limits as a caller's turn."""
        turn = parse_turn("", {"role": role, "content": content, "actor": actor}, self._max_content_chars)
        conversation = await self._store.get_conversation(conversation_id)
        # The agent's own tool calls, as its chat model made them: not a caller's input to check.
        [message], redacted = await self._redacting.memories(conversation, [replace(
            message_of(conversation.id, turn, utc_now()), tool_calls=tuple(tool_calls), tool_call_id=tool_call_id
        )])
        said = [turn.role, message.content, turn.actor]
        with audit.recording("add_message", conversation.id, message.id, arguments=said, redacted=redacted):
            [stored], _, compacting = await self._store.insert_messages(
                [message], None, compact=self._summarizing.compact_at(conversation)
            )
        self._indexer.added(seqs=[stored.seq])
        self._woke(compacting)
        return stored

    async def add_messages(
        self, conversation_id: str | None, turns: Sequence[Turn], *, embed: bool = True
    ) -> tuple[list[Memory], bool]:
        """Record a client's turns, in order and in one transaction, in the given conversation
        (default: the current one, else a new one made current); returns (the messages, was_retry).
        The same turns sent again within RETRY_WINDOW are a retry and are not added twice.
        ``embed``: wait for their own vectors, as a store does (``Indexer.embed_turns``); else
        the background embeds them (a hook, which must return at once)."""
        conversation = await self._conversations.for_writing(conversation_id)
        now = utc_now()  # one created_at for the batch: how a retry is told from the end of a longer one
        # Secrets go before anything is written, embedded or digested (a retry is told by the text as stored).
        batch, redacted = await self._redacting.memories(
            conversation, [message_of(conversation.id, t, now) for t in turns])
        retry_since = format_timestamp(datetime.now(UTC) - RETRY_WINDOW)
        arguments = [[t.role, m.content, t.actor, *([list(t.to)] if t.to else [])]
                     for t, m in zip(turns, batch, strict=True)]
        with audit.recording("add_messages", conversation.id, batch[0].id, arguments=arguments, redacted=redacted):
            stored, retry, compacting = await self._store.insert_messages(
                batch, retry_since, compact=self._summarizing.compact_at(conversation)
            )
        if not retry:
            await self._superseding.written([turn.seq for turn in stored])
            if embed:
                await self._indexer.embed_turns(stored)
            self._indexer.added(seqs=[turn.seq for turn in stored])
            self._woke(compacting)
        return stored, retry

    async def add_turn(self, conversation_id: str, turn: Turn) -> tuple[Memory, bool]:
        """One turn into a given conversation (the REST API's); returns (the message, was_retry)."""
        stored, retry = await self.add_messages(conversation_id, [turn])
        return stored[0], retry

    async def revise_turn(
        self, turn_id: str, content: str, *, regenerated: bool = False, model: str | None = None
    ) -> Memory:
        """A turn said again: edited (``content`` replaces what was said) or, for an assistant
        turn, regenerated (a new answer, by ``model``). The turn keeps its id and place; what it
        said before is kept in its metadata's ``earlier_versions`` (the export's chain); searches
        and history show the latest."""
        produced = {} if model is None else {"model": model}
        if regenerated:
            turn = await self._store.get_memory(turn_id)
            if turn.kind != "message" or turn.role != "assistant":
                raise InvalidInputError("turn_id", "names a turn that is not the assistant's",
                                        "regenerate an assistant turn; edit any turn with PUT")
        redacted: Found = ()
        if self._redacting.enabled:
            turn = await self._store.get_memory(turn_id)
            [content], redacted = await self._redacting.texts(
                await self._store.get_conversation(turn.conversation_id), [content]
            )
        with audit.recording("regenerate_turn" if regenerated else "edit_turn", None, turn_id, redacted=redacted):
            revised, gone, contexts = await self._store.revise_turn(
                turn_id, content, "regenerated" if regenerated else "edited", utc_now(), produced
            )
        await self._indexer.removed(gone, contexts=contexts)
        self._indexer.added()  # its new text is embedded in the background like any pending memory
        return revised

    async def history(self, request: HistoryRequest) -> list[Memory]:
        """The latest ``limit`` messages (before the message ``before``, to page back), oldest
        first, of the given conversation (default: the current one)."""
        return (await self.history_page(request))[1]

    async def history_page(self, request: HistoryRequest) -> tuple[str, list[Memory], bool]:
        """``history`` with the conversation's id and whether earlier messages exist."""
        target = request.conversation_id or await self._current.id()
        if target is None:
            raise InvalidInputError(
                "conversation_id", "is missing and no conversation is current", "pass the conversation to read"
            )
        await self._store.get_conversation(target)
        before_seq = None
        if request.before is not None:
            anchor = await self._store.get_memory(request.before)
            if anchor.conversation_id != target or anchor.kind != "message":
                raise InvalidInputError(
                    "before", "is not a message of this conversation", "pass a message id it returned"
                )
            before_seq = anchor.seq
        found = await self._store.messages(target, request.limit + 1, before_seq)
        return target, found[-request.limit:], len(found) > request.limit

    async def participants(self, conversation_id: str) -> list[Participant]:
        """Who wrote the conversation's turns (actors, or roles for turns without one), in the
        order they first spoke."""
        await self._store.get_conversation(conversation_id)
        return await self._store.participants(conversation_id)

    def _woke(self, compacting: bool) -> None:
        if compacting:
            self._jobs.wakeup.set()

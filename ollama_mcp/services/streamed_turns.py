"""Turns streamed as they are written (the REST API's): opened, appended to chunk by chunk (live
to the conversation's subscribers), then committed as a transcript message of the same id, or
aborted. A commit that makes the transcript due for compaction queues it in its transaction."""

from __future__ import annotations

import uuid
from dataclasses import replace
from typing import Any

from ollama_mcp import audit
from ollama_mcp.domain import Memory, OpenTurn, utc_now
from ollama_mcp.errors import InvalidInputError, TurnClosedError
from ollama_mcp.inputs.turns import parse_turn
from ollama_mcp.services.indexer import Indexer
from ollama_mcp.services.jobs import JobRunner
from ollama_mcp.services.redacting import Redacting
from ollama_mcp.services.summarizing import Summarizing
from ollama_mcp.services.superseding import Superseding
from ollama_mcp.services.turns import message_of
from ollama_mcp.storage.protocols import Storage


class StreamedTurns:
    """The turns being written in the conversations of one store."""

    def __init__(
        self, store: Storage, indexer: Indexer, jobs: JobRunner, summarizing: Summarizing, superseding: Superseding,
        redacting: Redacting, *, max_content_chars: int,
    ) -> None:
        self._store = store
        self._redacting = redacting
        self._superseding = superseding
        self._indexer = indexer
        self._jobs = jobs
        self._summarizing = summarizing
        self._max_content_chars = max_content_chars

    async def open(self, conversation_id: str, fields: dict[str, Any]) -> OpenTurn:
        """Start a turn whose text will come in chunks; ``fields`` checked (``inputs.turns.turn_to_open``)."""
        with audit.recording("open_turn", conversation_id):
            return await self._store.open_turn(str(uuid.uuid4()), conversation_id, fields, utc_now())

    async def append(self, turn_id: str, chunk: str) -> OpenTurn:
        """Add ``chunk`` to a turn being written: live to the conversation's subscribers."""
        if not chunk:
            raise InvalidInputError("append", "must be a non-empty text", "send the next part of the reply")
        current = await self._store.get_open_turn(turn_id)
        if len(current.content) + len(chunk) > self._max_content_chars:
            raise InvalidInputError(
                "append", f"would make the turn longer than {self._max_content_chars:,} characters",
                "commit it and continue in a new turn",
            )
        return await self._store.append_to_turn(turn_id, chunk.replace("\x00", " "), utc_now())

    async def commit(self, turn_id: str, extra: dict[str, Any]) -> Memory:
        """The turn's text as a transcript message with the turn's id (``extra``: tokens, model
        given at the end), in one transaction with removing the open turn; a commit sent twice
        returns the message."""
        try:
            opened = await self._store.get_open_turn(turn_id)
        except TurnClosedError as closed:
            if closed.state != "committed":
                raise
            return await self._store.get_memory(turn_id)  # committed before: this is a retry
        if opened.state != "open":
            raise TurnClosedError(turn_id, opened.state)
        # The whole turn is known only now: checked as any turn, its text included.
        turn = parse_turn("", {**opened.fields, **extra, "content": opened.content}, self._max_content_chars)
        conversation = await self._store.get_conversation(opened.conversation_id)
        # The whole text only now: a secret sent in two chunks is one here.
        [message], redacted = await self._redacting.memories(
            conversation, [replace(message_of(opened.conversation_id, turn, utc_now()), id=turn_id)]
        )
        with audit.recording("commit_turn", opened.conversation_id, turn_id, redacted=redacted):
            stored, compacting = await self._store.commit_turn(
                turn_id, message, compact=self._summarizing.compact_at(conversation)
            )
        await self._superseding.written([stored.seq])
        self._indexer.added(seqs=[stored.seq])
        if compacting:
            self._jobs.wakeup.set()
        return stored

    async def read(self, turn_id: str) -> OpenTurn | Memory:
        """A turn by its id, whatever became of it: being written or aborted (the open turn, its
        text so far), or committed (the message)."""
        try:
            return await self._store.get_open_turn(turn_id)
        except TurnClosedError as closed:
            if closed.state != "committed":
                raise
            return await self._store.get_memory(turn_id)

    async def abort(self, turn_id: str) -> OpenTurn:
        """Stop a turn being written: it is kept, marked aborted, and never becomes a message; its
        text is kept as a commit would have kept it (its secrets replaced)."""
        opened = await self._store.get_open_turn(turn_id)
        with audit.recording("abort_turn", opened.conversation_id, turn_id):
            aborted = await self._store.abort_turn(turn_id, utc_now())
        # Its text is whole only now that no chunk can come.
        conversation = await self._store.get_conversation(opened.conversation_id)
        kept = await self._redacting.text(conversation, aborted.content)
        if not kept.found:
            return aborted
        with audit.recording("redact", opened.conversation_id, turn_id, redacted=kept.found):
            await self._store.rewrite_other_texts([("open_turns", turn_id, "content", kept.text)])
        return replace(aborted, content=kept.text)

    async def open_turns(self, conversation_id: str) -> list[OpenTurn]:
        return await self._store.open_turns(conversation_id)

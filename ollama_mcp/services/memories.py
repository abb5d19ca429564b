"""Notes: storing one (the one place that decides "store first, then tell the indexer"), many at
once, correcting, reading page by page, deleting, and forgetting the older ones.

A memory is committed whatever Ollama answers (``Indexer.embedding`` asks for its vector while
it is written; the store waits for the answer after the commit), so nothing is lost when Ollama
is down, slow or missing the model.
"""

from __future__ import annotations

import uuid
from contextlib import nullcontext, suppress

from ollama_mcp import audit
from ollama_mcp.domain import EmbeddingRow, Memory, MemoryPage, StoredMemory, utc_now
from ollama_mcp.errors import InvalidInputError, MemoryNotFoundError
from ollama_mcp.inputs.memories import Note, NoteChange, NotesToImport
from ollama_mcp.ollama.embeddings import given_vector, to_blob
from ollama_mcp.redaction import Redacted
from ollama_mcp.services.conversations import Conversations
from ollama_mcp.services.indexer import Indexer
from ollama_mcp.services.passages import page_of
from ollama_mcp.services.redacting import Redacting
from ollama_mcp.services.superseding import Superseding
from ollama_mcp.storage.protocols import Storage


class Memories:
    """The notes of one store (turns are the transcript's), and any memory by id."""

    def __init__(
        self, store: Storage, indexer: Indexer, conversations: Conversations, superseding: Superseding,
        redacting: Redacting,
    ) -> None:
        self._store = store
        self._redacting = redacting
        self._superseding = superseding
        self._indexer = indexer
        self._conversations = conversations

    async def store(self, note: Note, *, actor: str | None = None) -> StoredMemory:
        """Store a note; ``actor`` (set by our own code, never from a tool's input) says who wrote it."""
        vector = given_vector("embedding", note.embedding)
        # Its secrets go before Ollama, the index or the audit's digest see the text (a conversation
        # that keeps its text verbatim is known only below: its text is embedded again then).
        content = await self._redacting.text(None, note.content)
        # Ollama embeds the text while it is written (see Indexer.embedding).
        async with self._indexer.embedding(content.text) if vector is None else nullcontext() as ahead:
            conversation = await self._conversations.for_writing(note.conversation_id)
            if not self._redacting.applies(conversation):
                content = Redacted(note.content)
            given = [content.text, *note.given[1:]] if content.found and note.given else list(note.given)
            memory = Memory(
                id=str(uuid.uuid4()), seq=0, conversation_id=conversation.id, kind="note", content=content.text,
                tags=note.tags, metadata=note.metadata, created_at=utc_now(), actor=actor,
                occurred_at=note.occurred_at,
            )
            rows: list[EmbeddingRow] = []
            if vector is not None:
                model, expected = self._indexer.model, await self._indexer.expected_dimension(conversation.id)
                if expected is not None and len(vector) != expected:
                    raise InvalidInputError(
                        "embedding", f"has {len(vector)} dimensions but this store's {model!r} vectors have {expected}",
                        f"pass a {expected}-dimensional vector from {model!r}, or omit it",
                    )
                rows = [EmbeddingRow(0, "content", 0, model, to_blob(vector), len(vector))]
            with audit.recording("store_memory", conversation.id, memory.id, arguments=given,
                                 redacted=content.found):
                stored, duplicate = await self._store.insert_memory(memory, rows)
            if not duplicate:
                await self._superseding.written([stored.seq])
            if rows and not duplicate:
                self._indexer.added(vectors=True)  # its context vector comes from Ollama, in the background
                return StoredMemory(stored, False, "embedded", rows[0].dim)
            if duplicate and not await self._indexer.is_pending(stored):
                return StoredMemory(stored, True, "embedded", await self._indexer.expected_dimension())
            return await self._indexer.embed(stored, duplicate, ahead)

    async def import_notes(self, notes: NotesToImport) -> int:
        """Store many notes into one conversation at once (imports, benchmarks): returns how many
        were new. Vectors given are the content vectors; whatever is missing is embedded in the
        background. Imports may go into ended conversations (restoring is not chatting)."""
        now = utc_now()
        memories: list[Memory] = []
        rows: list[EmbeddingRow | None] = []
        model, expected = self._indexer.model, await self._indexer.expected_dimension()
        conversation = await self._store.get_conversation(notes.conversation_id)
        contents, redacted = await self._redacting.texts(conversation, notes.contents)
        for i, text in enumerate(contents):
            memories.append(Memory(id=str(uuid.uuid4()), seq=0, conversation_id=notes.conversation_id, kind="note",
                                   content=text, tags=(), metadata={}, created_at=now))
            vector = None if notes.embeddings is None else given_vector(f"embeddings[{i}]", notes.embeddings[i])
            if vector is not None:
                expected = expected or len(vector)
                if len(vector) != expected:
                    raise InvalidInputError(f"embeddings[{i}]", f"has {len(vector)} dimensions, not {expected}",
                                            "pass vectors of one model")
                rows.append(EmbeddingRow(0, "content", 0, model, to_blob(vector), len(vector)))
            else:
                rows.append(None)
        with audit.recording("import_memories", notes.conversation_id, arguments=contents, redacted=redacted):
            added = await self._store.insert_memories(memories, rows)
        self._indexer.added(vectors=True)
        return added

    async def update(self, change: NoteChange) -> tuple[Memory, StoredMemory]:
        """Store a new version of a memory (unchanged fields carried over); the old one stays as
        history, marked superseded. Returns (old version, new version)."""
        now = utc_now()
        content, given = change.content, list(change.given)
        found: tuple[tuple[str, int], ...] = ()
        if content is not None and self._redacting.enabled:
            current = await self._store.get_memory(change.memory_id)
            redacted = await self._redacting.text(await self._store.get_conversation(current.conversation_id), content)
            content, found = redacted.text, redacted.found
            given[1:2] = [content] if found and given else given[1:2]

        def revise(old: Memory) -> Memory:
            return Memory(
                id=str(uuid.uuid4()), seq=0, conversation_id=old.conversation_id, kind=old.kind,
                content=old.content if content is None else content,
                tags=old.tags if change.tags is None else change.tags,
                metadata=old.metadata if change.metadata is None else change.metadata, created_at=now,
                # A correction does not move when the memory happened, nor change who wrote it.
                actor=old.actor, occurred_at=old.occurred_at,
            )

        with audit.recording("update_memory", None, change.memory_id, arguments=given,
                             redacted=found):
            old, new = await self._store.update_memory(change.memory_id, revise)
        await self._superseding.written([new.seq])
        # The old version keeps its vectors: searches mask it out unless include_superseded.
        return old, await self._indexer.embed(new)

    async def read(
        self, memory_id: str, conversation_id: str | None = None, page: int = 1, *, page_chars: int
    ) -> MemoryPage:
        """Page ``page`` of a memory's whole text, in pages of ``page_chars`` characters: what a
        search shows by its passages, read in full. With ``conversation_id``, the memory must be
        in that conversation (how a conversation shared with the caller is named)."""
        memory = await self._store.get_memory(memory_id)
        if conversation_id is not None and memory.conversation_id != conversation_id:
            raise MemoryNotFoundError(memory_id)
        text, pages = page_of(memory.content, page, page_chars)
        if page > pages:
            raise InvalidInputError("page", f"is {page}, but the memory has {pages} page(s)", f"pass 1 to {pages}")
        return MemoryPage(memory, page, pages, text)

    async def get(self, memory_id: str) -> Memory:
        """One memory by id, any version (``MemoryNotFoundError`` when there is none)."""
        return await self._store.get_memory(memory_id)

    async def delete(self, memory_id: str) -> Memory:
        """Delete a memory with its versions, vectors and keyword entries; the memories after it
        lose its text from their context."""
        with audit.recording("delete_memory", None, memory_id):
            deleted, seqs, context_changed = await self._store.delete_memory(memory_id)
        # The backfill embeds the neighbours' new contexts.
        await self._indexer.removed(seqs, contexts=context_changed)
        return deleted

    async def forget_older(self, cutoff: str, conversation_id: str | None = None, *, dry_run: bool = False) -> int:
        """Delete the memories stored before ``cutoff`` (in one conversation, or every one), each
        through ``delete``, the one delete path (its versions, vectors, keyword entries, the
        context of its neighbours); returns how many were (or, ``dry_run``, would be) deleted. A
        memory another process deleted meanwhile is not counted."""
        ids = await self._store.memories_stored_before(cutoff, conversation_id)
        if dry_run:
            return len(ids)
        deleted = 0
        for memory_id in ids:
            with suppress(MemoryNotFoundError):
                await self.delete(memory_id)
                deleted += 1
        return deleted

    async def forget_vectors(self) -> None:
        """Drop every vector of the configured model: everything becomes pending (reembed --force)."""
        await self._store.delete_vectors(self._indexer.model)
        self._indexer.invalidate()

    async def timeline(self) -> list[tuple[str, str, int]]:
        """Notes and turns per day (a turn's own) and conversation, for the browser view's timeline."""
        return await self._store.memory_timeline()

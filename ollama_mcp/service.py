"""The use-cases behind the tools, one method per tool, and the one place that decides
"store first, then embed, then index".

A memory is committed before Ollama is asked for its vector, so nothing is lost when Ollama is
down, slow or missing the model: the memory is stored as *pending*, keyword search finds it
at once, and ``run_backfill`` embeds it as soon as Ollama answers (also after a restart, since
"pending" is simply "has no vector for the configured model").
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import anyio
import numpy as np

from ollama_mcp import inputs
from ollama_mcp.domain import (
    Conversation,
    ConversationStatus,
    EmbeddingRow,
    EndedConversation,
    Facet,
    Memory,
    SearchFilters,
    SearchOutcome,
    StoredMemory,
    format_timestamp,
    utc_now,
)
from ollama_mcp.embeddings import Embedder, to_blob
from ollama_mcp.errors import (
    ConversationClosedError,
    EmbeddingMismatchError,
    InvalidInputError,
    OllamaError,
    OllamaMcpError,
)
from ollama_mcp.jobs import JobRunner
from ollama_mcp.keywords import KeywordIndex
from ollama_mcp.search import HybridSearch, SearchTuning
from ollama_mcp.store import Store
from ollama_mcp.vectors import VectorIndex

log = logging.getLogger(__name__)

BACKFILL_BATCH = 32
BACKFILL_POLL_SECONDS = 60.0  # also notices memories another process left pending


@dataclass
class _EmbeddingHealth:
    """The last embedding failure; while set, stores do not wait on Ollama and searches use keywords."""

    failure: OllamaMcpError | None = None

    @property
    def ok(self) -> bool:
        return self.failure is None


class MemoryService:
    """Conversations and memories for one process (which also owns the 'current conversation')."""

    def __init__(
        self,
        store: Store,
        embedder: Embedder,
        *,
        max_content_chars: int,
        backfill_max_delay: float = 60.0,
        jobs: JobRunner,
        tuning: SearchTuning | None = None,
        summaries: bool = False,
    ) -> None:
        self.store = store
        self.jobs = jobs
        self._summaries = summaries  # a chat model is configured to write missing summaries
        self.embedder = embedder
        self.index = VectorIndex(store, embedder.model)
        self._search = HybridSearch(store, self.index, tuning)
        self._max_content_chars = max_content_chars
        self._backfill_max_delay = backfill_max_delay
        self._current_id: str | None = None
        self._health = _EmbeddingHealth()
        self._wake = anyio.Event()
        self._model_dim: int | None = None
        self._backfill_cursor = 0  # the last seq the backfill embedded in its current pass
        self._merged_at = 0  # the memory count when this process last merged the keyword index

    @property
    def model(self) -> str:
        return self.embedder.model

    @property
    def keywords(self) -> KeywordIndex:
        """The in-memory keyword index searches rank with (beside ``index``, the vectors)."""
        return self._search.keywords

    @property
    def current_conversation_id(self) -> str | None:
        return self._current_id

    @property
    def max_content_chars(self) -> int:
        return self._max_content_chars

    def wake_backfill(self) -> None:
        """Start embedding pending memories now (after storing some without waiting for vectors)."""
        self._wake.set()

    # -- conversations --------------------------------------------------------------------------

    async def init_conversation(self, name: object = None, metadata: object = None) -> Conversation:
        meta = inputs.metadata("metadata", metadata)
        now = datetime.now(UTC)
        ttl = inputs.ttl_hours("metadata.ttl_hours", meta.get("ttl_hours"))
        expires_at = None if ttl is None else format_timestamp(now + timedelta(hours=ttl))
        conversation = await self.store.create_conversation(
            str(uuid.uuid4()), inputs.optional_name("name", name), meta,
            anonymous=False, created_at=format_timestamp(now), expires_at=expires_at,
        )
        self._current_id = conversation.id
        return conversation

    async def resolve_conversation(self, conversation_id: object, *, create: bool = False) -> Conversation | None:
        """The given conversation (which must be active), else the current one, else (with
        ``create``) a new anonymous one that becomes current, else None."""
        given = inputs.conversation_id("conversation_id", conversation_id)
        if given is None and self._current_id is None and not create:
            return None
        return await self._conversation_for_store(given)

    async def get_conversation_id(self) -> Conversation | None:
        """The current conversation of this process, if any (and if it still exists)."""
        if self._current_id is None:
            return None
        return await self.store.get_conversation(self._current_id, count_memories=True)

    async def list_conversations(self, status: object = None, limit: object = 20) -> list[Conversation]:
        if status not in (None, "active", "completed"):
            raise InvalidInputError("status", "must be 'active' or 'completed'", "pass one of them, or omit it for all")
        state: ConversationStatus | None = status  # type: ignore[assignment]
        return await self.store.list_conversations(state, inputs.integer("limit", limit, 1, inputs.MAX_LIST_LIMIT))

    async def end_conversation(self, conversation_id: object = None, summary: object = None) -> EndedConversation:
        target = inputs.conversation_id("conversation_id", conversation_id) or self._current_id
        if target is None:
            raise InvalidInputError(
                "conversation_id", "is missing and no conversation is current", "pass the id of the conversation to end"
            )
        text = None if summary is None else inputs.text("summary", summary, self._max_content_chars, what="summary")
        ended_at = utc_now()
        summary_memory = None
        if text is not None:
            summary_memory = Memory(
                id=str(uuid.uuid4()), seq=0, conversation_id=target, kind="summary", content=text,
                tags=("summary",), metadata={}, created_at=ended_at,
            )
        conversation, count = await self.store.end_conversation(
            target, ended_at, summary_memory, queue_summary=self._summaries
        )
        if self._current_id == target:
            self._current_id = None
        if summary_memory is not None:
            self.wake_backfill()  # the summary is embedded in the background like any pending memory
        if conversation.summary_status == "pending":
            self.jobs.wake()  # the chat model writes it in the background; the call returns now
        return EndedConversation(conversation, count)

    # -- memories -------------------------------------------------------------------------------

    async def store_memory(
        self,
        content: object,
        conversation_id: object = None,
        tags: object = None,
        metadata: object = None,
        embedding: object = None,
    ) -> StoredMemory:
        text = inputs.text("content", content, self._max_content_chars, what="memory text")
        given_id = inputs.conversation_id("conversation_id", conversation_id)
        tag_list = inputs.tags("tags", tags)
        meta = inputs.metadata("metadata", metadata)
        vector = inputs.embedding("embedding", embedding)

        conversation = await self._conversation_for_store(given_id)
        memory = Memory(
            id=str(uuid.uuid4()), seq=0, conversation_id=conversation.id, kind="note", content=text,
            tags=tag_list, metadata=meta, created_at=utc_now(),
        )
        rows: list[EmbeddingRow] = []
        if vector is not None:
            expected = (
                await self.store.model_dimension(self.model, conversation.id)
                or await self._known_dimension()
                or self.embedder.known_dimension
            )
            if expected is not None and len(vector) != expected:
                raise InvalidInputError(
                    "embedding", f"has {len(vector)} dimensions but this store's {self.model!r} vectors have {expected}",
                    f"pass a {expected}-dimensional vector from {self.model!r}, or omit it",
                )
            rows = [EmbeddingRow(0, "content", 0, self.model, to_blob(vector), len(vector))]
        stored, duplicate = await self.store.insert_memory(memory, rows)
        if rows and not duplicate:
            self.index.mark_dirty()
            self.wake_backfill()  # its context vector comes from Ollama, in the background
            return StoredMemory(stored, False, "embedded", len(vector))
        if duplicate and not await self.store.memory_is_pending(stored.seq, self.model):
            return StoredMemory(stored, True, "embedded", await self._known_dimension())
        return await self._embed_now(stored, duplicate)

    async def import_memories(
        self, conversation_id: object, contents: Sequence[object], embeddings: Sequence[object] | None = None
    ) -> int:
        """Store many memories into one conversation at once (imports, benchmarks): returns how many
        were new. Vectors given are the content vectors; whatever is missing is embedded in the
        background. Imports may go into ended conversations (restoring is not chatting)."""
        target = inputs.conversation_id("conversation_id", conversation_id)
        if target is None:
            raise InvalidInputError("conversation_id", "is required", "pass the conversation to import into")
        if embeddings is not None and len(embeddings) != len(contents):
            raise InvalidInputError("embeddings", "must have one entry per content", "pass as many vectors as texts")
        now = utc_now()
        memories, rows = [], []
        expected = await self._known_dimension() or self.embedder.known_dimension
        for i, content in enumerate(contents):
            text = inputs.text(f"contents[{i}]", content, self._max_content_chars, what="memory text")
            memories.append(Memory(id=str(uuid.uuid4()), seq=0, conversation_id=target, kind="note", content=text,
                                   tags=(), metadata={}, created_at=now))
            vector = None if embeddings is None else inputs.embedding(f"embeddings[{i}]", embeddings[i])
            if vector is not None:
                expected = expected or len(vector)
                if len(vector) != expected:
                    raise InvalidInputError(f"embeddings[{i}]", f"has {len(vector)} dimensions, not {expected}",
                                            "pass vectors of one model")
                rows.append(EmbeddingRow(0, "content", 0, self.model, to_blob(vector), len(vector)))
            else:
                rows.append(None)
        added = await self.store.insert_memories(memories, rows)
        self.index.mark_dirty()
        self.wake_backfill()
        return added

    async def update_memory(
        self, memory_id: object, content: object = None, tags: object = None, metadata: object = None
    ) -> tuple[Memory, StoredMemory]:
        """Store a new version of a memory (unchanged fields carried over); the old one stays as
        history, marked superseded. Returns (old version, new version)."""
        target = inputs.memory_id("memory_id", memory_id)
        text = None if content is None else inputs.text("content", content, self._max_content_chars, what="memory text")
        tag_list = None if tags is None else inputs.tags("tags", tags)
        meta = None if metadata is None else inputs.metadata("metadata", metadata)
        if text is None and tag_list is None and meta is None:
            raise InvalidInputError("content", "tags and metadata are all missing", "pass at least one of them to change")
        now = utc_now()

        def revise(old: Memory) -> Memory:
            return Memory(
                id=str(uuid.uuid4()), seq=0, conversation_id=old.conversation_id, kind=old.kind,
                content=old.content if text is None else text,
                tags=old.tags if tag_list is None else tag_list,
                metadata=old.metadata if meta is None else meta, created_at=now,
            )

        old, new = await self.store.update_memory(target, revise)
        # The old version keeps its vectors: searches mask it out unless include_superseded.
        return old, await self._embed_now(new, duplicate=False)

    async def delete_memory(self, memory_id: object) -> Memory:
        deleted, seqs, context_changed = await self.store.delete_memory(inputs.memory_id("memory_id", memory_id))
        await self.index.remove(seqs)
        if context_changed:
            # Their context no longer includes the deleted text; the backfill embeds the new one.
            await self.index.remove(context_changed, facet="context")
            self.wake_backfill()
        return deleted

    async def search_memories(
        self,
        query: object,
        conversation_id: object = None,
        top_k: object = 5,
        threshold: object = None,
        tags: object = None,
        since: object = None,
        until: object = None,
        include_messages: object = False,
        include_superseded: object = False,
    ) -> SearchOutcome:
        """Search one conversation: the given one, else the current one, else every conversation."""
        target = inputs.conversation_id("conversation_id", conversation_id) or self._current_id
        return await self._run_search(
            query, target, top_k, threshold, tags, since, until, include_messages, include_superseded
        )

    async def search_all_conversations(
        self, query: object, top_k: object = 5, threshold: object = None, tags: object = None,
        since: object = None, until: object = None, include_messages: object = False,
        include_superseded: object = False,
    ) -> SearchOutcome:
        return await self._run_search(
            query, None, top_k, threshold, tags, since, until, include_messages, include_superseded
        )

    async def pending_count(self) -> int:
        """Memories still lacking a vector of this service's model."""
        return await self.store.pending_count(self.model)

    async def forget_vectors(self) -> None:
        """Drop every vector of this service's model: everything becomes pending (reembed --force)."""
        await self.store.delete_vectors(self.model)
        self.index.invalidate()
        self._backfill_cursor = 0

    # -- background -----------------------------------------------------------------------------

    async def run_backfill(self) -> None:
        """Embed pending memories forever, backing off while Ollama fails; cancel to stop."""
        delay = 1.0
        while True:
            try:
                progressed = await self.backfill_once()
            except (OllamaError, EmbeddingMismatchError) as exc:
                self._fail(exc)
                await self._sleep_or_wake(delay)
                delay = min(delay * 2, self._backfill_max_delay)
                continue
            except OllamaMcpError as exc:  # e.g. the database stayed busy: try again later
                log.warning("background embedding paused: %s", exc)
                await self._sleep_or_wake(delay)
                delay = min(delay * 2, self._backfill_max_delay)
                continue
            except Exception:  # a bug: logged, and never allowed to take the tools down with it
                log.exception("background embedding failed")
                await self._sleep_or_wake(self._backfill_max_delay)
                continue
            delay = 1.0
            if not progressed:
                await self._sleep_or_wake(BACKFILL_POLL_SECONDS)

    async def warm_up(self) -> None:
        """Load the keyword and vector indexes before the first search needs them (about 2 s
        and 5 s of work at 100k memories), so that the first search answers at full speed."""
        try:
            await self.keywords.refresh()
            await self.index.refresh()
        except OllamaMcpError as exc:  # the first search will try again, and report it
            log.warning("could not load the search indexes ahead of the first search: %s", exc)
        except Exception:  # a bug: logged, and never allowed to take the tools down with it
            log.exception("loading the search indexes failed")

    async def run_upkeep(self, interval: float, min_new: int) -> None:
        """Every ``interval`` seconds, merge the keyword index if ``min_new`` memories arrived
        since the last merge; cancel to stop."""
        while True:
            await anyio.sleep(interval)
            try:
                await self.merge_keyword_index(min_new)
            except OllamaMcpError as exc:  # e.g. another process held the write lock throughout
                log.warning("keyword index upkeep postponed: %s", exc)
            except Exception:  # a bug: logged, and never allowed to take the tools down with it
                log.exception("keyword index upkeep failed")

    async def merge_keyword_index(self, min_new: int = 0) -> bool:
        """Merge the keyword index into one segment if ``min_new`` memories (stored by any
        process) arrived since this process last did; returns whether it merged."""
        count = await self.store.approximate_memory_count()
        if count == self._merged_at or count - self._merged_at < min_new:
            return False
        await self.store.merge_keyword_indexes()
        self._merged_at = count
        log.debug("merged the keyword index at %d memories", count)
        return True

    async def backfill_once(self) -> int:
        """Embed one batch of pending memories; returns how many were embedded.

        With nothing pending but a recorded failure, it probes Ollama so that search can
        leave keyword mode as soon as Ollama answers again.
        """
        pending = await self.store.pending_memories(self.model, BACKFILL_BATCH, self._backfill_cursor)
        if not pending and self._backfill_cursor:
            # The pass reached the end; start over once, for anything that became pending behind
            # the cursor (a context rewritten by a delete, a batch another process left).
            self._backfill_cursor = 0
            pending = await self.store.pending_memories(self.model, BACKFILL_BATCH)
        if not pending:
            if not self._health.ok:
                await self.embedder.info()
                await self.embedder.embed_query("ollama-mcp health check")
                self._recover()
            return 0
        embedded = await self._embed_and_store(pending)
        self._backfill_cursor = pending[-1][0].seq
        self._recover()
        log.debug("embedded %d pending memories with %s", embedded, self.model)
        return embedded

    # -- internals ------------------------------------------------------------------------------

    async def _conversation_for_store(self, given_id: str | None) -> Conversation:
        if given_id is not None:
            conversation = await self.store.get_conversation(given_id)
        elif self._current_id is not None:
            conversation = await self.store.get_conversation(self._current_id)
        else:
            conversation = await self.store.create_conversation(
                str(uuid.uuid4()), None, {}, anonymous=True, created_at=utc_now()
            )
            self._current_id = conversation.id
        if conversation.status != "active":
            raise ConversationClosedError(conversation.id)
        return conversation

    async def _embed_now(self, memory: Memory, duplicate: bool) -> StoredMemory:
        """Embed a just-stored memory inline, or leave it pending and say why."""
        if self._health.ok:
            try:
                await self._embed_and_store([(memory, ("content", "context"))])
                return StoredMemory(memory, duplicate, "embedded", self._model_dim)
            except (OllamaError, EmbeddingMismatchError) as exc:
                self._fail(exc)
        self.wake_backfill()
        return StoredMemory(
            memory, duplicate, "pending", None,
            f"Stored, but not embedded yet: {self._health.failure} It will be embedded automatically "
            "when Ollama answers; keyword search finds it meanwhile.",
        )

    async def _embed_and_store(self, work: Sequence[tuple[Memory, tuple[Facet, ...]]]) -> int:
        """Embed the given facets of each memory and store the vectors; returns how many memories."""
        jobs = [(memory, facet) for memory, facets in work for facet in facets]
        texts = [(memory.content if facet == "content" else memory.context, facet) for memory, facet in jobs]
        rows: list[EmbeddingRow] = []
        for (memory, facet), vectors in zip(jobs, await self.embedder.embed_documents(texts), strict=True):
            for chunk in vectors:
                await self._check_dimension(chunk.vector.size)
                rows.append(EmbeddingRow(
                    memory.seq, facet, chunk.chunk_index, self.model, to_blob(chunk.vector), chunk.vector.size
                ))
        written = await self.store.insert_embeddings(rows)
        self.index.mark_dirty()
        return len({row.memory_seq for row in rows}) if written else 0

    async def _check_dimension(self, dim: int) -> None:
        stored = self._model_dim or await self.store.model_dimension(self.model)
        if stored is not None and stored != dim:
            raise EmbeddingMismatchError(
                f"Embedding model {self.model!r} now returns {dim}-dimensional vectors, but the stored vectors "
                f"of that model have {stored}; the model changed under the same name. New memories stay "
                "pending (keyword search still finds them) until the original model is pulled again or "
                "OLLAMA_MCP_EMBED_MODEL names a new model, whose vectors are then computed for every memory."
            )
        self._model_dim = dim

    async def _known_dimension(self) -> int | None:
        if self._model_dim is None:
            self._model_dim = await self.store.model_dimension(self.model)
        return self._model_dim

    async def _run_search(
        self, query: object, conversation_id: str | None, top_k: object, threshold: object,
        tags: object, since: object, until: object, include_messages: object, include_superseded: object,
    ) -> SearchOutcome:
        started = time.perf_counter()
        text = inputs.text("query", query, inputs.MAX_QUERY_CHARS, what="search text")
        k = inputs.integer("top_k", top_k, 1, inputs.MAX_TOP_K)
        floor = inputs.threshold("threshold", threshold)
        messages = inputs.flag("include_messages", include_messages)
        filters = SearchFilters(
            conversation_id=conversation_id, tags=inputs.tags("tags", tags),
            since=inputs.timestamp("since", since), until=inputs.timestamp("until", until),
            kinds=("note", "summary", "message") if messages else ("note", "summary"),
            include_superseded=inputs.flag("include_superseded", include_superseded),
        )
        if filters.since and filters.until and filters.since > filters.until:
            raise InvalidInputError("since", "is later than until", "swap them or widen the range")
        key = None
        if conversation_id is not None:
            key = (await self.store.get_conversation(conversation_id)).key
        vector, notice = await self._query_vector(text, floor)
        if vector is not None:
            try:
                hits = await self._search.search(text, vector, filters, key, k, floor)
            except EmbeddingMismatchError as exc:
                self._fail(exc)
                vector, notice = None, self._keyword_notice(floor)
        if vector is None:
            hits = await self._search.search(text, None, filters, key, k, floor)
        elapsed = (time.perf_counter() - started) * 1000
        return SearchOutcome(hits, "hybrid" if vector is not None else "keyword", round(elapsed, 2), notice)

    async def _query_vector(self, text: str, threshold: float | None) -> tuple[np.ndarray | None, str | None]:
        if self._health.ok:
            try:
                return await self.embedder.embed_query(text), None
            except OllamaError as exc:
                self._fail(exc)
        return None, self._keyword_notice(threshold)

    def _keyword_notice(self, threshold: float | None) -> str:
        note = f"Semantic search is unavailable, so these are keyword matches only: {self._health.failure}"
        if threshold is not None:
            note += " The similarity threshold was not applied."
        return note

    def _fail(self, exc: OllamaMcpError) -> None:
        if self._health.failure is None or type(self._health.failure) is not type(exc):
            log.warning("embeddings unavailable: %s", exc)
        self._health.failure = exc
        self.wake_backfill()

    def _recover(self) -> None:
        if self._health.failure is not None:
            log.info("embeddings available again with %s", self.model)
        self._health.failure = None

    async def _sleep_or_wake(self, seconds: float) -> None:
        with anyio.move_on_after(seconds):
            await self._wake.wait()
        self._wake = anyio.Event()


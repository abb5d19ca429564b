"""Index upkeep: the one owner of the search indexes (vectors and keywords), of the embedding
health, and of the work that keeps the indexes current (loading them at start-up, embedding
pending memories, merging the keyword index, reading the times named by memories stored before
those were kept with each row).

Whatever changes memories tells the indexer through one door, and nothing else touches the
indexes:

- ``added()``: memories were stored (``vectors=True``: with some of their vectors); whatever
  lacks a vector is embedded in the background, and new vectors are fetched before the next
  search.
- ``embed(memory)``: embed a just-stored memory's own text now if Ollama answers, else leave
  it pending and say why; its in-context vector follows in the background. ``embedding(text)``
  starts that call while the caller is still writing the memory.
- ``removed(seqs, contexts=...)``: memories were deleted (or only their contexts rewritten).
- ``invalidate()``: vectors vanished without saying which (``reembed --force``).

A memory is committed whatever Ollama does (a store asks for its vector while writing it, and
waits for the answer only after the commit), so nothing is lost when Ollama is down, slow or
missing the model: the memory is *pending* ("has no vector of the configured
model"), keyword search finds it at once, and the backfill embeds it as soon as Ollama answers,
also after a restart.
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator, Iterable, Sequence
from contextlib import asynccontextmanager
from typing import Protocol

import anyio

from ollama_mcp.background import Step, Wakeup
from ollama_mcp.domain import EmbeddingRow, Facet, Memory, StoredMemory
from ollama_mcp.errors import EmbeddingMismatchError, OllamaError, OllamaMcpError
from ollama_mcp.ollama.embeddings import ChunkVector, Embedder, to_blob
from ollama_mcp.services.context import calls_line
from ollama_mcp.storage.protocols import MemoryStorage, VectorStorage
from ollama_mcp.storage.ranker import Ranker

log = logging.getLogger(__name__)

BACKFILL_BATCH = 32
# The idle backfill looks again this often; and a pass over the whole store, for what became
# pending behind its cursor (a context another process rewrote by a delete, a batch another
# process left), starts over from the first memory at most this often.
BACKFILL_POLL_SECONDS = 60.0
# One look for pending memories reads at most this many memories (a range of seqs): a pass over
# a large store is many short statements, never one that holds the database while a search or a
# store waits (100k memories in one statement: ~100 ms; in 4,096: ~4 ms).
SCAN_SEQS = 4096
# The backfill gives way to calls someone waits for: it sends a batch once none ran for
# QUIET_SECONDS, or after PATIENCE_SECONDS of steady calls a small batch (BUSY_BATCH memories),
# so that a search never waits behind more than one short request (bench/README.md).
QUIET_SECONDS = 0.3
PATIENCE_SECONDS = 2.0
BUSY_BATCH = 4
CATCH_UP_IDLE_SECONDS = 3600.0  # the catch-up runs when woken (``Indexer.written``)
# The times named by memories stored before they were kept (``MemoryStorage.name_times``) are read this
# many at a time, on the event loop (chat text: 50-160 µs each, so at most ~16 ms a batch), with a
# pause between batches for the calls someone waits for: 100k memories take about a minute.
TIMES_BATCH = 100
TIMES_PAUSE_SECONDS = 0.05


class IndexedStorage(MemoryStorage, VectorStorage, Protocol):
    """What index upkeep asks of storage: memories and their vector rows."""


class Ahead:
    """A memory's embedding on its way (``Indexer.embedding``): its content and context vectors."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.done = anyio.Event()
        self.vectors: list[list[ChunkVector]] = []
        self.error: Exception | None = None

    def text_of(self, memory: Memory) -> bool:
        """Whether these are the vectors of ``memory``'s text."""
        return memory.content == self.text

    async def result(self) -> list[list[ChunkVector]]:
        await self.done.wait()
        if self.error is not None:
            raise self.error
        return self.vectors


def embedded_text(memory: Memory, facet: Facet) -> str:
    """What is embedded for ``facet`` of ``memory``: its text, or its context; for a turn that
    only called tools (no text of its own), the calls it made, so that it has words to embed (an
    empty input is no text a model embeds alike everywhere)."""
    text = memory.content if facet == "content" else memory.context
    if text.strip() or not memory.tool_calls:
        return text
    return calls_line(memory.tool_calls)


def own_facets(memory: Memory) -> tuple[Facet, ...]:
    """The vectors a fresh memory's own text gives: its content vector, and its in-context one
    too when its context is its text alone (the first memory of a conversation); the in-context
    vector of any other is three memories' text, left to the background."""
    return ("content", "context") if memory.context == memory.content else ("content",)


class Indexer:
    """The vector and keyword indexes of one process, the embedding health, and their upkeep."""

    def __init__(self, store: IndexedStorage, embedder: Embedder, ranker: Ranker) -> None:
        self._store = store
        self.embedder = embedder
        self.ranker = ranker
        self.wakeup = Wakeup()  # wakes the backfill
        self.written = Wakeup()  # wakes the catch-up: this process wrote memories or vectors
        self._failure: OllamaMcpError | None = None  # the last embedding failure; None: healthy
        self._model_dim: int | None = None
        self._backfill_cursor = 0  # the memories up to this seq were looked at in the current pass
        self._pass_started = time.monotonic()  # when the current pass started from the first memory

    @property
    def model(self) -> str:
        return self.embedder.model

    # -- the door -------------------------------------------------------------------------------

    def added(self, *, vectors: bool = False, seqs: Sequence[int] = ()) -> None:
        """Memories were stored; with ``vectors``, some of their vectors too. ``seqs``, where the
        caller has them: the memories left waiting for vectors (``_look_back``)."""
        if vectors:
            self.ranker.vectors_added()
        self._look_back(seqs)
        self.wakeup.set()
        self.written.set()

    @asynccontextmanager
    async def embedding(self, text: str) -> AsyncIterator[Ahead | None]:
        """Starts embedding a memory's ``text`` while the caller writes it, for ``embed`` to use:
        a store then waits for the longer of the two, not for their sum. Yields None while Ollama
        is known to fail (stores do not wait on it). Cancelled if unused when the block ends (the
        write failed, or the memory was a duplicate already embedded)."""
        if self._failure is not None:
            yield None
            return
        ahead = Ahead(text)

        async def run() -> None:
            try:  # both facets: for the first memory of a conversation, its text is its context too
                ahead.vectors = await self.embedder.embed_documents([(text, "content"), (text, "context")], waited=True)
            except Exception as exc:  # handed to ``embed``, which raises it or records it
                ahead.error = exc
            finally:
                ahead.done.set()

        failure: Exception | None = None
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(run)
            try:
                yield ahead
            except Exception as exc:  # raised below as itself, not in an exception group
                failure = exc
            finally:
                tasks.cancel_scope.cancel()
        if failure is not None:
            raise failure

    async def embed(self, memory: Memory, duplicate: bool = False, ahead: Ahead | None = None) -> StoredMemory:
        """Embed a just-stored memory's own text now (or use ``ahead``, its embedding already on
        its way), or leave it pending and say why: while Ollama is known to fail, stores do not
        wait on it.

        Its in-context vector (three memories' text, so a longer call) is computed in the
        background; until then searches rank the memory by its own vector. The first memory of a
        conversation is its own context: that one text gives both vectors in the same call.
        """
        if self._failure is None or ahead is not None:
            try:
                facets = own_facets(memory)
                if ahead is not None and ahead.text_of(memory):
                    await self._store_vectors(
                        [(memory, facet) for facet in facets], (await ahead.result())[: len(facets)]
                    )
                else:
                    await self._embed_and_store([(memory, facets)], waited=True)
                if "context" not in facets:
                    self._look_back([memory.seq])
                return StoredMemory(memory, duplicate, "embedded", self._model_dim)
            except (OllamaError, EmbeddingMismatchError) as exc:
                self.fail(exc)
        self._look_back([memory.seq])
        return StoredMemory(
            memory, duplicate, "pending", None,
            f"Stored, but not embedded yet: {self._failure} It will be embedded automatically "
            "when Ollama answers; keyword search finds it meanwhile.",
        )

    async def embed_turns(self, turns: Sequence[Memory]) -> None:
        """Embed just-recorded turns' own texts now, in one request (the first turn of a
        conversation, its own context, gives both vectors): asked about at once, they rank by
        meaning from the start, their in-context vectors standing in by those own vectors until
        the background computes them. While Ollama is known to fail nothing waits: they stay
        pending, keyword search finds them, and the backfill embeds them when Ollama answers."""
        if self._failure is not None or not turns:
            return
        work = [(turn, own_facets(turn)) for turn in turns]
        try:
            await self._embed_and_store(work, waited=True)
        except (OllamaError, EmbeddingMismatchError) as exc:
            self.fail(exc)

    async def embed_now(self, memory: Memory) -> None:
        """Embed a stored memory's own text now, for work that needs its vector and cannot wait
        for the backfill (the relate job); Ollama's errors are the caller's to handle."""
        await self._embed_and_store([(memory, own_facets(memory))])

    async def removed(self, seqs: Iterable[int], *, contexts: Sequence[int] = ()) -> None:
        """Memories ``seqs`` were deleted; ``contexts``: memories whose context was rewritten
        (the deleted text was in it), embedded again in the background."""
        await self.ranker.removed(seqs, contexts)
        self._look_back(contexts)

    def _look_back(self, seqs: Sequence[int]) -> None:
        """Memories ``seqs`` wait for vectors: the backfill's next look starts before them and
        wakes now. They may lie behind its cursor: an edited memory keeps its seq, and on
        PostgreSQL a store can commit after one that took a later seq."""
        if seqs:
            self._backfill_cursor = min(self._backfill_cursor, min(seqs) - 1)
            self.wakeup.set()

    def invalidate(self) -> None:
        """This model's vectors were dropped: rebuild the vector index and embed everything."""
        self.ranker.invalidate()
        self._backfill_cursor, self._pass_started = 0, time.monotonic()
        self.wakeup.set()

    # -- what callers ask of the indexes --------------------------------------------------------

    async def is_pending(self, memory: Memory) -> bool:
        return await self._store.memory_is_pending(memory.seq, self.model)

    async def expected_dimension(self, conversation_id: str | None = None) -> int | None:
        """The dimension a given vector must have: what this store's vectors of the model have
        (in ``conversation_id`` first), else what the model reported, else None (unknown)."""
        found = await self._store.model_dimension(self.model, conversation_id) if conversation_id else None
        return found or await self._known_dimension() or self.embedder.known_dimension

    async def pending_count(self) -> int:
        """Memories still lacking a vector of this model."""
        return await self._store.pending_count(self.model)

    # -- background work (steps for background.supervise) ---------------------------------------

    async def warm_up(self) -> None:
        """Ready the ranker before the first search needs it (SQLite: load the vectors, and in a
        large store the keyword index, about 5 s and 2 s of work at 100k memories)."""
        await self.ranker.warm_up()

    async def warm_model(self) -> None:
        """Have Ollama load the embedding model at start, so that the first search does not wait
        for the load; a failure is recorded (searches then say so at once) and left to the backfill."""
        try:
            await self.embedder.warm()
        except (OllamaError, EmbeddingMismatchError) as exc:
            self.fail(exc)

    async def times_step(self) -> float | None:
        """One round of reading the times named by memories stored before those were kept with
        the row (a search parses their text meanwhile); None when none are left, for good: every
        memory stored since keeps them."""
        read = await self._store.name_times(TIMES_BATCH)
        if read:
            log.debug("kept the times named by %d earlier memories", read)
        return TIMES_PAUSE_SECONDS if read == TIMES_BATCH else None

    async def backfill_step(self) -> float:
        """One round of the backfill: 0 (go on) after embedding some, else the idle poll."""
        return 0.0 if await self.backfill_once(courteous=True) else BACKFILL_POLL_SECONDS

    async def backfill_once(self, *, courteous: bool = False) -> int:
        """Embed one batch of pending memories; returns how many were embedded.

        ``courteous`` (the background loop): give way to calls someone waits for first.
        With nothing pending but a recorded failure, it probes Ollama so that search can leave
        keyword mode as soon as Ollama answers again.
        """
        try:
            pending = await self._next_pending()
            if not pending:
                if self._failure is not None:
                    await self.embedder.info()
                    await self.embedder.embed_query("ollama-mcp health check")
                    self._recover()
                return 0
            if courteous and not await self.embedder.wait_for_quiet(QUIET_SECONDS, PATIENCE_SECONDS):
                pending = pending[:BUSY_BATCH]
            embedded = await self._embed_and_store(pending)
        except (OllamaError, EmbeddingMismatchError) as exc:
            self.fail(exc, wake=False)  # the backfill itself backs off: no wake-up of its own
            raise
        self._backfill_cursor = pending[-1][0].seq
        self._recover()
        log.debug("embedded %d pending memories with %s", embedded, self.model)
        return embedded

    async def _next_pending(self) -> list[tuple[Memory, tuple[Facet, ...]]]:
        """The next pending memories after the cursor, looked for ``SCAN_SEQS`` memories a
        statement. Past the newest memory the pass starts over from the first, if the current one
        started ``BACKFILL_POLL_SECONDS`` ago: new memories come after the cursor, and only what
        another process did can leave one pending behind it."""
        # The newest seq is read before the look, never after: a memory committed between the
        # two would lie at or below a newest read afterwards and the cursor would pass it unseen
        # (a store right after start waited out the whole pass so; a test timed out on it).
        newest = await self._store.newest_seq()
        while True:
            start = self._backfill_cursor
            pending = await self._store.pending_memories(self.model, BACKFILL_BATCH, start, start + SCAN_SEQS)
            if pending:
                return pending
            if start + SCAN_SEQS < newest:
                self._backfill_cursor = start + SCAN_SEQS
            elif time.monotonic() - self._pass_started >= BACKFILL_POLL_SECONDS:
                self._backfill_cursor, self._pass_started = 0, time.monotonic()
            else:
                self._backfill_cursor = max(start, newest)
                return []

    async def catch_up_step(self) -> float:
        """A step for ``background.supervise``, woken by ``written``: the ranker takes in what this
        process wrote, right after it was written rather than on the next search's path."""
        await self.ranker.catch_up()
        return CATCH_UP_IDLE_SECONDS

    def upkeep_step(self, interval: float, min_new: int) -> Step:
        """A step for ``background.supervise``: the ranker's upkeep, then wait ``interval``."""

        async def step() -> float:
            if await self.ranker.upkeep(min_new):
                log.debug("index upkeep ran")
            return interval

        return step

    # -- internals ------------------------------------------------------------------------------

    async def _embed_and_store(
        self, work: Sequence[tuple[Memory, tuple[Facet, ...]]], *, waited: bool = False
    ) -> int:
        """Embed the given facets of each memory and store the vectors; returns how many memories.
        ``waited``: a caller waits for it (the background gives way to such calls)."""
        jobs = [(memory, facet) for memory, facets in work for facet in facets]
        texts = [(embedded_text(memory, facet), facet) for memory, facet in jobs]
        return await self._store_vectors(jobs, await self.embedder.embed_documents(texts, waited=waited))

    async def _store_vectors(
        self, jobs: Sequence[tuple[Memory, Facet]], embedded: Sequence[list[ChunkVector]]
    ) -> int:
        """Store each job's vectors (of its chunks); returns how many memories."""
        rows: list[EmbeddingRow] = []
        for (memory, facet), vectors in zip(jobs, embedded, strict=True):
            for chunk in vectors:
                await self._check_dimension(chunk.vector.size)
                rows.append(EmbeddingRow(
                    memory.seq, facet, chunk.chunk_index, self.model, to_blob(chunk.vector), chunk.vector.size
                ))
        written = await self._store.insert_embeddings(rows)
        self.ranker.vectors_added()
        self.written.set()
        return len({row.memory_seq for row in rows}) if written else 0

    async def _check_dimension(self, dim: int) -> None:
        stored = self._model_dim or await self._store.model_dimension(self.model)
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
            self._model_dim = await self._store.model_dimension(self.model)
        return self._model_dim

    def _keyword_notice(self, threshold: float | None, failure: OllamaMcpError | None = None) -> str:
        """Why a search is by keywords only: ``failure`` (what this search met), else the last
        recorded failure (a probe may have cleared that one meanwhile)."""
        note = f"Semantic search is unavailable, so these are keyword matches only: {failure or self._failure}"
        if threshold is not None:
            note += " The similarity threshold was not applied."
        return note

    @property
    def failure(self) -> OllamaMcpError | None:
        """The last embedding failure (None: healthy): why a search is by keywords only."""
        return self._failure

    def fail(self, exc: OllamaMcpError, *, wake: bool = True) -> None:
        """Record an embedding failure; ``wake``: let the backfill probe for recovery now."""
        if self._failure is None or type(self._failure) is not type(exc):
            log.warning("embeddings unavailable: %s", exc)
        self._failure = exc
        if wake:
            self.wakeup.set()

    def _recover(self) -> None:
        if self._failure is not None:
            log.info("embeddings available again with %s", self.model)
        self._failure = None

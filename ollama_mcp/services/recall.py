"""Recall: every search of the store, as the tools, the REST API, the browser view, build_context
and the agent ask it (one ``SearchRequest``).

Which conversations a request covers (the current one, every one, a project's, those related to
one, those shared with a caller) is decided here; ranking is the ``Ranker``'s. The query is
embedded while the ranker does what needs no vector, so a search costs about one embedding call.
When Ollama fails, the search answers by keywords and says why (the indexer keeps the health).
"""

from __future__ import annotations

import time
from dataclasses import replace
from datetime import UTC, datetime
from functools import partial
from typing import Literal

import anyio
import numpy as np

from ollama_mcp.background import at_once
from ollama_mcp.domain import (
    Conversation,
    SearchFilters,
    SearchHit,
    SearchMode,
    SearchOutcome,
    SearchRequest,
    counted,
)
from ollama_mcp.errors import (
    ConversationNotFoundError,
    EmbeddingMismatchError,
    InvalidInputError,
    OllamaError,
    OllamaMcpError,
)
from ollama_mcp.ollama.embedding_text import chunk_text
from ollama_mcp.ollama.embeddings import Embedder
from ollama_mcp.services.current import CurrentConversations
from ollama_mcp.services.indexer import Indexer
from ollama_mcp.services.relations import related_scope
from ollama_mcp.services.searched import nothing_found
from ollama_mcp.services.superseding import Superseding, pool
from ollama_mcp.storage.protocols import Storage
from ollama_mcp.storage.ranker import QueryVector, Ranker
from ollama_mcp.when import TimeWindow, query_window


class Recall:
    """The searches of one store."""

    def __init__(
        self, store: Storage, indexer: Indexer, embedder: Embedder, ranker: Ranker, current: CurrentConversations,
        superseding: Superseding,
    ) -> None:
        self._store = store
        self._superseding = superseding
        self._indexer = indexer
        self._embedder = embedder
        self._ranker = ranker
        self._current = current
        # A search scoped to one conversation found others exist (remembered once true: deleting
        # every other conversation while a server runs is rare, and the notice then only over-informs).
        self._others_seen = False

    async def search(self, request: SearchRequest) -> SearchOutcome:
        """search_memories and search_all_conversations: every conversation with ``everywhere``,
        else the given conversation, else the current one.

        A current conversation the server started by itself (a store with no init_conversation:
        every new chat of a client that never names one) holds nothing yet of what the user
        remembers, so a search in it covers every conversation; narrowing it to that one would
        forget every earlier chat the moment something is saved. A search that did leave other
        conversations out says so, with the tool that recalls them.
        """
        started = time.perf_counter()
        if request.project is not None:
            return await self._search_project(request, started)
        if request.related_to is not None:
            return await self._search_related(request, started)
        target = None if request.everywhere else request.conversation_id or await self._current.id()
        conversation = None if target is None else await self._store.get_conversation(target)
        if conversation is not None and conversation.anonymous and request.conversation_id is None:
            conversation = None  # the server's own current conversation: search them all
        if conversation is None:
            hits, mode, notice = await self._find(request, replace(request.filters, conversation_id=None), None)
            return _outcome(hits, mode, notice, started, "all")
        filters = replace(request.filters, conversation_id=conversation.id)
        if self._others_seen:
            hits, mode, notice = await self._find(request, filters, conversation)
        else:  # read beside the search, not after it: a store of one conversation asks every time
            (hits, mode, notice), self._others_seen = await at_once(
                partial(self._find, request, filters, conversation),
                partial(self._store.has_other_conversations, conversation.id),
            )
        if self._others_seen:
            notice = _joined(
                notice, "Only this conversation was searched; search_all_conversations recalls the others."
            )
        return _outcome(hits, mode, notice, started, "conversation")

    async def _search_project(self, request: SearchRequest, started: float) -> SearchOutcome:
        """A search of the conversations filed under ``request.project`` (every one of them, not
        only the current), within what else the request asks: the conversation given, those
        related to one, those shared with a caller."""
        assert request.project is not None
        scope = await self._store.project_conversations(request.project)
        if request.conversation_id is not None and not request.everywhere:
            scope = [c for c in scope if c == request.conversation_id]
        if request.filters.conversation_ids is not None:
            allowed = set(request.filters.conversation_ids)
            scope = [c for c in scope if c in allowed]
        narrowed = replace(
            request, project=None, conversation_id=None, everywhere=True,
            filters=replace(request.filters, conversation_ids=tuple(scope)),
        )
        if request.related_to is not None:
            outcome = await self._search_related(narrowed, started)
        else:
            hits, mode, notice = await self._find(narrowed, narrowed.filters, None)
            outcome = _outcome(hits, mode, notice, started, "all")
        if not scope:
            said = (
                f"No conversation is filed under project {request.project!r}: list_conversations shows each"
                " one's project in its metadata; leave project out to search them all."
            )
        else:
            searched = counted(len(scope), "conversation", "conversations")
            said = f"Searched the {searched} of project {request.project!r}."
        return replace(outcome, notice=_joined(outcome.notice, said))

    async def _search_related(self, request: SearchRequest, started: float) -> SearchOutcome:
        """A search of one conversation and those related to it (``relations.related_scope``),
        within the conversations the request allows (those shared with a caller)."""
        assert request.related_to is not None
        try:
            scope = await related_scope(self._store, request.related_to)
        except ConversationNotFoundError:
            raise InvalidInputError(
                "related_to", f"names no conversation ({request.related_to})",
                "pass the id of a conversation (list_conversations shows them), or leave it out",
            ) from None
        if request.filters.conversation_ids is not None:
            allowed = set(request.filters.conversation_ids)
            scope = [c for c in scope if c in allowed]
        filters = replace(request.filters, conversation_id=None, conversation_ids=tuple(scope))
        hits, mode, notice = await self._find(request, filters, None)
        covered = f"Searched {len(scope)} conversation{'s' if len(scope) != 1 else ''}: {request.related_to}" + (
            f" and {len(scope) - 1} related to it." if len(scope) > 1 else " (nothing is related to it yet)."
        )
        return _outcome(hits, mode, _joined(notice, covered), started, "related")

    async def _find(
        self, request: SearchRequest, filters: SearchFilters, conversation: Conversation | None
    ) -> tuple[list[SearchHit], SearchMode, str | None]:
        """The hits of a search in ``filters`` (within ``conversation``, when one is given), its
        mode and its notice. With no query words (``""`` or ``"*"``), what the filters allow,
        newest first: "everything tagged decision"."""
        if not request.query:
            listed = await self._store.listed_memories(filters, request.top_k)
            return await self._with_projects([SearchHit(m, 0.0, None) for m in listed], conversation), "list", None
        hits, by_meaning, notice = await self._rank(
            request.query, filters, None if conversation is None else conversation.key,
            pool(request.top_k, request.query), request.threshold, _window(request),
        )
        hits = await self._superseding.arrange(
            hits, request.query, filters, request.top_k, everything=filters.include_superseded,
        )
        if not hits:
            conversations, by_kind = await self._store.searched_counts(filters)
            found_none = nothing_found(conversations, by_kind, filters.kinds, filters.tags)
            notice = _joined(notice or "", found_none).strip()
        return await self._with_projects(hits, conversation), "hybrid" if by_meaning else "keyword", notice

    async def _with_projects(self, hits: list[SearchHit], conversation: Conversation | None) -> list[SearchHit]:
        """The hits, each with its conversation's project: one read for them all, or none when they
        are all of ``conversation``, which was read already and names its project in text (or
        none). Another value (a number, an object) is read as the store renders it."""
        filed = None if conversation is None else conversation.metadata.get("project")
        if conversation is not None and (filed is None or isinstance(filed, str)):
            if filed is None:
                return hits
            return [replace(h, project=filed) for h in hits]
        projects = await self._store.projects_of(sorted({h.memory.conversation_id for h in hits}))
        if not projects:
            return hits
        return [replace(h, project=projects.get(h.memory.conversation_id)) for h in hits]

    async def _rank(
        self, text: str, filters: SearchFilters, conversation_key: int | None, top_k: int, threshold: float | None,
        window: TimeWindow | None = None,
    ) -> tuple[list[SearchHit], bool, str | None]:
        """Ranked hits, whether meaning was used (else keywords only), and a notice saying why not.

        The query's embedding is computed while the ranker does what needs no vector (reading
        the keyword lists): a search costs about one embedding call, not its sum with the rest.
        """
        known = self._indexer.failure
        if known is not None:
            hits = await self._ranker.search(text, None, filters, conversation_key, top_k, threshold, window)
            return hits, False, self._keyword_notice(threshold, known)
        vector = QueryVector()
        failures: list[Exception] = []
        missed: list[OllamaMcpError] = []  # why this search got no vector
        found: list[SearchHit] = []

        async def embed() -> None:
            try:
                vector.set(await self._embedder.embed_query(text))
            except OllamaError as exc:
                self._indexer.fail(exc)
                missed.append(exc)
                vector.set(None)
            except Exception as exc:  # a bug: re-raised below as itself
                failures.append(exc)
                vector.set(None)
                tasks.cancel_scope.cancel()
            finally:
                if not vector.ready:  # cancelled: the ranker must not wait for it
                    vector.set(None)

        async def rank() -> None:
            try:
                found.extend(
                    await self._ranker.search(text, vector, filters, conversation_key, top_k, threshold, window)
                )
            except Exception as exc:  # re-raised below as itself, not in an exception group
                failures.append(exc)
                tasks.cancel_scope.cancel()

        async with anyio.create_task_group() as tasks:
            tasks.start_soon(embed)
            tasks.start_soon(rank)
        if failures:
            if not isinstance(failures[0], EmbeddingMismatchError):
                raise failures[0]
            self._indexer.fail(failures[0])  # the model changed under its name: keywords only, and say so
            hits = await self._ranker.search(text, None, filters, conversation_key, top_k, threshold, window)
            return hits, False, self._keyword_notice(threshold, failures[0])
        query_vector = await vector.get()
        if query_vector is None:  # Ollama failed: the ranker ranked by keywords alone
            return found, False, self._keyword_notice(threshold, missed[0] if missed else None)
        return await self._with_closest(found, query_vector), True, None

    async def _with_closest(self, hits: list[SearchHit], query: np.ndarray) -> list[SearchHit]:
        """``hits`` with, for each long one embedded in several chunks, the chunk closest in
        meaning to ``query`` (``SearchHit.closest``): a long memory found by meaning alone is
        shown by that passage, not by its start (``passages.passage``). Read only for the hits
        longer than a chunk: one small read, and none for most searches."""
        chunk_chars = await self._embedder.chunk_chars()
        long = [h for h in hits if len(h.memory.content) > chunk_chars]
        if not long:
            return hits
        stored = await self._store.chunk_vectors([h.memory.seq for h in long], self._embedder.model)
        closest: dict[int, tuple[int, int]] = {}
        for hit in long:
            chunks = chunk_text(hit.memory.content, chunk_chars)
            vectors = stored.get(hit.memory.seq, {})
            if len(vectors) != len(chunks) or set(vectors) != set(range(len(chunks))):
                continue  # a chunk was halved to fit, or the vector was the caller's: no passage to name
            matrix = np.frombuffer(b"".join(vectors[i] for i in range(len(chunks))), dtype="<f4")
            if matrix.size != len(chunks) * query.size:
                continue
            best = chunks[int(np.argmax(matrix.reshape(len(chunks), query.size) @ query))]
            closest[hit.memory.seq] = (best.start, best.end)
        return [replace(h, closest=closest[h.memory.seq]) if h.memory.seq in closest else h for h in hits]

    def _keyword_notice(self, threshold: float | None, failure: OllamaMcpError | None = None) -> str:
        """Why a search is by keywords only: ``failure`` (what this search met), else the last
        recorded failure (a probe may have cleared that one meanwhile)."""
        note = f"Semantic search is unavailable, so these are keyword matches only: {failure or self._indexer.failure}"
        if threshold is not None:
            note += " The similarity threshold was not applied."
        return note


def _joined(notice: str | None, more: str) -> str:
    """A search's notice with one more sentence."""
    return f"{notice} {more}" if notice else more


def _window(request: SearchRequest) -> TimeWindow | None:
    """The time the query names, "last week" read against the request's reference time (or now)."""
    reference = datetime.now(UTC) if request.reference_time is None else datetime.fromisoformat(request.reference_time)
    return query_window(request.query, reference)


def _outcome(
    hits: list[SearchHit], mode: SearchMode, notice: str | None, started: float,
    searched: Literal["conversation", "related", "all"],
) -> SearchOutcome:
    """What a search found, with its mode and how long it took since ``started``."""
    return SearchOutcome(hits, mode, round((time.perf_counter() - started) * 1000, 2), notice, searched)

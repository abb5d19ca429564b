"""The use-cases behind the tools, one method per tool, and the one place that decides
"store first, then tell the indexer".

A memory is committed whatever Ollama answers (``Indexer.embedding`` asks for its vector while
it is written; the store waits for the answer after the commit), so nothing is lost when Ollama
is down, slow or missing the model.
"""

from __future__ import annotations

import time
import uuid
from collections import OrderedDict
from collections.abc import Sequence
from contextlib import nullcontext, suppress
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from functools import partial
from typing import Any, Literal

from ollama_mcp import audit, caller, inputs
from ollama_mcp.background import at_once
from ollama_mcp.domain import (
    Conversation,
    ConversationQuery,
    DeletedConversation,
    EmbeddingRow,
    EndedConversation,
    Memory,
    MemoryPage,
    SearchFilters,
    SearchHit,
    SearchMode,
    SearchOutcome,
    SearchRequest,
    StoredMemory,
    WriteRecord,
    counted,
    format_timestamp,
    utc_now,
)
from ollama_mcp.errors import (
    ConversationClosedError,
    ConversationNotFoundError,
    InvalidInputError,
    MemoryNotFoundError,
    StorageError,
)
from ollama_mcp.ollama.embeddings import given_vector, to_blob
from ollama_mcp.services.indexer import Indexer
from ollama_mcp.services.jobs import JobRunner
from ollama_mcp.services.passages import page_of
from ollama_mcp.services.relations import related_scope
from ollama_mcp.services.searched import nothing_found
from ollama_mcp.storage.protocols import Storage
from ollama_mcp.when import TimeWindow, query_window

MAX_CLIENTS = 10_000  # current conversations remembered (each a few hundred bytes)


class MemoryService:
    """Conversations and memories of one store, and each client's 'current conversation'."""

    def __init__(
        self, store: Storage, indexer: Indexer, jobs: JobRunner, *, max_content_chars: int, summaries: bool = False,
        facts: bool = False,
    ) -> None:
        self._store = store
        self._indexer = indexer
        self._jobs = jobs
        self._summaries = summaries  # a chat model is configured to write missing summaries
        self._facts_default = facts  # conversations that do not say (metadata.facts) have facts extracted
        self._max_content_chars = max_content_chars
        # Each client's current conversation (``caller.client()``): a stdio server has one client;
        # an HTTP server one per MCP session (or token). The least recently used are forgotten first.
        self._current: OrderedDict[str, str] = OrderedDict()
        # A search scoped to one conversation found others exist (remembered once true: deleting
        # every other conversation while a server runs is rare, and the notice then only over-informs).
        self._others_seen = False

    async def current_conversation_id(self) -> str | None:
        """The calling client's current conversation: kept in this process for a client bound to
        it (stdio's, an MCP session's), in the store for one any instance may serve."""
        key = caller.client()
        if caller.served_anywhere():
            return await self._store.current_conversation(key)
        found = self._current.get(key)
        if found is not None:
            self._current.move_to_end(key)
        return found

    async def _make_current(self, conversation_id: str) -> None:
        key = caller.client()
        if caller.served_anywhere():
            await self._store.set_current_conversation(key, conversation_id, utc_now())
            return
        self._current[key] = conversation_id
        self._current.move_to_end(key)
        while len(self._current) > MAX_CLIENTS:
            self._current.popitem(last=False)

    def _no_longer_current(self, conversation_id: str) -> None:
        """An ended or deleted conversation stops being current for every client of this process
        (the store forgets it for the others as it ends or deletes it)."""
        for key in [key for key, current in self._current.items() if current == conversation_id]:
            del self._current[key]

    @property
    def max_content_chars(self) -> int:
        return self._max_content_chars

    # -- conversations --------------------------------------------------------------------------

    async def init_conversation(
        self, name: object = None, metadata: object = None, follows: object = None
    ) -> Conversation:
        """A new conversation, made current; ``follows``: the id of the conversation it continues."""
        conversation, _ = await self.create_conversation(name, metadata, follows)
        await self._make_current(conversation.id)
        return conversation

    async def create_conversation(
        self, name: object = None, metadata: object = None, follows: object = None, conversation_id: object = None
    ) -> tuple[Conversation, bool]:
        """A new conversation, not made current (a REST client names its conversation on every
        call), and True. ``conversation_id``: an id the client minted; if a conversation of this
        store has it already, that one unchanged, and False: creating it again is a retry."""
        minted = inputs.conversation_id("id", conversation_id)
        if minted is not None:
            with suppress(ConversationNotFoundError):
                return await self._store.get_conversation(minted, count_memories=True), False
        meta = inputs.conversation_metadata("metadata", metadata)
        earlier = inputs.conversation_id("follows", follows)
        if (inputs.ConversationSettings.of(meta).retention or "full") != "full" and not self._summaries:
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
        ttl = inputs.ttl_hours("metadata.ttl_hours", meta.get("ttl_hours"))
        expires_at = None if ttl is None else format_timestamp(now + timedelta(hours=ttl))
        new_id = minted or str(uuid.uuid4())
        try:
            arguments = [name, metadata] if follows is None else [name, metadata, follows]
            with audit.recording("init_conversation", new_id, arguments=arguments):
                conversation = await self._store.create_conversation(
                    new_id, inputs.optional_name("name", name), meta,
                    anonymous=False, created_at=format_timestamp(now), expires_at=expires_at, follows=earlier,
                )
        except ConversationNotFoundError as exc:
            if exc.conversation_id != earlier:
                raise
            raise InvalidInputError(
                "follows", f"names no conversation ({earlier})",
                "pass the id of the conversation this one continues (list_conversations shows them), or leave it out",
            ) from None
        except StorageError:
            if minted is None:
                raise
            # Two creates of one minted id at once: the other made it.
            return await self._store.get_conversation(minted, count_memories=True), False
        return conversation, True

    async def resolve_conversation(self, conversation_id: object, *, create: bool = False) -> Conversation | None:
        """The given conversation (which must be active), else the current one, else (with
        ``create``) a new anonymous one that becomes current, else None."""
        given = inputs.conversation_id("conversation_id", conversation_id)
        if given is None and not create and await self.current_conversation_id() is None:
            return None
        return await self._conversation_for_store(given)

    async def get_conversation_id(self) -> Conversation | None:
        """The current conversation of this process, if any (and if it still exists)."""
        current = await self.current_conversation_id()
        if current is None:
            return None
        return await self._store.get_conversation(current, count_memories=True)

    async def list_conversations(
        self, status: object = None, limit: object = 20, name: object = None, metadata: object = None,
        order: object = "activity",
    ) -> list[Conversation]:
        """Conversations with their counts and last activity, latest activity first (or newest
        first with ``order="created"``), filtered by status, a name fragment and metadata values."""
        return await self.conversations(inputs.conversation_query(status, limit, name, metadata, order))

    async def conversations(self, query: ConversationQuery) -> list[Conversation]:
        """list_conversations for a query already checked (``inputs.conversation_query``)."""
        return await self._store.list_conversations(query)

    async def end_conversation(self, conversation_id: object = None, summary: object = None) -> EndedConversation:
        target = inputs.conversation_id("conversation_id", conversation_id) or await self.current_conversation_id()
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
        facts = self._summaries and inputs.facts_wanted(
            (await self._store.get_conversation(target)).metadata, self._facts_default
        )
        with audit.recording("end_conversation", target, arguments=summary):
            conversation, count = await self._store.end_conversation(
                target, ended_at, summary_memory, queue_summary=self._summaries, queue_facts=facts
            )
        self._no_longer_current(target)
        if summary_memory is not None:
            self._indexer.added()  # the summary is embedded in the background like any pending memory
        # The chat model writes a summary in the background (the call returns now), or the given
        # one is compared with the other conversations' (the relate job the store queued).
        self._jobs.wakeup.set()
        return EndedConversation(conversation, count)

    # -- memories -------------------------------------------------------------------------------

    async def store_memory(
        self,
        content: object,
        conversation_id: object = None,
        tags: object = None,
        metadata: object = None,
        embedding: object = None,
        occurred_at: object = None,
        *,
        actor: str | None = None,
    ) -> StoredMemory:
        """Store a note; ``actor`` (set by our own code, never from a tool's input) says who wrote it."""
        text = inputs.text("content", content, self._max_content_chars, what="memory text")
        given_id = inputs.conversation_id("conversation_id", conversation_id)
        tag_list = inputs.tags("tags", tags)
        meta = inputs.metadata("metadata", metadata)
        vector = given_vector("embedding", embedding)
        happened = inputs.occurred_at("occurred_at", occurred_at)

        # Ollama embeds the text while it is written (see Indexer.embedding).
        async with self._indexer.embedding(text) if vector is None else nullcontext() as ahead:
            conversation = await self._conversation_for_store(given_id)
            memory = Memory(
                id=str(uuid.uuid4()), seq=0, conversation_id=conversation.id, kind="note", content=text,
                tags=tag_list, metadata=meta, created_at=utc_now(), actor=actor, occurred_at=happened,
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
            with audit.recording("store_memory", conversation.id, memory.id, arguments=[text, tags, metadata]):
                stored, duplicate = await self._store.insert_memory(memory, rows)
            if rows and not duplicate:
                self._indexer.added(vectors=True)  # its context vector comes from Ollama, in the background
                return StoredMemory(stored, False, "embedded", rows[0].dim)
            if duplicate and not await self._indexer.is_pending(stored):
                return StoredMemory(stored, True, "embedded", await self._indexer.expected_dimension())
            return await self._indexer.embed(stored, duplicate, ahead)

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
        memories: list[Memory] = []
        rows: list[EmbeddingRow | None] = []
        model, expected = self._indexer.model, await self._indexer.expected_dimension()
        for i, content in enumerate(contents):
            text = inputs.text(f"contents[{i}]", content, self._max_content_chars, what="memory text")
            memories.append(Memory(id=str(uuid.uuid4()), seq=0, conversation_id=target, kind="note", content=text,
                                   tags=(), metadata={}, created_at=now))
            vector = None if embeddings is None else given_vector(f"embeddings[{i}]", embeddings[i])
            if vector is not None:
                expected = expected or len(vector)
                if len(vector) != expected:
                    raise InvalidInputError(f"embeddings[{i}]", f"has {len(vector)} dimensions, not {expected}",
                                            "pass vectors of one model")
                rows.append(EmbeddingRow(0, "content", 0, model, to_blob(vector), len(vector)))
            else:
                rows.append(None)
        with audit.recording("import_memories", target, arguments=[m.content for m in memories]):
            added = await self._store.insert_memories(memories, rows)
        self._indexer.added(vectors=True)
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
            raise InvalidInputError(
                "content", "tags and metadata are all missing", "pass at least one of them to change"
            )
        now = utc_now()

        def revise(old: Memory) -> Memory:
            return Memory(
                id=str(uuid.uuid4()), seq=0, conversation_id=old.conversation_id, kind=old.kind,
                content=old.content if text is None else text,
                tags=old.tags if tag_list is None else tag_list,
                metadata=old.metadata if meta is None else meta, created_at=now,
                # A correction does not move when the memory happened, nor change who wrote it.
                actor=old.actor, occurred_at=old.occurred_at,
            )

        with audit.recording("update_memory", None, target, arguments=[target, content, tags, metadata]):
            old, new = await self._store.update_memory(target, revise)
        # The old version keeps its vectors: searches mask it out unless include_superseded.
        return old, await self._indexer.embed(new)

    async def read_memory(
        self, memory_id: object, conversation_id: object = None, page: object = 1, *, page_chars: int
    ) -> MemoryPage:
        """Page ``page`` of a memory's whole text, in pages of ``page_chars`` characters: what a
        search shows by its passages, read in full. With ``conversation_id``, the memory must be
        in that conversation (how a conversation shared with the caller is named)."""
        target = inputs.memory_id("memory_id", memory_id)
        within = inputs.conversation_id("conversation_id", conversation_id)
        number = inputs.integer("page", page, 1, 1_000_000)
        memory = await self._store.get_memory(target)
        if within is not None and memory.conversation_id != within:
            raise MemoryNotFoundError(target)
        text, pages = page_of(memory.content, number, page_chars)
        if number > pages:
            raise InvalidInputError("page", f"is {number}, but the memory has {pages} page(s)", f"pass 1 to {pages}")
        return MemoryPage(memory, number, pages, text)

    async def delete_conversation(self, conversation_id: object) -> DeletedConversation:
        """Delete a conversation with every memory version, message, summary, vector, keyword
        entry, job and audit row, in one transaction: the one delete path of every caller (the
        tool, the agent, ``forget``, retention)."""
        target = inputs.conversation_id("conversation_id", conversation_id)
        if target is None:
            raise InvalidInputError("conversation_id", "is required", "pass the id of the conversation to delete")
        conversation = await self._store.get_conversation(target)
        with audit.recording("delete_conversation", target):
            seqs = await self._store.delete_conversation(target)
        await self._indexer.removed(seqs)
        self._no_longer_current(target)
        return DeletedConversation(conversation, len(seqs))

    async def delete_memory(self, memory_id: object) -> Memory:
        target = inputs.memory_id("memory_id", memory_id)
        with audit.recording("delete_memory", None, target):
            deleted, seqs, context_changed = await self._store.delete_memory(target)
        # Memories after it lose its text from their context; the backfill embeds the new one.
        await self._indexer.removed(seqs, contexts=context_changed)
        return deleted

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
        target = None if request.everywhere else request.conversation_id or await self.current_conversation_id()
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
        hits, by_meaning, notice = await self._indexer.search(
            request.query, filters, None if conversation is None else conversation.key, request.top_k,
            request.threshold, _window(request),
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

    async def forget_vectors(self) -> None:
        """Drop every vector of the configured model: everything becomes pending (reembed --force)."""
        await self._store.delete_vectors(self._indexer.model)
        self._indexer.invalidate()

    # -- what the browser view, the CLI and live updates read (the edges never reach the store) --

    async def memory(self, memory_id: str) -> Memory:
        """One memory by id, any version (``MemoryNotFoundError`` when there is none)."""
        return await self._store.get_memory(memory_id)

    async def conversation(self, conversation_id: str) -> Conversation:
        """One conversation by id (``ConversationNotFoundError`` when there is none)."""
        return await self._store.get_conversation(conversation_id)

    async def snapshot(self, conversation_id: str) -> tuple[Conversation, list[Memory], int]:
        """A conversation with every memory (all versions, messages and summaries) and their count."""
        return await self._store.conversation_snapshot(conversation_id)

    async def forget_older(self, cutoff: str, conversation_id: str | None = None, *, dry_run: bool = False) -> int:
        """Delete the memories stored before ``cutoff`` (in one conversation, or every one), each
        through ``delete_memory``, the one delete path (its versions, vectors, keyword entries, the
        context of its neighbours); returns how many were (or, ``dry_run``, would be) deleted. A
        memory another process deleted meanwhile is not counted."""
        ids = await self._store.memories_stored_before(cutoff, conversation_id)
        if dry_run:
            return len(ids)
        deleted = 0
        for memory_id in ids:
            with suppress(MemoryNotFoundError):
                await self.delete_memory(memory_id)
                deleted += 1
        return deleted

    async def memory_total(self, conversation_id: str) -> int:
        """What deleting the conversation removes: every memory, versions and messages too."""
        return await self._store.memory_total(conversation_id)

    async def memory_timeline(self) -> list[tuple[str, str, int]]:
        """Notes and turns per day (a turn's own) and conversation, for the browser view's timeline."""
        return await self._store.memory_timeline()

    async def conversation_ids(self, *, idle_before: str | None = None) -> list[str]:
        """Every conversation's id; with ``idle_before``, only those idle since before it."""
        if idle_before is None:
            return await self._store.conversation_ids()
        return await self._store.expired_conversations("", idle_before)  # idle only: no TTL is "now" at ""

    async def write_records(self, since: str | None, limit: int) -> list[WriteRecord]:
        """The write audit, newest first: every write through any door, without its text."""
        return await self._store.write_records(since, limit)

    async def change_marks(self, conversation_ids: Sequence[str]) -> dict[str, tuple[Any, ...]]:
        """What changes when one of these conversations changes (live updates compare them)."""
        return await self._store.change_marks(conversation_ids)

    async def conversations_mark(self) -> tuple[Any, ...]:
        """What changes when the conversation list changes."""
        return await self._store.conversations_mark()

    # -- internals ------------------------------------------------------------------------------

    async def _conversation_for_store(self, given_id: str | None) -> Conversation:
        current = None if given_id is not None else await self.current_conversation_id()
        if given_id is not None:
            conversation = await self._store.get_conversation(given_id)
        elif current is not None:
            conversation = await self._store.get_conversation(current)
        else:
            new_id = str(uuid.uuid4())
            with audit.recording("start_conversation", new_id):
                conversation = await self._store.create_conversation(
                    new_id, None, {}, anonymous=True, created_at=utc_now()
                )
            await self._make_current(conversation.id)
        if conversation.status != "active":
            raise ConversationClosedError(conversation.id)
        return conversation


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

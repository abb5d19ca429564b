"""The storage seam: what the services above storage may ask of a backend's store (``Storage``,
one protocol a concept; search asks its ranker, ``storage.ranker``). Each backend implements all
of it with the same results and errors (``errors.StorageError`` and its kin, ``NotFoundError``s,
``ConversationClosedError``), so nothing above this seam branches on the backend.

``store.Store`` is the SQLite implementation. What its in-memory ranking reads besides
(``search_reads``, ``keyword_rows``, ``keyword_snapshot``, ``tokenize``, ``vector_snapshot``,
``document_counts``, ``filtered_seqs``, ``data_version``, ``approximate_memory_count``,
``merge_keyword_indexes``) is not part of the seam: a backend that ranks inside its database
has no use for it. Timestamps are ISO 8601 UTC text (``domain.format_timestamp``); a memory's
``seq`` is its backend-assigned integer key.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any, Protocol

from ollama_mcp.domain import (
    AccessToken,
    AuditRow,
    CompactAt,
    Conversation,
    ConversationQuery,
    ConversationShare,
    EmbeddingRow,
    Facet,
    Job,
    JobKind,
    JobRecord,
    JobStatus,
    Memory,
    MemoryKind,
    OpenTurn,
    Participant,
    Relation,
    RelationKind,
    SearchFilters,
    Shrunk,
    WriteRecord,
)
from ollama_mcp.storage.claim_storage import ClaimStorage
from ollama_mcp.storage.secret_storage import SecretStorage


class ConversationStorage(Protocol):
    """Conversations: create, read, list, end, change marks, expiry and deletion."""

    async def create_conversation(
        self,
        conversation_id: str,
        name: str | None,
        metadata: dict[str, Any],
        anonymous: bool,
        created_at: str,
        expires_at: str | None = None,
        follows: str | None = None,
    ) -> Conversation:
        """Create it; with ``follows``, record it as that conversation's follow-up in the same
        transaction (``ConversationNotFoundError`` for ``follows`` when there is none)."""

    async def get_conversation(self, conversation_id: str, *, count_memories: bool = False) -> Conversation:
        """The conversation (``memory_count`` is filled only when asked: it costs a count)."""

    async def list_conversations(self, query: ConversationQuery) -> list[Conversation]:
        """The conversations ``query`` selects, in its order, with message counts and last activity."""

    async def end_conversation(
        self, conversation_id: str, ended_at: str, summary_memory: Memory | None, *, queue_summary: bool,
        queue_facts: bool = False,
    ) -> tuple[Conversation, int]:
        """Complete the conversation; in the same transaction store ``summary_memory`` or (with
        ``queue_summary``) queue its summarize job, and with ``queue_facts`` its facts job.
        Returns it and its final memory count."""

    async def conversation_ids(self) -> list[str]: ...

    async def memories_stored_before(self, cutoff: str, conversation_id: str | None = None) -> list[str]:
        """The ids of the memories (current versions, every kind) stored before ``cutoff``, in one
        conversation or all, oldest first."""

    async def conversations_with_setting(self, key: str) -> list[tuple[str, dict[str, Any]]]:
        """The conversations whose metadata holds the setting ``key``, with their metadata."""

    async def project_conversations(self, project: str) -> list[str]:
        """The ids of the conversations filed under ``project`` (a path, or its folder's name)."""

    async def projects_of(self, conversation_ids: Sequence[str]) -> dict[str, str]:
        """The project of each of these conversations that has one."""

    async def has_other_conversations(self, conversation_id: str) -> bool:
        """Whether any conversation besides this one exists (one index probe)."""

    async def change_marks(self, conversation_ids: Sequence[str]) -> dict[str, tuple[Any, ...]]:
        """For each of the conversations that exists, a mark that changes whenever it or its
        memories change, whoever writes (live updates compare them)."""

    async def conversations_mark(self) -> tuple[Any, ...]:
        """A mark that changes whenever a conversation is created, deleted or ended."""

    async def expired_conversations(self, now: str, inactive_before: str | None) -> list[str]:
        """Conversations past their own expiry, or (with ``inactive_before``) untouched since then."""

    async def memory_total(self, conversation_id: str) -> int:
        """Every memory row of a conversation: versions, messages and summaries included."""

    async def memory_timeline(self) -> list[tuple[str, str, int]]:
        """(conversation id, UTC day, notes and turns of that day and not since replaced), by day:
        a turn's day is when it was said (``occurred_at``), a note's when it was stored."""

    async def delete_conversation(self, conversation_id: str) -> list[int]:
        """Delete a conversation with everything that belongs to it, in one transaction; returns
        the seqs of the memories that went with it."""


class RelationStorage(Protocol):
    """Links between conversations: follow-ups, related and duplicate ones."""

    async def relations(self, conversation_id: str, *, recorded: bool = False) -> list[Relation]:
        """The conversations related to this one either way, one entry each (a follow-up before a
        duplicate before a related one), follow-ups first, then by score. With ``recorded``: the
        rows this conversation recorded, as stored (what a copy of the store copies)."""

    async def end_summary(self, conversation_id: str) -> Memory | None:
        """The conversation's end summary (given at the end or written by the chat model)."""

    async def similar_summaries(self, conversation_id: str, model: str, limit: int) -> list[tuple[str, float]] | None:
        """The ``limit`` other conversations whose end summaries are most like this one's by the
        cosine of their ``model`` vectors, best first; None while its own has no such vector."""

    async def set_similar(
        self, conversation_id: str, similar: Sequence[tuple[str, RelationKind, float]], now: str
    ) -> None:
        """Replace the related and duplicate links this conversation recorded with ``similar``
        (other id, kind, score), in one transaction; a follow-up link keeps its kind and gets
        the score. Others deleted meanwhile are skipped."""

    async def import_relations(self, conversation_id: str, relations: Sequence[Relation]) -> int:
        """Insert links this conversation recorded (``relations(..., recorded=True)``) as they are,
        skipping those present or whose other conversation is missing; returns how many were added."""


class MemoryStorage(Protocol):
    """Memories: insert, read, revise and delete one or many, and the times they name."""

    async def insert_memory(self, memory: Memory, embeddings: Sequence[EmbeddingRow] = ()) -> tuple[Memory, bool]:
        """Insert a memory into an active conversation; returns (memory, was_duplicate)."""

    async def insert_memories(self, memories: Sequence[Memory], vectors: Sequence[EmbeddingRow | None]) -> int:
        """Bulk insert (imports): one transaction, a few statements for the whole batch."""

    async def get_memory(self, memory_id: str) -> Memory: ...

    async def listed_memories(self, filters: SearchFilters, limit: int) -> list[Memory]: ...

    async def searched_counts(self, filters: SearchFilters) -> tuple[int, dict[str, int]]:
        """(conversations, memories by kind) within ``filters``: what a search looked through."""

    async def deleted_imports(self, ids: Sequence[str]) -> set[str]:
        """Which of ``ids`` (imported conversations and memories) the user deleted."""

    async def restore_deleted_imports(self, ids: Sequence[str]) -> int:
        """Let an import bring ``ids`` back; how many had been deleted."""

    async def update_memory(self, memory_id: str, revise: Callable[[Memory], Memory]) -> tuple[Memory, Memory]:
        """Store ``revise(old)`` as the new version of ``memory_id``."""

    async def delete_memory(self, memory_id: str) -> tuple[Memory, list[int], list[int]]:
        """Delete a memory with all its versions, tags, vectors and keyword entries at once. Returns
        it, the seqs deleted, and the seqs of later memories whose context changed."""

    async def memories_by_seq(self, seqs: Iterable[int]) -> dict[int, Memory]: ...

    async def moments_by_seq(self, seqs: Iterable[int]) -> dict[int, tuple[str, str]]:
        """When each memory of ``seqs`` happened (``occurred_at``) and the times its words name
        (``when.times_named``, kept with the row): all a time window needs, without whole memories
        or parsing their text (bench/README.md)."""

    async def moments_between(
        self, filters: SearchFilters, start: str, end: str, limit: int
    ) -> dict[int, tuple[str, str]]:
        """``moments_by_seq`` of the memories passing ``filters`` that happened from ``start`` (on)
        to ``end`` (before), the ``limit`` earliest."""

    async def name_times(self, limit: int) -> int:
        """Keep the times their words name (``when.times_named``) for up to ``limit`` of the memories
        stored before those were kept, oldest first; returns how many (fewer than ``limit``: none
        are left)."""

    async def adjacent_seqs(self, seqs: Iterable[int]) -> dict[int, tuple[int | None, int | None]]:
        """For each memory of ``seqs``: the seqs of the current notes or messages just before and
        just after it in its conversation (None at either end)."""


class FactStorage(Protocol):
    """Facts extracted from a conversation, and how far extraction has read."""

    async def facts_through(self, conversation_id: str) -> int:
        """The seq of the last memory of the conversation its facts were extracted from (0: none
        yet); ``ConversationNotFoundError`` when it does not exist."""

    async def store_facts(
        self, conversation_id: str, facts: Sequence[Memory], *, since: int, through: int
    ) -> tuple[list[Memory], list[str]]:
        """In one transaction: move the conversation's facts_through from ``since`` to
        ``through`` and insert ``facts`` (kind 'fact', each naming its source in its metadata) as
        ``fact_rules.place_fact`` places them among the current facts of their subject and predicate
        anywhere in the store; a fact whose source is gone is skipped. Nothing happens when
        facts_through is no longer ``since`` (another run stored them) or the conversation is gone.
        Returns (the facts inserted, the ids of the facts they superseded)."""

    async def current_facts(self, conversation_id: str, limit: int) -> list[Memory]:
        """The conversation's facts that nothing superseded, newest first."""


class TranscriptStorage(Protocol):
    """A conversation's transcript and whole snapshots of it."""

    async def messages(self, conversation_id: str, limit: int, before_seq: int | None = None) -> list[Memory]:
        """The latest ``limit`` messages before ``before_seq`` (default: all), oldest first."""

    async def participants(self, conversation_id: str) -> list[Participant]:
        """Who wrote the conversation's messages, in the order they first spoke."""

    async def insert_messages(
        self, messages: Sequence[Memory], retry_since: str | None, *, compact: CompactAt | None = None
    ) -> tuple[list[Memory], bool, bool]:
        """Append messages of one active conversation in order, in one transaction; returns (the
        messages, was_retry, compaction_queued): when the latest messages are these same turns, the
        first stored at or after ``retry_since`` (``memory_rules.is_retry``; None: never), nothing
        is added and they are returned. With ``compact``, a transcript past it is queued for
        compaction in the same transaction."""

    async def conversation_memories(
        self, conversation_id: str, *, after_seq: int = 0, limit: int = -1, kinds: Sequence[MemoryKind] = ()
    ) -> list[Memory]:
        """Memories of every version (of ``kinds``, default all) after ``after_seq``, oldest first."""

    async def transcript_size(self, conversation_id: str, after_seq: int) -> tuple[int, int]:
        """(messages, characters) of the conversation's messages after ``after_seq``."""

    async def content_lengths(self, conversation_id: str) -> list[int]:
        """The characters of each memory of a conversation, in ``conversation_snapshot``'s order."""

    async def conversation_snapshot(
        self, conversation_id: str, offset: int = 0, limit: int = -1
    ) -> tuple[Conversation, list[Memory], int]:
        """A conversation with its memories of every kind and version in order (from ``offset``,
        at most ``limit``; -1: all) and their total, read consistently in one transaction."""

    async def import_conversation(
        self, conversation: Conversation, memories: Sequence[Memory], summarized_through_id: str | None,
        *, summarize_at: str | None = None,
    ) -> tuple[bool, int, bool]:
        """Insert an exported conversation and its memories with their ids, in one transaction; with
        ``summarize_at``, a summary of a conversation that gained memories is queued in it. Returns
        (conversation was new, memories added, summary queued)."""

    async def present(self, conversation_id: str, memory_ids: Sequence[str]) -> tuple[bool, set[str]]:
        """Whether the conversation exists, and which of the memory ids do (an import's dry run)."""


class JobStorage(Protocol):
    """Deferred work: queue, claim under a lease, retry, fail and finish jobs."""

    async def enqueue_job(self, kind: JobKind, conversation_id: str, now: str) -> bool:
        """Queue a job unless one of that kind is already open for the conversation."""

    async def claim_job(self, now: str, lease_until: str, paused: Sequence[JobKind] = ()) -> Job | None:
        """Take the next due job (or one whose worker's lease lapsed: it died) under a lease, of
        a kind not ``paused``."""

    async def renew_job(self, job_id: int, lease_until: str) -> None: ...

    async def next_job_time(self, paused: Sequence[JobKind] = ()) -> str | None:
        """When the next job not ``paused`` falls due (a queued job's run_after or a running job's
        lease end)."""

    async def retry_job(self, job_id: int, run_after: str, error: str) -> None: ...

    async def request_job(
        self, kind: JobKind, conversation_id: str, now: str, options: dict[str, Any] | None = None
    ) -> JobStatus:
        """Queue a job unless one of that kind is open for the conversation; the open one. With
        ``options``, a queued one takes them and a running one with others is ``JobBusyError``."""

    async def job_status(self, job_id: int) -> JobStatus:
        """A job as its requester follows it (``JobNotFoundError`` when there is none)."""

    async def defer_job(self, job_id: int, run_after: str, reason: str) -> None:
        """Put a claimed job back to wait until ``run_after``, the claim not counted as an attempt."""

    async def open_jobs(self, kinds: Sequence[JobKind]) -> int:
        """How many jobs of these kinds are queued or running."""

    async def fail_job(self, job: Job, error: str, now: str) -> None:
        """Give up on a job, keeping the reason; a summary that will not come is marked failed."""

    async def finish_job(
        self, job: Job, now: str, *, summary: Memory | None = None, rolling: tuple[Memory, int] | None = None,
        retire: tuple[str, int] | None = None, then: Sequence[tuple[JobKind, dict[str, Any]]] = (),
        compact: CompactAt | None = None,
    ) -> tuple[list[int], list[int]]:
        """Mark a job done in one transaction with what it produced: a conversation ``summary``
        memory, or a ``rolling`` (summary memory, message seq it covers through) that replaces the
        previous rolling summary's memory. With ``retire`` (a retention mode, audit-only or
        ephemeral, and the seq the summary covers turns through) the covered turns are redacted or
        deleted with it. Returns the seqs of the memories that went (or lost their text and
        vectors) and those of the memories whose context was rewritten. The jobs it leads to are
        queued in that transaction too: ``then`` (kinds with options), and with ``compact`` a
        compaction if the transcript is still past it."""


class OpenTurnStorage(Protocol):
    """Turns being streamed: open, append, read, commit (into a message of the same id), abort."""

    async def open_turn(self, turn_id: str, conversation_id: str, fields: dict[str, Any], now: str) -> OpenTurn: ...

    async def append_to_turn(self, turn_id: str, chunk: str, now: str) -> OpenTurn: ...

    async def get_open_turn(self, turn_id: str) -> OpenTurn: ...

    async def open_turns(self, conversation_id: str) -> list[OpenTurn]: ...

    async def commit_turn(
        self, turn_id: str, message: Memory, *, compact: CompactAt | None = None
    ) -> tuple[Memory, bool]: ...

    async def abort_turn(self, turn_id: str, now: str) -> OpenTurn: ...

    async def revise_turn(
        self, turn_id: str, content: str, how: str, now: str, produced: dict[str, Any]
    ) -> tuple[Memory, list[int], list[int]]:
        """A message's new text in place, its old text kept in ``earlier_versions``; returns it,
        the seqs whose vectors went and those whose context changed."""


class ChatCallStorage(Protocol):
    """The chat-model calls background work made, counted against an hourly budget by every
    process on the store."""

    async def take_chat_call(self, kind: str, now: str, since: str, limit: int) -> tuple[int | None, str | None]:
        """Record a call at ``now`` if fewer than ``limit`` were made after ``since``: its id, else
        None and the time of the oldest call counted."""

    async def give_back_chat_call(self, call_id: int) -> None:
        """Forget a call that never reached the model."""

    async def chat_calls_since(self, since: str) -> tuple[int, str | None]:
        """How many calls were made after ``since``, and the time of the oldest of them."""


class AuditStorage(Protocol):
    """The agent's audit trail and the write audit."""

    async def insert_audit(self, rows: Sequence[AuditRow]) -> None: ...

    async def write_records(self, since: str | None, limit: int) -> list[WriteRecord]:
        """The write audit, newest first (from ``since`` on, when given). Rows are written by the
        write transactions themselves (``audit.recording``)."""


class TransferStorage(Protocol):
    """What copying a store (``ollama-mcp migrate``) reads and writes besides."""

    async def conversation_extras(self, conversation_id: str) -> tuple[list[JobRecord], list[AuditRow]]:
        """The conversation's jobs and audit rows, oldest first."""

    async def import_extras(self, conversation_id: str, jobs: Sequence[JobRecord], audit: Sequence[AuditRow]) -> bool:
        """Insert them in one transaction unless the conversation has jobs or audit rows already
        (a copy that ran before); returns whether it inserted."""

    async def conversation_vectors(self, conversation_id: str) -> list[tuple[str, EmbeddingRow]]:
        """Every vector of the conversation's memories, with the id of the memory it belongs to."""


class VectorStorage(Protocol):
    """Vector rows: what the embedding backfill needs."""

    async def insert_embeddings(self, rows: Sequence[EmbeddingRow]) -> int:
        """Store vectors; rows of memories deleted meanwhile, or stored already, are skipped."""

    async def model_dimension(self, model: str, conversation_id: str | None = None) -> int | None:
        """The dimension the stored vectors of ``model`` use (in one conversation, if given)."""

    async def pending_memories(
        self, model: str, limit: int, after_seq: int = 0, through_seq: int | None = None
    ) -> list[tuple[Memory, tuple[Facet, ...]]]:
        """Up to ``limit`` memories after ``after_seq`` (and up to ``through_seq``) lacking a vector
        of ``model``, oldest first, each with the facets it lacks."""

    async def chunk_vectors(self, memory_seqs: Sequence[int], model: str) -> dict[int, dict[int, bytes]]:
        """The content vectors of ``model`` of each memory's chunks (float32 bytes), by chunk
        index: which passage of a long memory a search came closest to."""

    async def newest_seq(self) -> int:
        """The highest memory seq (0 in an empty store): cheap to read."""

    async def pending_count(self, model: str) -> int:
        """Memories lacking a vector of ``model`` for some facet."""

    async def memory_is_pending(self, memory_seq: int, model: str) -> bool: ...

    async def delete_vectors(self, model: str) -> int:
        """Drop every vector of ``model`` (reembed --force); the memories become pending."""


class ClientStorage(Protocol):
    """The current conversation of clients any instance may serve."""

    async def current_conversation(self, client: str) -> str | None:
        """The current conversation kept for ``client`` (a token without an MCP session)."""

    async def set_current_conversation(self, client: str, conversation_id: str, at: str) -> None:
        """Keep ``conversation_id`` as ``client``'s current conversation (ending or deleting the
        conversation removes it)."""


class TokenStorage(Protocol):
    """Bearer tokens of the HTTP server (kept in the local principal's store)."""

    async def create_token(self, token: AccessToken, token_hash: str) -> bool:
        """Keep a new token's hash; False (and nothing kept) when an active token has that name."""

    async def token_by_hash(self, token_hash: str) -> AccessToken | None:
        """The active (not revoked) token with this hash."""

    async def list_tokens(self) -> list[AccessToken]:
        """Every token, active ones first, then by name."""

    async def revoke_token(self, name: str, now: str) -> bool:
        """Revoke the active token of this name; False when there is none."""

    async def token_rows(self) -> list[tuple[AccessToken, str]]:
        """Every token with its hash, in the order they were made (``migrate`` copies them)."""

    async def import_tokens(self, rows: list[tuple[AccessToken, str]]) -> None:
        """Keep tokens made elsewhere, hashes as given, in one transaction; a hash already kept is
        left as it is, except that it is revoked when the given row is."""


class ShareStorage(Protocol):
    """Conversations shared between principals (kept in the local principal's store)."""

    async def set_share(self, share: ConversationShare) -> None:
        """Share a conversation with a principal, or change the access it has."""

    async def remove_share(self, conversation_id: str, grantee: str) -> bool:
        """Stop sharing; False when it was not shared with ``grantee``."""

    async def share_of(self, conversation_id: str, grantee: str) -> ConversationShare | None: ...

    async def shares_with(self, grantee: str) -> list[ConversationShare]:
        """Every conversation shared with ``grantee``, newest share first."""

    async def shares_of(self, conversation_id: str) -> list[ConversationShare]:
        """Whom the conversation is shared with, by name."""

    async def all_shares(self) -> list[ConversationShare]:
        """Every share, by conversation and grantee (``migrate`` copies them)."""


class StorageLife(Protocol):
    """Bulk loading and closing."""

    def bulk_load(self) -> AbstractAsyncContextManager[None]:
        """A context for writing many memories and vectors at once (``migrate``): a backend may
        postpone index upkeep to its end. Everything written inside is stored and findable as
        usual; an interruption leaves at most slower searches, until the next write."""
        ...

    async def shrink(self) -> Shrunk | None:
        """Give the file system back the space the store's file holds free (``ollama-mcp
        shrink``); None where the backend does that by itself (PostgreSQL's autovacuum)."""
        ...

    async def aclose(self) -> None: ...


class Storage(
    ConversationStorage,
    RelationStorage,
    MemoryStorage,
    FactStorage,
    TranscriptStorage,
    JobStorage,
    OpenTurnStorage,
    ChatCallStorage,
    AuditStorage,
    TransferStorage,
    VectorStorage,
    ClientStorage,
    TokenStorage,
    ShareStorage,
    ClaimStorage, SecretStorage, StorageLife,
    Protocol,
):
    """Conversations, memories, transcript, jobs, audit and vector rows of one store: every part
    above, as each backend implements it. Type a consumer against the parts it uses."""

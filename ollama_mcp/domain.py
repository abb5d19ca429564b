"""Value types passed between layers: no I/O, no third-party imports."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

ConversationStatus = Literal["active", "completed"]
MemoryKind = Literal["note", "message", "summary", "fact"]
EmbeddingStatus = Literal["embedded", "pending"]
# What a vector represents: the memory's own text, or that text with the memories before it.
Facet = Literal["content", "context"]
SearchMode = Literal["hybrid", "keyword", "list"]  # list: no query words, the filters' memories newest first
# The agent's tools whose results only repeat what memory holds: their recorded tool turns are
# not recalled (each would hold again, wrapped, the memories that are hits themselves).
MEMORY_READING_TOOLS = frozenset({"search_memories", "search_all_conversations", "list_conversations"})
# "newer": the current statement of what a hit found said, put where that stale hit ranked;
# "earlier": a statement a hit superseded, put right after it (a question about the past).
MatchReason = Literal["exact", "words", "nearby words", "meaning", "nearby meaning", "time", "newer", "earlier"]
Role = Literal["user", "assistant", "system", "tool"]
SummaryStatus = Literal["none", "given", "pending", "done", "failed"]
JobKind = Literal["summarize", "compact", "relate", "facts"]
RelationKind = Literal["follow_up", "related", "duplicate"]


def utc_now() -> str:
    """The current time in the one timestamp format stored and returned everywhere."""
    return format_timestamp(datetime.now(UTC))


def format_timestamp(moment: datetime) -> str:
    """ISO 8601 in UTC with microseconds and a Z: lexicographic order is time order."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@dataclass(frozen=True)
class Conversation:
    key: int  # the row's integer key: the vector index scopes by it
    id: str
    name: str | None
    status: ConversationStatus
    anonymous: bool
    created_at: str
    ended_at: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    memory_count: int = 0
    message_count: int = 0  # filled by listings
    last_activity: str | None = None  # the latest of its start, end and memories (listings)
    summary: str | None = None
    summary_status: SummaryStatus = "none"
    rolling_summary: str | None = None  # compaction: the oldest messages, summarized
    summarized_through: int = 0  # the seq of the last message the rolling summary covers
    expires_at: str | None = None
    opening: str | None = None  # the start of its first note or user turn (listings)

    @property
    def title(self) -> str | None:
        """What to call it: its name; else (a conversation nobody named, such as the one the server
        starts for a client that never calls init_conversation) the start of its summary, else of
        its first note or user turn; None while it holds nothing."""
        if self.name:
            return self.name
        for text in (self.summary, self.opening):
            if text and text.strip():
                return headline(text)
        return None


@dataclass(frozen=True)
class Memory:
    id: str
    seq: int  # the row's integer key: FTS5 and the vector index are keyed by it
    conversation_id: str
    kind: MemoryKind
    content: str
    tags: tuple[str, ...]
    metadata: dict[str, Any]
    created_at: str
    context: str = ""  # filled by the store: the content preceded by its conversation's previous memories
    role: Role | None = None  # messages only
    actor: str | None = None  # who wrote it: a user id, an agent or a tool name
    tool_calls: tuple[dict[str, Any], ...] = ()  # assistant messages that called tools
    tool_call_id: str | None = None  # tool messages: the call they answer
    superseded_by: str | None = None  # the id of the version that replaced this one
    # When what it records happened (the caller's word; by default when it was stored): the
    # since/until filters and a query's time window use it, never created_at.
    occurred_at: str = ""

    def __post_init__(self) -> None:
        if not self.occurred_at:
            object.__setattr__(self, "occurred_at", self.created_at)


@dataclass(frozen=True)
class StoredMemory:
    """What store_memory did: the memory, whether it already existed, and its embedding state."""

    memory: Memory
    duplicate: bool
    embedding_status: EmbeddingStatus
    embedding_dimension: int | None
    embedding_note: str | None = None


@dataclass(frozen=True)
class SearchFilters:
    """Restrictions applied before ranking; ``None`` means no restriction."""

    conversation_id: str | None = None
    conversation_ids: tuple[str, ...] | None = None  # only these (the conversations shared with a caller)
    tags: tuple[str, ...] = ()
    since: str | None = None
    until: str | None = None
    kinds: tuple[MemoryKind, ...] = ("note", "message", "summary", "fact")  # every kind, unless narrowed
    include_superseded: bool = False
    actors: tuple[str, ...] = ()  # only turns by these participants (a message's actor, else its role)


@dataclass(frozen=True)
class SearchRequest:
    """A search as a caller asked for it, checked once (``inputs.search.search_request``).

    ``conversation_id`` is the conversation given; with none, the service searches the current
    one, or all when there is none. ``everywhere`` searches every conversation whatever is given.
    """

    query: str
    top_k: int = 5
    threshold: float | None = None
    conversation_id: str | None = None
    everywhere: bool = False
    filters: SearchFilters = SearchFilters()
    related_to: str | None = None  # search this conversation and those related to it (everywhere else)
    reference_time: str | None = None  # "last week" in the query is before this (None: now)
    project: str | None = None  # only conversations filed under this project (a path or its folder's name)


@dataclass(frozen=True)
class Scope:
    """Which memories a ranking may return (the filters resolved to keys); ``None`` fields do not
    restrict."""

    conversation_key: int | None = None
    kind_codes: tuple[int, ...] | None = None
    memory_seqs: frozenset[int] | None = None  # from SQL filters (tags, time) when present
    excluded_seqs: frozenset[int] = frozenset()  # e.g. versions replaced by update_memory


@dataclass(frozen=True)
class SearchHit:
    memory: Memory
    score: float  # the fused ranking score (inf for exact phrase matches): only its order means anything
    similarity: float | None  # cosine similarity to the query, when the memory has a vector
    matched: tuple[MatchReason, ...] = ()  # why it is a hit (ranking.reasons); () for a listing
    project: str | None = None  # its conversation's project (metadata.project), when it has one
    # The same fact said elsewhere (folds.fold): every other place, best first; () when said once.
    also: tuple[Memory, ...] = ()
    # A turn found through the turn before it only ("Yes, we did!" for "did they go to Paris?"):
    # that turn's words, so the hit says why it is one.
    via: str | None = None
    # A long memory embedded in several chunks: where the chunk closest in meaning to the query
    # stands in its text (start, end), which it is shown by when none of the query's words is in it.
    closest: tuple[int, int] | None = None
    # A statement a later one superseded (a changed fact: statements.chains): by which, and why.
    superseded: Superseded | None = None


@dataclass(frozen=True)
class Superseded:
    """Why a hit no longer holds: the memory that superseded it (``by``; its direct successor),
    the one holding its subject's attribute now (``current``: ``by`` or later), on what grounds,
    how sure the store is (``statements.chains``: 0.3 a conflict to review, 0.9 a told change)."""

    by: Memory
    current: Memory
    grounds: str
    confidence: float
    conflict: bool = False


@dataclass(frozen=True)
class MemoryPage:
    """One page of a memory's text (``text``), page ``page`` of ``pages``: a long memory read whole."""

    memory: Memory
    page: int
    pages: int
    text: str


@dataclass(frozen=True)
class SearchOutcome:
    hits: list[SearchHit]
    mode: SearchMode
    elapsed_ms: float
    notice: str | None = None
    searched: Literal["conversation", "related", "all"] = "all"  # one, one with its relations, or every one


@dataclass(frozen=True)
class Participant:
    """Someone seen in a conversation's transcript: a message's actor, or its role when it names
    none (the assistant, the system, a tool), with how many turns they wrote and how many of
    those were addressed to some participants only (a turn's ``to``)."""

    name: str
    role: Role
    messages: int
    addressed: int
    last_at: str


@dataclass(frozen=True)
class Relation:
    """Another conversation related to one: ``follow_up`` (``follows``: the one continues the
    other; else the other continues it), ``related`` or ``duplicate`` (their end summaries are
    alike; ``score`` is their cosine similarity, also on a follow-up once both have a summary)."""

    conversation_id: str  # the other conversation
    name: str | None
    status: ConversationStatus
    kind: RelationKind
    score: float | None
    follows: bool  # this conversation is the later one (for a follow-up: it continues the other)
    created_at: str


@dataclass(frozen=True)
class WriteRecord:
    """One row of the write audit: who wrote what, when, through which door (never the text)."""

    at: str
    door: str
    action: str
    conversation_id: str | None = None
    memory_id: str | None = None
    arguments_digest: str | None = None
    principal: str | None = None
    redacted: str | None = None  # the secrets the write's text had, by kind and count ("1 AWS access key")


@dataclass(frozen=True)
class AccessToken:
    """A bearer token of the HTTP server, without the token (only its hash is stored)."""

    name: str  # who holds it, such as alice-laptop
    principal: str  # whose memory it opens
    created_at: str
    revoked_at: str | None = None


ShareAccess = Literal["read", "write"]


@dataclass(frozen=True)
class ConversationShare:
    """A conversation its owner shares with another principal of the HTTP server: ``read`` lets
    the grantee search, export and read it; ``write`` lets them also store memories in it."""

    conversation_id: str
    grantee: str
    owner: str
    access: ShareAccess
    granted_at: str


@dataclass(frozen=True)
class ConversationQuery:
    """What list_conversations asks for: filters (all must hold) and the order."""

    status: ConversationStatus | None = None
    name_contains: str | None = None  # case-insensitive fragment of the name
    metadata: tuple[tuple[str, str], ...] = ()  # (key, value as text) pairs the metadata must hold
    order: Literal["activity", "created"] = "activity"  # latest activity first, or newest first
    limit: int = 20
    offset: int = 0  # how many of the first in that order to pass over (the browser's pages)
    ids: tuple[str, ...] | None = None  # only these conversations (those shared with a caller)
    project: str | None = None  # only those filed under this project (inputs.fields.project)


@dataclass(frozen=True)
class DeletedConversation:
    """What delete_conversation removed: the conversation as it was, and how many memories
    (every version, message and summary) went with it."""

    conversation: Conversation
    memories: int


@dataclass(frozen=True)
class EndedConversation:
    conversation: Conversation
    final_memory_count: int


@dataclass(frozen=True)
class EmbeddingRow:
    """One stored vector: a chunk of a memory embedded by one model."""

    memory_seq: int
    facet: Facet
    chunk_index: int
    model: str
    vector: bytes  # float32, little-endian
    dim: int


@dataclass(frozen=True)
class CompactAt:
    """When a conversation's transcript is due for compaction: past ``messages`` turns, or about
    ``tokens`` estimated tokens, after what its rolling summary covers. A write that adds turns
    carries it to the store, which queues the compaction in the write's own transaction."""

    messages: int
    tokens: int
    chars_per_token: float
    overhead_tokens: int  # per message (its role, its framing)

    def crossed(self, messages: int, chars: int) -> bool:
        tokens = math.ceil(chars / self.chars_per_token) + self.overhead_tokens * messages
        return messages >= 2 and (messages > self.messages or tokens > self.tokens)


@dataclass(frozen=True)
class Job:
    """A unit of deferred work claimed from the jobs table."""

    id: int
    kind: JobKind
    conversation_id: str
    attempts: int  # including the current one
    last_error: str | None = None
    # What it was asked beyond its kind (on demand): through (a turn's id) and through_seq, strategy.
    options: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class OpenTurn:
    """A turn being streamed: what it was opened with (``fields``: role, actor, to, model,
    adapter) and its text so far; ``state`` open, or aborted (kept, never a message)."""

    id: str
    conversation_id: str
    fields: dict[str, Any]
    content: str
    state: str
    created_at: str
    updated_at: str


@dataclass(frozen=True)
class JobStatus:
    """A background job as its requester follows it: queued, running, done or failed (with why)."""

    id: int
    kind: JobKind
    conversation_id: str
    state: str
    attempts: int
    last_error: str | None
    created_at: str
    finished_at: str | None
    options: dict[str, Any] = field(default_factory=dict)  # as Job.options


@dataclass(frozen=True)
class JobRecord:
    """A jobs row as it is, for copying a store between backends."""

    kind: JobKind
    state: str
    attempts: int
    run_after: str
    lease_until: str | None
    last_error: str | None
    created_at: str
    finished_at: str | None


@dataclass(frozen=True)
class Export:
    """One page of a conversation's export: Markdown text or the JSON document's data."""

    conversation_id: str
    format: Literal["markdown", "json"]
    page: int
    pages: int
    markdown: str | None
    data: dict[str, Any] | None


@dataclass(frozen=True)
class AuditRow:
    """One step of an ask_agent call, as recorded in agent_audit."""

    request_id: str
    conversation_id: str
    step: int
    tool: str | None
    arguments_digest: str | None
    risk: str | None
    decision: str
    outcome: str
    duration_ms: float
    created_at: str


@dataclass(frozen=True)
class AgentAnswer:
    """What one ask_agent call produced."""

    conversation_id: str
    response: str
    tools_used: list[str]
    steps: int
    model: str
    note: str | None = None


@dataclass(frozen=True)
class StoreSummary:
    """What a database holds, for the CLI's read-only reports."""

    schema_version: int
    conversations: dict[str, int]  # by status
    memories: dict[str, int]  # by kind
    vectors: list[tuple[str, int, int]]  # (model, dimension, memories with a content vector)
    pending: int  # memories without a content vector of the model asked about
    jobs: dict[str, int]  # background jobs by state
    job_problems: list[tuple[str, str, str]]  # (kind, state, last error) of jobs waiting or failed
    chat_calls: tuple[int, str | None] = (0, None)  # background chat calls in the last hour, and the oldest's time
    chat_jobs_open: int = 0  # jobs that call the chat model, queued or running (services/chat_budget.py)
    pending_context: int = 0  # memories without their in-context vector of the model (searched by a stand-in)
    sessions: frozenset[str] = frozenset()  # the client sessions conversations name (metadata.session_id)


@dataclass(frozen=True)
class Shrunk:
    """What ``shrink`` did to a SQLite store's files: their bytes before and after (the database
    and its write-ahead log), and the bytes the log still holds (another process reading then
    keeps it until its next quiet upkeep; 0 when it could be emptied)."""

    before: int
    after: int
    log_left: int


@dataclass(frozen=True)
class Check:
    """One line of ``doctor``: what was checked, whether it is fine, and what to do if not."""

    name: str
    ok: bool
    detail: str
    blocking: bool = True  # a failure that stops normal use (exit code 1)


TITLE_CHARS = 60


def headline(text: str, limit: int = TITLE_CHARS) -> str:
    """The start of ``text`` on one line, at most ``limit`` characters, cut after a word with "…"."""
    line = " ".join(text.split())
    if len(line) <= limit:
        return line
    cut = line.rfind(" ", 0, limit)
    return line[: cut if cut > limit // 2 else limit - 1].rstrip(" ,.;:") + "…"


def counted(n: int, noun: str, nouns: str | None = None) -> str:
    """``n`` and the noun as English says it: "1 memory", "2 memories" (``nouns``: the plural,
    when adding an "s" is wrong)."""
    return f"{n:,} {noun if n == 1 else nouns or noun + 's'}"

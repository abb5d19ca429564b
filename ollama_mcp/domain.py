"""Value types passed between layers: no I/O, no third-party imports."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

ConversationStatus = Literal["active", "completed"]
MemoryKind = Literal["note", "message", "summary"]
EmbeddingStatus = Literal["embedded", "pending"]
# What a vector represents: the memory's own text, or that text with the memories before it.
Facet = Literal["content", "context"]
SearchMode = Literal["hybrid", "keyword"]


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
    tags: tuple[str, ...] = ()
    since: str | None = None
    until: str | None = None
    kinds: tuple[MemoryKind, ...] = ("note", "summary")


@dataclass(frozen=True)
class SearchHit:
    memory: Memory
    score: float  # the fused ranking score (inf for exact phrase matches): only its order means anything
    similarity: float | None  # cosine similarity to the query, when the memory has a vector


@dataclass(frozen=True)
class SearchOutcome:
    hits: list[SearchHit]
    mode: SearchMode
    elapsed_ms: float
    notice: str | None = None


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

"""Notes as callers give them: one to store (``note``), a correction (``note_change``) and many
at once (``notes_to_import``), each checked once at the door into a frozen value the memory
service takes as it is.

A given vector is carried as given: checking it (finite, non-zero, of the store's dimension) and
scaling it needs numpy, which the door's import path does without; the memory service does both
where it turns the vector into a stored row (``embeddings.given_vector``), once.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ollama_mcp.config import DEFAULT_MAX_CONTENT_CHARS
from ollama_mcp.errors import InvalidInputError
from ollama_mcp.inputs.fields import conversation_id, memory_id, metadata, occurred_at, tags, text


@dataclass(frozen=True)
class Note:
    """A note to store, checked (store_memory's fields)."""

    content: str
    conversation_id: str | None = None  # None: the current conversation (or a new one)
    tags: tuple[str, ...] = ()
    metadata: dict[str, Any] = field(default_factory=dict)
    embedding: object = None  # a caller's vector, checked as it is stored (see the module)
    occurred_at: str = ""  # when it happened, if not when it is stored
    given: tuple[object, ...] = ()  # (content, tags, metadata) as sent: the write audit's


def note(
    content: object, conversation_id: object = None, tags: object = None, metadata: object = None,
    embedding: object = None, occurred_at: object = None, *, max_chars: int = DEFAULT_MAX_CONTENT_CHARS,
) -> Note:
    """store_memory's fields, checked in the order they are named."""
    return Note(
        _text("content", content, max_chars, what="memory text"), _conversation_id("conversation_id", conversation_id),
        _tags("tags", tags), _metadata("metadata", metadata), embedding, _occurred_at("occurred_at", occurred_at),
        (content, tags, metadata),
    )


@dataclass(frozen=True)
class NoteChange:
    """A correction of a memory (update_memory's fields): what is None is kept."""

    memory_id: str
    content: str | None = None
    tags: tuple[str, ...] | None = None
    metadata: dict[str, Any] | None = None
    given: tuple[object, ...] = ()  # (memory_id, content, tags, metadata) as sent: the write audit's


def note_change(
    memory_id: object, content: object = None, tags: object = None, metadata: object = None, *,
    max_chars: int = DEFAULT_MAX_CONTENT_CHARS,
) -> NoteChange:
    """update_memory's fields, checked; at least one of content, tags and metadata."""
    target = _memory_id("memory_id", memory_id)
    change = NoteChange(
        target,
        None if content is None else _text("content", content, max_chars, what="memory text"),
        None if tags is None else _tags("tags", tags),
        None if metadata is None else _metadata("metadata", metadata),
        (target, content, tags, metadata),
    )
    if change.content is None and change.tags is None and change.metadata is None:
        raise InvalidInputError("content", "tags and metadata are all missing", "pass at least one of them to change")
    return change


@dataclass(frozen=True)
class NotesToImport:
    """Many notes into one conversation at once (imports, benchmarks), with their content
    vectors where given (one per text, or none at all)."""

    conversation_id: str
    contents: tuple[str, ...]
    embeddings: tuple[object, ...] | None = None


def notes_to_import(
    conversation_id: object, contents: Sequence[object], embeddings: Sequence[object] | None = None, *,
    max_chars: int = DEFAULT_MAX_CONTENT_CHARS,
) -> NotesToImport:
    target = _conversation_id("conversation_id", conversation_id)
    if target is None:
        raise InvalidInputError("conversation_id", "is required", "pass the conversation to import into")
    if embeddings is not None and len(embeddings) != len(contents):
        raise InvalidInputError("embeddings", "must have one entry per content", "pass as many vectors as texts")
    texts = tuple(_text(f"contents[{i}]", c, max_chars, what="memory text") for i, c in enumerate(contents))
    return NotesToImport(target, texts, None if embeddings is None else tuple(embeddings))


# The builders' parameters are named like the tools' (and so like these checks).
_text, _conversation_id, _tags, _metadata, _occurred_at, _memory_id = (
    text, conversation_id, tags, metadata, occurred_at, memory_id
)

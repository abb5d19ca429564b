"""Rules for a memory's row (no I/O): its context and neighbours' share of it, the digest a
retried store recognises a note by, what is left of a turn an audit-only retention redacted, and
how a retried batch of messages is recognised."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ollama_mcp.domain import Memory


# A memory's context is its content preceded by this many earlier memories of its conversation
# (each clipped to its last CONTEXT_NEIGHBOUR_CHARS). Measured on LoCoMo: bench/README.md.
CONTEXT_NEIGHBOURS = 2


CONTEXT_NEIGHBOUR_CHARS = 1000


def compose_context(earlier: Sequence[str], content: str) -> str:
    """A memory's context: the last CONTEXT_NEIGHBOURS earlier texts, each clipped to its end, then the memory.

    SQLite does not store contexts: its view ``memory_contexts`` (sqlite/migrations/0019_context_view.sql)
    spells this rule, and ``earlier_contents``', in SQL. A change to either is a migration there;
    tests/storage/test_context_view.py compares the two."""
    clipped = [text[-CONTEXT_NEIGHBOUR_CHARS:] for text in earlier[-CONTEXT_NEIGHBOURS:]]
    return "\n".join([*clipped, content])


def content_hash(content: str) -> str:
    """sha256 of the text, 64 hex digits: what a redacted turn and an earlier version too long to
    keep are left with."""
    return _sha256(content).hexdigest()


def _sha256(content: str) -> hashlib._Hash:
    return hashlib.sha256(content.encode("utf-8"))


# How many bytes of the text's sha256 a note keeps (`note_digest`): enough that two different
# notes of one conversation never share one (a collision needs about 2^64 notes), a quarter of
# the 64 hex digits the column held before schema 24 (bench/README.md, "A note's digest").
NOTE_DIGEST_BYTES = 16


def note_digest(memory: Memory) -> bytes | None:
    """How a retried store finds the note it already stored (``text_digest``). Only notes are
    stored once per conversation; other kinds have none."""
    return text_digest(memory.content) if memory.kind == "note" else None


def text_digest(content: str) -> bytes:
    """The first NOTE_DIGEST_BYTES of the text's sha256."""
    return _sha256(content).digest()[:NOTE_DIGEST_BYTES]


# A turn whose conversation keeps audit-only records, once a summary covers it: its content (and
# context) become "sha256:" and the digest of the text it had, its metadata says so under this key,
# and it is never embedded, nor part of another memory's context. Its role, actor, addressees and
# time stay.
REDACTED = "redacted"


REDACTED_PREFIX = "sha256:"

# The metadata key an imported conversation and turn keep their source's id under
# (services/imports/chats.record_of): what marks one whose delete is remembered (deleted_imports).
SOURCE_ID = "source_id"


def redacted_text(content: str) -> str:
    """What a redacted turn's content (and context) become: the prefix and its text's digest."""
    return REDACTED_PREFIX + content_hash(content)


def is_redacted(memory: Memory) -> bool:
    return REDACTED in memory.metadata


def own_context(memory: Memory) -> bool:
    """Whether a memory's context is its content alone: summaries and facts (not part of the
    transcript's flow) and redacted turns (their text is gone)."""
    return memory.kind in ("summary", "fact") or is_redacted(memory)


def is_retry(latest: Sequence[Memory], batch: Sequence[Memory], since: str) -> bool:
    """Whether ``batch`` repeats the batch of messages a conversation received last, turn for
    turn (role, actor, content, tool calls, addressees), stored at or after ``since``: a client
    that sent the same turns again because an answer was late. ``latest``: the conversation's last
    ``len(batch) + 1`` messages, oldest first. The messages of one batch share their created_at,
    so the repeated turns must be that whole batch, not the end of a longer one. A transcript
    alternates speakers: the same turns twice in a row, minutes apart, are a retry."""
    tail = list(latest[-len(batch):]) if batch else []
    if len(tail) != len(batch) or not tail or tail[0].created_at < since:
        return False
    if any(m.created_at != tail[0].created_at for m in tail):
        return False  # several batches
    if len(latest) > len(tail) and latest[-len(tail) - 1].created_at == tail[0].created_at:
        return False  # the end of a longer batch
    return all(
        (old.role, old.actor, old.content, old.tool_calls, old.tool_call_id, old.metadata.get("to"))
        == (new.role, new.actor, new.content, new.tool_calls, new.tool_call_id, new.metadata.get("to"))
        for old, new in zip(tail, batch, strict=True)
    )

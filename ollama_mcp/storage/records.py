"""Rules every backend applies to the rows it stores and reads (no I/O): how a retried store
recognises a note it already has, how a retried batch of messages is recognised, what a memory's
context is, which memories are a memory's neighbours, what a search naming a time reads of a
memory, what is left of a turn an audit-only retention redacted, how a conversation's relations
read from both directions, and how a text is matched literally."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from ollama_mcp.when import times_named

if TYPE_CHECKING:
    from ollama_mcp.domain import Memory, Relation

# A memory's context is its content preceded by this many earlier memories of its conversation
# (each clipped to its last CONTEXT_NEIGHBOUR_CHARS). Measured on LoCoMo: bench/README.md.
CONTEXT_NEIGHBOURS = 2
CONTEXT_NEIGHBOUR_CHARS = 1000

# A memory's neighbours are the current notes or messages of its conversation just before and just
# after it, by seq: the two columns of this SQL (the same on both backends) for a memory ``m``.
_FLOW = "o.conversation_id = m.conversation_id AND o.kind IN ('note', 'message') AND o.superseded_by IS NULL"
NEIGHBOUR_COLUMNS = (
    f"(SELECT max(o.seq) FROM memories o WHERE {_FLOW} AND o.seq < m.seq),"
    f" (SELECT min(o.seq) FROM memories o WHERE {_FLOW} AND o.seq > m.seq)"
)


# What a search naming a time reads of each candidate (``Storage.moments_by_seq``): when it happened
# and the times its words name (``memories.spoken_of``, written with the row); the text only where
# those were not read yet (a memory stored before they were kept, until the background reads it).
MOMENT_COLUMNS = "m.seq, m.occurred_at, m.spoken_of, CASE WHEN m.spoken_of IS NULL THEN m.content END"


def moment_from_row(row: Sequence[Any]) -> tuple[int, tuple[str, str]]:
    """A memory's seq, and when it happened with the times its words name, from MOMENT_COLUMNS."""
    seq, occurred_at, spoken, content = row
    return int(seq), (occurred_at, spoken if spoken is not None else times_named(content, occurred_at))


def compose_context(earlier: Sequence[str], content: str) -> str:
    """A memory's context: the last CONTEXT_NEIGHBOURS earlier texts, each clipped to its end, then the memory."""
    clipped = [text[-CONTEXT_NEIGHBOUR_CHARS:] for text in earlier[-CONTEXT_NEIGHBOURS:]]
    return "\n".join([*clipped, content])


def content_hash(content: str) -> str:
    """sha256 of the text: how a retried store finds the note it already stored."""
    return hashlib.sha256(content.encode("utf-8")).hexdigest()


# A turn whose conversation keeps audit-only records, once a summary covers it: its content (and
# context) become "sha256:" and the digest of the text it had, its metadata says so under this key,
# and it is never embedded, nor part of another memory's context. Its role, actor, addressees and
# time stay. (The store writes the digest from its content_hash column: the SQL spells the prefix.)
REDACTED = "redacted"
REDACTED_PREFIX = "sha256:"


def is_redacted(memory: Memory) -> bool:
    return REDACTED in memory.metadata


def own_context(memory: Memory) -> bool:
    """Whether a memory's context is its content alone: summaries and facts (not part of the
    transcript's flow) and redacted turns (their text is gone)."""
    return memory.kind in ("summary", "fact") or is_redacted(memory)


# A fact (kind 'fact') keeps its parts in its metadata: subject, predicate, object, confidence,
# exclusive, and the id of the memory it came from under FACT_SOURCE. The store keeps that
# memory's seq beside the row (deleting the source deletes the fact) and finds the current facts
# about one subject and predicate by FACT_KEY.
FACT_SOURCE = "source"
FACT_KEY = "fact_key"


def fact_key(subject: str, predicate: str) -> str:
    """What makes two facts about the same thing: their subject and predicate, case and spacing aside."""
    return f"{' '.join(subject.casefold().split())} | {' '.join(predicate.casefold().split())}"


def fact_source(memory: Memory) -> str | None:
    """The id of the memory a fact came from (None for other kinds)."""
    source = memory.metadata.get(FACT_SOURCE) if memory.kind == "fact" else None
    return source if isinstance(source, str) else None


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


def dump_json(value: dict[str, Any]) -> str:
    """Compact JSON, non-ASCII kept as it is."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def like_escape(text: str) -> str:
    """``text`` matched literally inside a LIKE pattern, backslash being the escape character
    (PostgreSQL's default; SQLite's with ``ESCAPE '\\'``)."""
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


_RELATION_RANK = {"follow_up": 0, "duplicate": 1, "related": 2}


def merge_relations(found: Sequence[Relation]) -> list[Relation]:
    """One relation per other conversation from the rows of both directions: a follow-up before a
    duplicate before a related link, with the best score either row knows; follow-ups first
    (later ones after the one continued), then the others by score."""
    best: dict[str, Relation] = {}
    for relation in found:
        kept = best.get(relation.conversation_id)
        if kept is None:
            best[relation.conversation_id] = relation
            continue
        # The stronger kind wins; between rows of one kind, the one this conversation recorded.
        first = (_RELATION_RANK[relation.kind], not relation.follows) < (_RELATION_RANK[kept.kind], not kept.follows)
        winner, other = (relation, kept) if first else (kept, relation)
        scores = [s for s in (winner.score, other.score) if s is not None]
        best[relation.conversation_id] = replace(winner, score=max(scores) if scores else None)
    return sorted(best.values(), key=lambda r: (
        r.kind != "follow_up", r.kind == "follow_up" and not r.follows, -(r.score or 0.0), r.created_at
    ))


def same_object(a: object, b: object) -> bool:
    """Whether two facts' objects say the same thing, case and spacing aside."""
    return " ".join(str(a).casefold().split()) == " ".join(str(b).casefold().split())


def place_fact(new: Memory, current: Sequence[Memory]) -> tuple[Memory | None, list[str]]:
    """Where a new fact goes among the ``current`` facts of its subject and predicate: ``None``
    when one of them already says it; else the fact to insert and the ids of those it supersedes.

    An exclusive fact (a subject has one value of it at a time: lives in, works at) contradicts
    the current ones with another object: the newer (by when its source was written) supersedes
    the older, so a fact from an older conversation extracted late is stored already superseded
    by the newest current one. Facts that are not exclusive (likes, visited) live side by side.
    """
    if any(same_object(old.metadata.get("object"), new.metadata.get("object")) for old in current):
        return None, []
    if not new.metadata.get("exclusive") or not current:
        return new, []
    newest = max(current, key=lambda m: (m.created_at, m.seq))
    if new.created_at < newest.created_at:
        return replace(new, superseded_by=newest.id), []
    return new, [old.id for old in current]

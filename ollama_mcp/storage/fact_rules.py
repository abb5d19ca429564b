"""Rules for facts (memories of kind 'fact', no I/O): the key of a subject and predicate, the
memory a fact came from, and where a new fact goes among the current ones (a duplicate skipped,
a contradicted one superseded)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ollama_mcp.domain import Memory


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

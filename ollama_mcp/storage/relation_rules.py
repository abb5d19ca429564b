"""How a conversation's relations read from both directions (no I/O)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ollama_mcp.domain import Relation


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

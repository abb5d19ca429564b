"""A search as every door asks it: one frozen ``SearchRequest`` with each field checked."""

from __future__ import annotations

from ollama_mcp.domain import SearchFilters, SearchRequest
from ollama_mcp.errors import InvalidInputError
from ollama_mcp.inputs.fields import (
    MAX_QUERY_CHARS,
    MAX_TOP_K,
    actor,
    conversation_id,
    flag,
    integer,
    kinds,
    project,
    tags,
    text,
    threshold,
    timestamp,
)

# search_request's parameters are named like the tools' (and so like these checks).
_tags, _threshold, _conversation_id, _actor, _project, _kinds = tags, threshold, conversation_id, actor, project, kinds


def search_request(
    query: object,
    conversation_id: object = None,
    top_k: object = 5,
    threshold: object = None,
    tags: object = None,
    since: object = None,
    until: object = None,
    kinds: object = None,
    include_superseded: object = False,
    actor: object = None,
    *,
    everywhere: bool = False,
    related_to: object = None,
    reference_time: object = None,
    project: object = None,
) -> SearchRequest:
    """A search request with every field checked; the first bad field raises. ``kinds``: every
    kind when omitted. ``actor`` keeps the turns of one participant only (messages, which alone
    have one)."""
    by = _actor("actor", actor)
    covered = _kinds("kinds", kinds)
    if by is not None and "message" not in covered:
        raise InvalidInputError("actor", "names a participant, whose turns are messages", 'add "message" to kinds')
    filters = SearchFilters(
        tags=_tags("tags", tags), since=timestamp("since", since), until=timestamp("until", until),
        kinds=covered,
        include_superseded=flag("include_superseded", include_superseded),
        actors=() if by is None else (by,),
    )
    if filters.since and filters.until and filters.since > filters.until:
        raise InvalidInputError("since", "is later than until", "swap them or widen the range")
    return SearchRequest(
        query=_query("query", query),
        top_k=integer("top_k", top_k, 1, MAX_TOP_K),
        threshold=_threshold("threshold", threshold),
        conversation_id=None if everywhere else _conversation_id("conversation_id", conversation_id),
        everywhere=everywhere,
        filters=filters,
        related_to=_conversation_id("related_to", related_to),
        reference_time=timestamp("reference_time", reference_time),
        project=_project("project", project),
    )


LIST_EVERYTHING = ("", "*")  # a query with no words: list what the filters allow, newest first


def _query(field: str, value: object) -> str:
    """A search's text; ``""`` for a listing (``LIST_EVERYTHING``)."""
    if isinstance(value, str) and value.strip() in LIST_EVERYTHING:
        return ""
    return text(field, value, MAX_QUERY_CHARS, what="search text", stored=False).replace("\x00", " ")



"""A conversation's settings and filters as callers give them: the metadata's settings checked
(``conversation_metadata``) and read back (``ConversationSettings``), a new conversation
(``new_conversation``) and list_conversations' query (``conversation_query``)."""

from __future__ import annotations

import difflib
import json
from dataclasses import dataclass, field
from typing import Any

from ollama_mcp.domain import ConversationQuery
from ollama_mcp.errors import InvalidInputError
from ollama_mcp.inputs.fields import (
    MAX_LIST_LIMIT,
    MAX_NAME_CHARS,
    MAX_TTL_HOURS,
    conversation_id,
    integer,
    metadata,
    optional_name,
    project,
    ttl_hours,
)

# A conversation's metadata is the caller's own data, except these keys, which are settings and
# checked as such; a key that looks like a misspelt setting is refused rather than ignored.
CONVERSATION_SETTINGS = (
    "ttl_hours", "compact_after_messages", "compact_after_tokens", "compaction_strategy", "compact_summary_tokens",
    "compaction", "retention", "facts", "memory_ttl_hours", "redact_secrets",
)
# The design's camelCase compaction block, accepted as an alias of the snake_case keys.
COMPACTION_ALIASES = {
    "triggerTurns": "compact_after_messages",
    "triggerTokens": "compact_after_tokens",
    "strategy": "compaction_strategy",
    "summaryTokens": "compact_summary_tokens",
}
# rolling: the oldest half of the transcript is folded into one rolling summary; hierarchical:
# also, once that summary passes compact_summary_tokens, it is kept as a summary of its own and
# the rolling one condensed (a summary of summaries); never: the transcript is sent whole.
COMPACTION_STRATEGIES = ("rolling", "hierarchical", "never")
STRATEGY_ALIASES = {"summarize": "rolling"}  # the name before there were several
# What happens to a turn once a summary (rolling, or the end summary) covers it: full keeps it;
# audit-only keeps who wrote it when, to whom, and the sha256 of its text, but not the text;
# ephemeral deletes it. Notes and summaries are kept in every mode; ttl_hours deletes everything.
RETENTION_MODES = ("full", "audit-only", "ephemeral")
MAX_COMPACT_AFTER = 1_000_000


def conversation_metadata(field: str, value: object) -> dict[str, Any]:
    """``init_conversation``'s metadata with its settings checked: ``ttl_hours``, the compaction
    thresholds (or the ``compaction`` block, rewritten to them) and ``retention``; other keys are
    kept as given unless they look like a misspelt setting."""
    meta = dict(metadata(field, value))
    for key in meta:
        if key not in CONVERSATION_SETTINGS:
            near = difflib.get_close_matches(key.lower(), CONVERSATION_SETTINGS, n=1, cutoff=0.8)
            if near:
                raise InvalidInputError(
                    f"{field}.{key}", "is not a setting", f"did you mean {near[0]}? (other keys are kept as your data)"
                )
    ttl_hours(f"{field}.ttl_hours", meta.get("ttl_hours"))
    ttl_hours(f"{field}.memory_ttl_hours", meta.get("memory_ttl_hours"), "each memory")
    block = meta.pop("compaction", None)
    given_as: dict[str, str] = {}  # a setting given in the compaction block: named as given there
    if block is not None:
        if not isinstance(block, dict):
            raise InvalidInputError(
                f"{field}.compaction", "must be an object", 'pass {"triggerTurns": 40} or leave it out'
            )
        for key, item in block.items():
            where = f"{field}.compaction.{key}"
            if key in COMPACTION_ALIASES:
                if COMPACTION_ALIASES[key] not in meta:
                    meta[COMPACTION_ALIASES[key]] = item
                    given_as[COMPACTION_ALIASES[key]] = where
            elif key == "summarizerModel":
                raise InvalidInputError(
                    where, "is not supported per conversation", "leave it out: summaries use OLLAMA_MCP_CHAT_MODEL"
                )
            else:
                raise InvalidInputError(
                    where, "is not a compaction setting", "use triggerTurns, triggerTokens, strategy or summaryTokens"
                )
    def named(key: str) -> str:
        return given_as.get(key, f"{field}.{key}")

    for key in ("compact_after_messages", "compact_after_tokens"):
        if key in meta:
            meta[key] = integer(named(key), meta[key], 2, MAX_COMPACT_AFTER)
    if "compact_summary_tokens" in meta:
        meta["compact_summary_tokens"] = integer(
            named("compact_summary_tokens"), meta["compact_summary_tokens"], 50, MAX_COMPACT_AFTER
        )
    if "compaction_strategy" in meta:
        given = meta["compaction_strategy"]
        strategy = STRATEGY_ALIASES.get(given, given) if isinstance(given, str) else given
        if strategy not in COMPACTION_STRATEGIES:
            raise InvalidInputError(
                named("compaction_strategy"), f"is {given!r}", f"use one of {', '.join(COMPACTION_STRATEGIES)}"
            )
        meta["compaction_strategy"] = strategy
    if "facts" in meta and not isinstance(meta["facts"], bool):
        raise InvalidInputError(
            f"{field}.facts", f"is {meta['facts']!r}, not true or false",
            "pass true to have the chat model extract facts from this conversation, false to never, or leave it"
            " out for the server's default (OLLAMA_MCP_FACTS)",
        )
    if "redact_secrets" in meta and not isinstance(meta["redact_secrets"], bool):
        raise InvalidInputError(
            f"{field}.redact_secrets", f"is {meta['redact_secrets']!r}, not true or false",
            "pass false to keep this conversation's text verbatim (secrets included), or leave it out to have "
            "secrets replaced as everywhere (unless OLLAMA_MCP_REDACT=off)",
        )
    if "retention" in meta and meta["retention"] not in RETENTION_MODES:
        raise InvalidInputError(
            f"{field}.retention", f"is {meta['retention']!r}",
            f"use one of {', '.join(RETENTION_MODES)} (what is kept of a turn a summary covers),"
            " or ttl_hours to delete the whole conversation after a time",
        )
    return meta


@dataclass(frozen=True)
class ConversationSettings:
    """The settings a conversation's stored metadata holds, each None where it says nothing usable.
    ``conversation_metadata`` checks them on the way in (and refuses what is wrong); this reads
    them back, once, for every reader: metadata stored another way (an import of an older
    export) cannot hold a value the readers then trip on."""

    compact_after_messages: int | None = None
    compact_after_tokens: int | None = None
    compaction_strategy: str | None = None
    compact_summary_tokens: int | None = None
    retention: str | None = None
    facts: bool | None = None
    memory_ttl_hours: float | None = None  # each memory is deleted this long after it was stored
    redact_secrets: bool | None = None  # False: this conversation's text is kept verbatim

    @classmethod
    def of(cls, metadata: dict[str, Any]) -> ConversationSettings:
        def count(key: str, least: int) -> int | None:
            value = metadata.get(key)
            ok = isinstance(value, int) and not isinstance(value, bool) and least <= value <= MAX_COMPACT_AFTER
            return value if ok else None

        strategy, retention, facts = (metadata.get(k) for k in ("compaction_strategy", "retention", "facts"))
        return cls(
            compact_after_messages=count("compact_after_messages", 2),
            compact_after_tokens=count("compact_after_tokens", 2),
            compaction_strategy=strategy if strategy in COMPACTION_STRATEGIES else None,
            compact_summary_tokens=count("compact_summary_tokens", 50),
            retention=retention if retention in RETENTION_MODES else None,
            facts=facts if isinstance(facts, bool) else None,
            memory_ttl_hours=_positive(metadata.get("memory_ttl_hours")),
            redact_secrets=metadata["redact_secrets"] if isinstance(metadata.get("redact_secrets"), bool) else None,
        )


def _positive(value: object) -> float | None:
    ok = isinstance(value, int | float) and not isinstance(value, bool) and 0 < value <= MAX_TTL_HOURS
    return float(value) if ok else None  # type: ignore[arg-type]


def facts_wanted(metadata: dict[str, Any], default: bool) -> bool:
    """Whether a conversation has facts extracted: its ``metadata.facts``, else the server's default."""
    given = ConversationSettings.of(metadata).facts
    return default if given is None else given


def conversation_query(
    status: object = None, limit: object = 20, name: object = None, metadata: object = None,
    order: object = "activity", in_project: object = None,
) -> ConversationQuery:
    """list_conversations' filters and order, each checked."""
    if status not in (None, "active", "completed"):
        raise InvalidInputError("status", "must be 'active' or 'completed'", "pass one of them, or omit it for all")
    if order not in ("activity", "created"):
        raise InvalidInputError("order", "must be 'activity' or 'created'", "omit it for latest activity first")
    fragment = None
    if name is not None:
        if not isinstance(name, str) or not name.strip() or len(name) > MAX_NAME_CHARS:
            raise InvalidInputError("name", "must be a non-empty text", "pass a part of the name, or omit it")
        fragment = name.strip()
    pairs: list[tuple[str, str]] = []
    if metadata is not None:
        if not isinstance(metadata, dict) or not metadata or len(metadata) > 10:
            raise InvalidInputError("metadata", "must be an object of 1-10 keys", 'pass e.g. {"project": "apollo"}')
        for key, value in metadata.items():
            if isinstance(value, dict | list) or value is None:
                raise InvalidInputError(
                    f"metadata.{key}", "must be a text, number or true/false", "match one value per key"
                )
            pairs.append((str(key), json.dumps(value) if isinstance(value, bool) else str(value)))
    return ConversationQuery(
        status=status, name_contains=fragment, metadata=tuple(pairs), order=order,
        limit=integer("limit", limit, 1, MAX_LIST_LIMIT), project=project("project", in_project),
    )




@dataclass(frozen=True)
class NewConversation:
    """A conversation to start, checked: its name, its metadata (settings checked), the
    conversation it continues, and the id a client minted for it (creating it again is a retry)."""

    name: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    follows: str | None = None
    id: str | None = None
    given: tuple[object, ...] = ()  # what the caller sent (name, metadata[, follows]): the write audit's
    ttl_hours: float | None = None  # metadata.ttl_hours: the conversation is deleted this long after it starts

    @property
    def settings(self) -> ConversationSettings:
        return ConversationSettings.of(self.metadata)


def new_conversation(
    name: object = None, metadata: object = None, follows: object = None, conversation_id: object = None
) -> NewConversation:
    """init_conversation's and POST /conversations' fields, checked (``id`` is a client's own)."""
    minted = _conversation_id("id", conversation_id)
    meta = conversation_metadata("metadata", metadata)
    earlier = _conversation_id("follows", follows)
    return NewConversation(
        optional_name("name", name), meta, earlier, minted,
        (name, metadata) if follows is None else (name, metadata, follows),
        ttl_hours("metadata.ttl_hours", meta.get("ttl_hours")),
    )  # (the name is checked last, as it always was: a request wrong twice names the same field)


_conversation_id = conversation_id

"""Checking and normalising caller-supplied values; every refusal names the field and the fix.

The MCP layer's schema catches wrong JSON types; these checks hold the rules a schema cannot
(or that must also hold for callers that are not MCP clients: the agent, the CLI, benchmarks).
Error messages never quote the caller's text, since tool errors are logged.
"""

from __future__ import annotations

import difflib
import json
import math
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from ollama_mcp.config import principal_name
from ollama_mcp.domain import (
    ConversationQuery,
    MemoryKind,
    SearchFilters,
    SearchRequest,
    ShareAccess,
    format_timestamp,
)
from ollama_mcp.errors import ConfigError, InvalidInputError

MAX_QUERY_CHARS = 10_000
MAX_TAGS = 32
MAX_TAG_CHARS = 100
MAX_NAME_CHARS = 500
MAX_METADATA_BYTES = 64 * 1024
MAX_METADATA_DEPTH = 16
MAX_TOP_K = 100
MAX_LIST_LIMIT = 500
MAX_PROJECT_CHARS = 4096  # a path


def text(field: str, value: object, limit: int, *, what: str = "text", stored: bool = True) -> str:
    """A non-blank string of at most ``limit`` characters that every backend can store (or, not
    ``stored``, at least encode)."""
    if not isinstance(value, str):
        raise InvalidInputError(field, f"must be a string, got {type(value).__name__}", f"pass the {what} as a string")
    if not value.strip():
        raise InvalidInputError(field, "is empty", f"pass the {what} to use")
    if len(value) > limit:
        raise InvalidInputError(
            field, f"is {len(value):,} characters long; the limit is {limit:,}", "split it into smaller pieces"
        )
    _encodable(field, value, stored=stored)
    return value


def optional_name(field: str, value: object) -> str | None:
    if value is None:
        return None
    return text(field, value, MAX_NAME_CHARS, what="name").strip()


MAX_ACTOR_CHARS = 200
MAX_ADDRESSEES = 20


def actor(field: str, value: object) -> str | None:
    """A participant's name (a turn's actor, or a role), or None when omitted."""
    name = optional_name(field, value)
    if name is not None and len(name) > MAX_ACTOR_CHARS:
        raise InvalidInputError(field, f"is longer than {MAX_ACTOR_CHARS} characters", "pass a short name")
    return name


def actors(field: str, value: object) -> tuple[str, ...]:
    """Participants' names: a list of 1-20 (a single name is taken as a list of one); () when omitted."""
    if value is None:
        return ()
    given = [value] if isinstance(value, str) else value
    if not isinstance(given, list) or not 0 < len(given) <= MAX_ADDRESSEES:
        raise InvalidInputError(field, f"must be a list of 1-{MAX_ADDRESSEES} names", 'pass e.g. ["dana", "assistant"]')
    names = [actor(f"{field}[{i}]", name) for i, name in enumerate(given)]
    return tuple(dict.fromkeys(name for name in names if name))


def conversation_id(field: str, value: object) -> str | None:
    """A canonical UUID string, or None when omitted."""
    if value is None or value == "":
        return None
    return _uuid(field, value, "use a conversation_id returned by init_conversation or list_conversations, or omit it")


def principal(field: str, value: object) -> str:
    """Another principal's name, as tokens are made for (``config.principal_name``)."""
    fix = "pass the principal a person's token was made for, such as bob (`ollama-mcp token list` shows them)"
    if not isinstance(value, str):
        raise InvalidInputError(field, "must be a text", fix)
    try:
        return principal_name(field, value)
    except ConfigError:
        raise InvalidInputError(
            field, "must be a principal's name: a lowercase letter, then up to 31 lowercase letters, digits or "
            f"underscores; got {value[:40]!r}", fix,
        ) from None


def share_access(field: str, value: object) -> ShareAccess | None:
    """``read`` or ``write``; None for ``none`` (stop sharing)."""
    if value == "none":
        return None
    if value == "read" or value == "write":
        return value
    raise InvalidInputError(
        field,
        "must be 'read', 'write' or 'none'",
        "read lets them search and read it, write also store in it, none stops sharing",
    )


def memory_id(field: str, value: object) -> str:
    if value is None or value == "":
        raise InvalidInputError(field, "is required", "pass a memory_id returned by store_memory or a search")
    return _uuid(field, value, "pass a memory_id returned by store_memory or a search")


def tags(field: str, value: object) -> tuple[str, ...]:
    """Trimmed, de-duplicated tags in the order given."""
    if value is None:
        return ()
    if isinstance(value, str) or not isinstance(value, Sequence):
        raise InvalidInputError(field, "must be a list of strings", 'pass e.g. ["project-x", "decision"]')
    if len(value) > MAX_TAGS:
        raise InvalidInputError(field, f"has {len(value)} tags; the limit is {MAX_TAGS}", "pass fewer tags")
    cleaned: list[str] = []
    for i, tag in enumerate(value):
        if not isinstance(tag, str):
            raise InvalidInputError(
                f"{field}[{i}]", f"must be a string, got {type(tag).__name__}", "pass tags as strings"
            )
        tag = tag.strip()
        if not tag:
            raise InvalidInputError(f"{field}[{i}]", "is empty", "remove it or give it a name")
        if len(tag) > MAX_TAG_CHARS:
            raise InvalidInputError(f"{field}[{i}]", f"is longer than {MAX_TAG_CHARS} characters", "use a shorter tag")
        _encodable(f"{field}[{i}]", tag)
        if tag not in cleaned:
            cleaned.append(tag)
    return tuple(cleaned)


def metadata(field: str, value: object) -> dict[str, Any]:
    """A JSON object of bounded size and depth."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise InvalidInputError(
            field, f"must be a JSON object, got {type(value).__name__}", 'pass e.g. {"source": "chat"}'
        )
    _check_json(field, value)
    try:
        encoded = json.dumps(value, ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise InvalidInputError(
            field, f"cannot be stored as JSON ({exc})", "use only strings, numbers, booleans, null, lists and objects"
        ) from None
    if len(encoded.encode("utf-8")) > MAX_METADATA_BYTES:
        raise InvalidInputError(
            field,
            f"is larger than {MAX_METADATA_BYTES // 1024} KiB as JSON",
            "store large data as memory content instead",
        )
    return value


def integer(field: str, value: object, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        else:
            raise InvalidInputError(field, "must be a whole number", f"pass a number from {low} to {high}")
    if not low <= value <= high:
        raise InvalidInputError(field, f"is {value}, outside {low}..{high}", f"pass a number from {low} to {high}")
    return value


ALL_KINDS: tuple[MemoryKind, ...] = ("note", "message", "summary", "fact")


def kinds(field: str, value: object) -> tuple[MemoryKind, ...]:
    """Which kinds of memory a search covers: every kind when omitted (notes, recorded and
    imported turns, summaries, facts: what was captured is what is recalled); one kind, or a list."""
    if value is None:
        return ALL_KINDS
    given = [value] if isinstance(value, str) else value
    fix = 'pass some of "note", "message", "summary", "fact" (e.g. ["note"]), or omit it for all'
    if not isinstance(given, list | tuple) or not given:
        raise InvalidInputError(field, "must be a kind or a list of kinds", fix)
    chosen: list[MemoryKind] = []
    for i, kind in enumerate(given):
        if kind not in ALL_KINDS:
            shown = repr(kind)[:40]
            raise InvalidInputError(f"{field}[{i}]" if len(given) > 1 else field, f"is {shown}, not a kind", fix)
        chosen.append(kind)
    return tuple(kind for kind in ALL_KINDS if kind in chosen)


def flag(field: str, value: object) -> bool:
    if value is None:
        return False
    if not isinstance(value, bool):
        raise InvalidInputError(field, "must be true or false", "pass a boolean, or omit it")
    return value


MAX_TTL_HOURS = 24 * 365 * 100


def ttl_hours(field: str, value: object, what: str = "the conversation") -> float | None:
    """A time to live in hours (positive), or None to keep it: the conversation's, or (``what``)
    each of its memories'."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= MAX_TTL_HOURS:
        start = "it starts" if what == "the conversation" else "it is stored"
        raise InvalidInputError(
            field, f"must be a number of hours above 0 and at most {MAX_TTL_HOURS}",
            f"pass e.g. 24 to delete {what} a day after {start}, or leave it out to keep it",
        )
    return float(value)


# A conversation's metadata is the caller's own data, except these keys, which are settings and
# checked as such; a key that looks like a misspelt setting is refused rather than ignored.
CONVERSATION_SETTINGS = (
    "ttl_hours", "compact_after_messages", "compact_after_tokens", "compaction_strategy", "compact_summary_tokens",
    "compaction", "retention", "facts", "memory_ttl_hours",
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
        )


def _positive(value: object) -> float | None:
    ok = isinstance(value, int | float) and not isinstance(value, bool) and 0 < value <= MAX_TTL_HOURS
    return float(value) if ok else None  # type: ignore[arg-type]


def facts_wanted(metadata: dict[str, Any], default: bool) -> bool:
    """Whether a conversation has facts extracted: its ``metadata.facts``, else the server's default."""
    given = ConversationSettings.of(metadata).facts
    return default if given is None else given


def project(field: str, value: object) -> str | None:
    """A project as a filter: the folder a conversation's ``metadata.project`` names (a path, as
    hooks and Claude Code imports file it), or just that folder's name. A trailing separator is
    dropped, so ``/work/app/`` and ``/work/app`` are one project."""
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip() or len(value) > MAX_PROJECT_CHARS:
        raise InvalidInputError(
            field, f"must be a non-empty text of at most {MAX_PROJECT_CHARS} characters",
            "pass the project's folder name (e.g. \"ollama-mcp\") or its path, or omit it",
        )
    stripped = value.strip()
    return stripped.rstrip("/\\") or stripped


def conversation_query(
    status: object, limit: object, name: object, metadata: object, order: object, in_project: object = None
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


def threshold(field: str, value: object) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise InvalidInputError(field, "must be a finite number", "pass a similarity from -1 to 1, or omit it")
    if not -1.0 <= value <= 1.0:
        raise InvalidInputError(
            field, f"is {value}, outside -1..1", "pass a cosine similarity from -1 to 1 (0.5 is a moderate match)"
        )
    return float(value)


def timestamp(field: str, value: object) -> str | None:
    """An ISO 8601 date or date-time (UTC when no zone is given), in the stored format."""
    moment = _moment(field, value)
    return None if moment is None else format_timestamp(moment)


def _moment(field: str, value: object) -> datetime | None:
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise InvalidInputError(
            field, "must be a string", 'pass an ISO 8601 date or time such as "2026-01-31" or "2026-01-31T09:00:00Z"'
        )
    try:
        moment = datetime.fromisoformat(value.strip())
    except ValueError:
        raise InvalidInputError(
            field, "is not an ISO 8601 date or time", 'pass e.g. "2026-01-31" or "2026-01-31T09:00:00Z"'
        ) from None
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment


EARLIEST_OCCURRENCE = datetime(1900, 1, 1, tzinfo=UTC)
OCCURRENCE_LEEWAY = timedelta(days=1)  # clocks and time zones differ; a week ahead is a mistake


def occurred_at(field: str, value: object) -> str:
    """When a memory happened: an ISO 8601 date or time from 1900 on and at most a day ahead; ""
    when not given (a ``Memory`` then happened when it was stored)."""
    moment = _moment(field, value)
    if moment is None:
        return ""
    if moment < EARLIEST_OCCURRENCE:
        raise InvalidInputError(field, "is before 1900", "pass when it happened, or leave it out for now")
    if moment > datetime.now(UTC) + OCCURRENCE_LEEWAY:
        raise InvalidInputError(
            field, "is more than a day in the future", "pass when it happened, or leave it out for now"
        )
    return format_timestamp(moment)


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


def _uuid(field: str, value: object, fix: str) -> str:
    if not isinstance(value, str):
        raise InvalidInputError(field, "must be a string", fix)
    try:
        return str(uuid.UUID(value.strip()))
    except ValueError:
        raise InvalidInputError(field, "is not a valid id", fix) from None


def _encodable(field: str, value: str, *, stored: bool = True) -> None:
    """Text every backend can store: valid UTF-8 and, when ``stored``, no NUL character
    (PostgreSQL's text and jsonb cannot hold U+0000, and one rule on both backends keeps a
    memory portable between them). A search query (not stored) may contain NULs: they never match."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidInputError(
            field, "contains an unpaired UTF-16 surrogate, which cannot be stored", "send valid Unicode text"
        ) from None
    if stored and "\x00" in value:
        raise InvalidInputError(field, "contains a NUL character (U+0000), which cannot be stored", "remove it")


def _check_json(field: str, root: object) -> None:
    """Depth and key checks without recursion (a deeply nested value must not crash us)."""
    stack: list[tuple[object, int]] = [(root, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > MAX_METADATA_DEPTH:
            raise InvalidInputError(field, f"is nested deeper than {MAX_METADATA_DEPTH} levels", "flatten it")
        if isinstance(node, dict):
            for key, child in node.items():
                if not isinstance(key, str):
                    raise InvalidInputError(field, "has a key that is not a string", "use string keys")
                _encodable(field, key)
                stack.append((child, depth + 1))
        elif isinstance(node, list):
            stack.extend((child, depth + 1) for child in node)
        elif isinstance(node, str):
            _encodable(field, node)
        elif isinstance(node, float) and not math.isfinite(node):
            raise InvalidInputError(field, "contains NaN or infinity", "use finite numbers")

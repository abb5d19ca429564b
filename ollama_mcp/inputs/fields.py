"""One caller-supplied field checked and normalised; every refusal names the field and the fix.

The use-cases' values (``inputs.memories``, ``inputs.conversations``, ``inputs.turns``,
``inputs.context``, ``inputs.search``) are built from these at each door, once. The MCP layer's
schema catches wrong JSON types; these checks hold the rules a schema cannot (or that must also
hold for callers that are not MCP clients: the agent, the CLI, benchmarks). Error messages never
quote the caller's text, since tool errors are logged.
"""

from __future__ import annotations

import json
import math
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from ollama_mcp.config import principal_name
from ollama_mcp.domain import (
    MemoryKind,
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


def required_conversation_id(field: str, value: object, fix: str) -> str:
    """A conversation's id that must be given; ``fix`` says which conversation to pass."""
    found = conversation_id(field, value)
    if found is None:
        raise InvalidInputError(field, "is required", fix)
    return found

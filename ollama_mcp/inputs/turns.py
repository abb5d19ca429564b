"""Chat turns as callers send them (add_messages' list, a REST turn, a streamed turn's start),
checked once at the door into ``Turn`` values: the one place a turn's shape is written. The
transcript stores them as they are (``services.turns.message_of``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ollama_mcp.config import DEFAULT_MAX_CONTENT_CHARS
from ollama_mcp.domain import Role
from ollama_mcp.errors import InvalidInputError
from ollama_mcp.inputs.fields import actor, actors, metadata, occurred_at, text

ROLES: tuple[Role, ...] = ("user", "assistant", "system", "tool")
MAX_TURNS = 100  # per add_messages call
MAX_TOOL_CALLS = 32
MAX_TOOL_CALL_ID_CHARS = 200
_TURN_KEYS = frozenset({
    "role", "content", "actor", "to", "tool_calls", "tool_call_id", "occurred_at", "tokens", "model", "adapter",
    "metadata",
})
MAX_TOKENS = 10**9
MAX_LABEL_CHARS = 200  # a model's or an adapter's name


@dataclass(frozen=True)
class Turn:
    """One turn of add_messages, checked."""

    role: Role
    content: str
    actor: str | None
    tool_calls: tuple[dict[str, Any], ...]
    tool_call_id: str | None
    to: tuple[str, ...] = ()  # addressed to these participants only; () is to everyone
    occurred_at: str = ""  # when it was said, if not now (a transcript recorded late)
    # What wrote it, kept in the message's metadata: {"tokens": {"prompt": n, "completion": n},
    # "model": ..., "adapter": ...}, each only when given.
    produced: tuple[tuple[str, Any], ...] = ()
    metadata: dict[str, Any] = field(default_factory=dict)  # the app's own (APP_METADATA)


def parse_turns(field: str, value: object, max_chars: int = DEFAULT_MAX_CONTENT_CHARS) -> list[Turn]:
    """add_messages' turns, each checked, with the failing one named (``messages[2].role``)."""
    shape = '[{"role": "user", "content": "..."}, {"role": "assistant", "content": "..."}]'
    if not isinstance(value, list) or not value:
        raise InvalidInputError(field, "must be a non-empty list of turns", f"pass e.g. {shape}")
    if len(value) > MAX_TURNS:
        raise InvalidInputError(
            field, f"holds {len(value)} turns, more than {MAX_TURNS}", "send them in several calls, in order"
        )
    turns = []
    for index, item in enumerate(value):
        if not isinstance(item, dict):
            raise InvalidInputError(
                f"{field}[{index}]", "must be an object with role and content", f"pass e.g. {shape}"
            )
        turns.append(parse_turn(f"{field}[{index}].", item, max_chars))
    return turns


def parse_turn(at: str, item: dict[str, Any], max_chars: int = DEFAULT_MAX_CONTENT_CHARS) -> Turn:
    """One turn checked, its fields named with the prefix ``at`` (``messages[2].``, or none)."""
    unknown = sorted(set(item) - _TURN_KEYS)
    if unknown:
        raise InvalidInputError(
            f"{at}{unknown[0]}", "is not a field of a turn", f"use only {', '.join(sorted(_TURN_KEYS))}"
        )
    role = item.get("role")
    if role not in ROLES:
        raise InvalidInputError(f"{at}role", f"must be one of {', '.join(ROLES)}", "pass who spoke")
    calls = item.get("tool_calls") or []
    if not isinstance(calls, list) or len(calls) > MAX_TOOL_CALLS or not all(isinstance(c, dict) for c in calls):
        raise InvalidInputError(
            f"{at}tool_calls",
            f"must be a list of at most {MAX_TOOL_CALLS} objects",
            "pass the calls as the model made them",
        )
    said = item.get("content")
    if role == "assistant" and calls and (said is None or said == ""):
        content = ""  # a turn that only calls tools, as OpenAI and Ollama send it (content null or "")
    else:
        content = text(f"{at}content", said, max_chars, what="message text")
    speaker = actor(f"{at}actor", item.get("actor"))
    to = actors(f"{at}to", item.get("to"))
    if calls:
        metadata(f"{at}tool_calls", {"calls": calls})  # JSON a store can keep, within its limits
    call_id = item.get("tool_call_id")
    if call_id is not None and (not isinstance(call_id, str) or not 0 < len(call_id) <= MAX_TOOL_CALL_ID_CHARS):
        raise InvalidInputError(
            f"{at}tool_call_id",
            f"must be a text of 1-{MAX_TOOL_CALL_ID_CHARS} characters",
            "pass the id of the call it answers",
        )
    happened = occurred_at(f"{at}occurred_at", item.get("occurred_at"))
    own = metadata(f"{at}metadata", item.get("metadata"))
    return Turn(role, content, speaker, tuple(calls), call_id, to, happened, produced_of(at, item), own)


def produced_of(at: str, item: dict[str, Any]) -> tuple[tuple[str, Any], ...]:
    """The turn's tokens, model and adapter, each checked."""
    produced: list[tuple[str, Any]] = []
    tokens = item.get("tokens")
    if tokens is not None:
        shape = '{"prompt": 812, "completion": 95}'
        if not isinstance(tokens, dict) or not tokens or set(tokens) - {"prompt", "completion"}:
            raise InvalidInputError(
                f"{at}tokens", "must be an object of prompt and/or completion", f"pass e.g. {shape}"
            )
        for key, count in tokens.items():
            if isinstance(count, bool) or not isinstance(count, int) or not 0 <= count <= MAX_TOKENS:
                raise InvalidInputError(
                    f"{at}tokens.{key}", f"must be a whole number from 0 to {MAX_TOKENS:,}", f"pass e.g. {shape}"
                )
        produced.append(("tokens", dict(tokens)))
    for key in ("model", "adapter"):
        value = item.get(key)
        if value is None:
            continue
        if not isinstance(value, str) or not value.strip() or len(value) > MAX_LABEL_CHARS:
            raise InvalidInputError(
                f"{at}{key}", f"must be a text of 1-{MAX_LABEL_CHARS} characters",
                'pass its name, e.g. "qwen2.5:7b"' if key == "model" else 'pass its name, e.g. "openai-chat"',
            )
        produced.append((key, value.strip()))
    return tuple(produced)




def turn(value: object, max_chars: int = DEFAULT_MAX_CONTENT_CHARS) -> Turn:
    """One turn given on its own (the REST API's), its fields named as they are (``content``)."""
    if not isinstance(value, dict):
        raise InvalidInputError("turn", "must be an object with role and content", "pass the turn as an object")
    return parse_turn("", value, max_chars)


def turn_to_open(value: object, max_chars: int = DEFAULT_MAX_CONTENT_CHARS) -> dict[str, Any]:
    """A streamed turn's fields at its start, checked as any turn's (role, actor, to, model...),
    its text still empty: what the store keeps until the turn is committed."""
    if not isinstance(value, dict):
        raise InvalidInputError("turn", "must be an object with role", "pass the turn as an object")
    fields = {k: v for k, v in value.items() if k not in ("content", "tokens", "occurred_at")}
    if value.get("content"):
        raise InvalidInputError("content", "must be empty when the turn is opened", "send the text with append")
    parse_turn("", {**fields, "content": "."}, max_chars)
    return fields

"""Chat turns as callers send them to ``add_messages``: checked and normalised (``Turn``), and
the message memory each becomes. No I/O: the lifecycle stores what this returns."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from ollama_mcp import inputs
from ollama_mcp.domain import Memory, Role
from ollama_mcp.errors import InvalidInputError

ROLES: tuple[Role, ...] = ("user", "assistant", "system", "tool")
MAX_TURNS = 100  # per add_messages call
MAX_TOOL_CALLS = 32
MAX_TOOL_CALL_ID_CHARS = 200
RETRY_WINDOW = timedelta(minutes=10)  # the same turns again within this are a client's retry
_TURN_KEYS = frozenset({
    "role", "content", "actor", "to", "tool_calls", "tool_call_id", "occurred_at", "tokens", "model", "adapter",
    "metadata",
})
# The app's own metadata of a turn, kept under this key of the message's metadata: apart from the
# keys the product itself keeps there (to, tokens, source_id, redacted...), so none can collide.
APP_METADATA = "app"
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


def parse_turns(field: str, value: object, max_chars: int) -> list[Turn]:
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


def parse_turn(at: str, item: dict[str, Any], max_chars: int) -> Turn:
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
        content = inputs.text(f"{at}content", said, max_chars, what="message text")
    actor = inputs.actor(f"{at}actor", item.get("actor"))
    to = inputs.actors(f"{at}to", item.get("to"))
    if calls:
        inputs.metadata(f"{at}tool_calls", {"calls": calls})  # JSON a store can keep, within its limits
    call_id = item.get("tool_call_id")
    if call_id is not None and (not isinstance(call_id, str) or not 0 < len(call_id) <= MAX_TOOL_CALL_ID_CHARS):
        raise InvalidInputError(
            f"{at}tool_call_id",
            f"must be a text of 1-{MAX_TOOL_CALL_ID_CHARS} characters",
            "pass the id of the call it answers",
        )
    happened = inputs.occurred_at(f"{at}occurred_at", item.get("occurred_at"))
    own = inputs.metadata(f"{at}metadata", item.get("metadata"))
    return Turn(role, content, actor, tuple(calls), call_id, to, happened, produced_of(at, item), own)


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


def message_of(conversation_id: str, turn: Turn, created_at: str) -> Memory:
    """A transcript message of ``turn``, ready to insert."""
    return Memory(
        id=str(uuid.uuid4()), seq=0, conversation_id=conversation_id, kind="message", content=turn.content, tags=(),
        metadata={**({"to": list(turn.to)} if turn.to else {}), **dict(turn.produced),
                  **({APP_METADATA: turn.metadata} if turn.metadata else {})}, created_at=created_at,
        role=turn.role, actor=turn.actor,
        tool_calls=turn.tool_calls, tool_call_id=turn.tool_call_id, occurred_at=turn.occurred_at,
    )

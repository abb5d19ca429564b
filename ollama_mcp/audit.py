"""The write audit's context: which door a write came through (set where each caller enters: the
MCP tools, the REST API, the agent's tool calls, retention, imports, the browser view, Claude
Code's hooks, background jobs; the CLI is the default), and the record of the write about to be
made, which the store's next write transaction takes and inserts itself, so a write and its
record commit together or not at all. No I/O."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Literal

from ollama_mcp import caller
from ollama_mcp.domain import WriteRecord, utc_now
from ollama_mcp.redaction import Found, describe

# Who, beside the door: ``caller.actor()``.
Door = Literal["tool", "agent", "cli", "import", "retention", "ui", "hook", "rest", "background"]

_door: ContextVar[Door] = ContextVar("ollama_mcp_door", default="cli")
_pending: ContextVar[WriteRecord | None] = ContextVar("ollama_mcp_pending_record", default=None)


def current_door() -> Door:
    return _door.get()


@contextmanager
def through(door: Door) -> Iterator[None]:
    """Writes inside come through ``door``."""
    token = _door.set(door)
    try:
        yield
    finally:
        _door.reset(token)


@contextmanager
def recording(
    action: str, conversation_id: str | None = None, memory_id: str | None = None, *, arguments: object = None,
    redacted: Found = (),
) -> Iterator[None]:
    """The first write transaction inside inserts the record of this write (``memory_id``: the id
    the write was given; ``arguments``: kept only as a digest, of the text as stored, so after its
    secrets were replaced; ``redacted``: what was, by kind and count), as part of itself."""
    token = _pending.set(WriteRecord(
        at=utc_now(), door=current_door(), principal=caller.actor(), action=action, conversation_id=conversation_id,
        memory_id=memory_id,
        arguments_digest=None if arguments is None else digest(arguments), redacted=describe(redacted) or None,
    ))
    try:
        yield
    finally:
        _pending.reset(token)


def take_pending() -> WriteRecord | None:
    """For a store's write transaction: the record it must insert (once), if any."""
    write = _pending.get()
    if write is not None:
        _pending.set(None)
    return write


def digest(arguments: object) -> str:
    """sha256 of the canonical JSON of ``arguments``: proves what was asked without keeping it."""
    canonical = json.dumps(arguments, sort_keys=True, ensure_ascii=False, default=str)
    # surrogatepass: a lone surrogate the caller sent (refused later, naming its field) still has a
    # digest; digesting it must not be what fails (REST answered 500 for a name of "\ud800").
    return hashlib.sha256(canonical.encode("utf-8", "surrogatepass")).hexdigest()

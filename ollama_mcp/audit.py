"""Which door a write came through, for the write audit: one context variable set where each
caller enters (the MCP tools, the agent's tool calls, retention, imports; the CLI is the default),
read by ``MemoryService`` when it records a write. Holds no I/O and imports nothing of ours."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Literal

Door = Literal["tool", "agent", "cli", "import", "retention"]

_door: ContextVar[Door] = ContextVar("ollama_mcp_door", default="cli")


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


def digest(arguments: object) -> str:
    """sha256 of the canonical JSON of ``arguments``: proves what was asked without keeping it."""
    canonical = json.dumps(arguments, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()

"""Rules every backend applies to the rows it stores and reads (no I/O): how a retried store
recognises a note it already has, what a memory's context is, and how a text is matched literally."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from typing import Any

# A memory's context is its content preceded by this many earlier memories of its conversation
# (each clipped to its last CONTEXT_NEIGHBOUR_CHARS). Measured on LoCoMo: bench/README.md.
CONTEXT_NEIGHBOURS = 2
CONTEXT_NEIGHBOUR_CHARS = 1000


def compose_context(earlier: Sequence[str], content: str) -> str:
    """A memory's context: the last CONTEXT_NEIGHBOURS earlier texts, each clipped to its end, then the memory."""
    clipped = [text[-CONTEXT_NEIGHBOUR_CHARS:] for text in earlier[-CONTEXT_NEIGHBOURS:]]
    return "\n".join([*clipped, content])


def content_hash(content: str) -> str:
    """sha256 of the text: how a retried store finds the note it already stored."""
    return hashlib.sha256(content.encode("utf-8")).hexdigest()


def dump_json(value: dict[str, Any]) -> str:
    """Compact JSON, non-ASCII kept as it is."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def like_escape(text: str) -> str:
    """``text`` matched literally inside a LIKE pattern, backslash being the escape character
    (PostgreSQL's default; SQLite's with ``ESCAPE '\\'``)."""
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")

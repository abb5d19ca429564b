"""JSON from outside read with a ceiling on its nesting, checked before anything is built.

Python's parser recurses per level: 100,000 nested ``[`` in a 200 KB upload ended in a
``RecursionError`` (a 500, and a traceback in the log) or, on the way there, in gigabytes of
half-built lists. ``loads`` scans the text once for brackets outside strings (bounded memory,
linear time) and refuses a document nested deeper than ``MAX_DEPTH`` before parsing it. Nothing the
product reads needs more: a REST body's deepest field (a turn's tool call arguments) and every
export format we import nest well under it.
"""

from __future__ import annotations

import json
import re
from typing import Any

MAX_DEPTH = 64
# A string (skipped whole, escapes and all) or a bracket: the only tokens that change the depth.
_TOKENS = re.compile(rb'"(?:[^"\\]|\\.)*"|[\[\]{}]', re.DOTALL)
_TEXT_TOKENS = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}]', re.DOTALL)


class Refused(ValueError):
    """JSON from outside refused before it was built; the message says why ("is ...")."""


class TooDeep(Refused):
    """A JSON document nested deeper than the ceiling; the message says how deep it went."""


class TooLarge(Refused):
    """A JSON document (a line of a JSON lines file) longer than the ceiling its reader keeps."""


def depth_exceeds(data: bytes | str, limit: int = MAX_DEPTH) -> int | None:
    """The offset where ``data`` goes past ``limit`` levels of nesting, or None when it stays within."""
    tokens = _TOKENS if isinstance(data, bytes) else _TEXT_TOKENS
    depth = 0
    for match in tokens.finditer(data):  # type: ignore[arg-type]
        token = match.group(0)
        first = token[0] if isinstance(token, str) else chr(token[0])
        if first in "[{":
            depth += 1
            if depth > limit:
                return match.start()
        elif first in "]}":
            depth -= 1
    return None


def loads(data: bytes | str | Refused, limit: int = MAX_DEPTH) -> Any:
    """``json.loads`` of ``data``, refused (``TooDeep``) when nested deeper than ``limit``; a
    reader hands on what it refused already (``TooLarge``) to be raised in its place."""
    if isinstance(data, Refused):
        raise data
    at = depth_exceeds(data, limit)
    if at is not None:
        raise TooDeep(f"nested deeper than {limit} levels (at character {at:,}); nothing the server reads is that deep")
    return json.loads(data)

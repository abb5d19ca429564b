"""What a JSON reply stopped by ``num_predict`` had finished.

A schema-constrained reply cut at its token cap is JSON up to the cut: ``{"facts": [{...}, {...},
{"subj``. Its complete values are kept: the text up to the last value that ended inside a list or
an object, with the brackets still open closed. The caller decides whether what is left is enough
(the facts listed before the cut are; a summary cut before its ``summary`` ends is not).
"""

from __future__ import annotations

import json
from typing import Any

_CLOSE = {"{": "}", "[": "]"}


def completed(raw: str) -> Any | None:
    """The reply's complete part as a value, or None when nothing complete was written."""
    whole = _load(raw)
    if whole is not None:
        return whole
    stack: list[str] = []
    ends: list[tuple[int, str]] = []  # where a complete member ends, and the brackets still open there
    in_string = escaped = False
    for index, char in enumerate(raw):
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "{[":
            stack.append(char)
        elif char in "}]" and stack:
            stack.pop()
            ends.append((index + 1, "".join(stack)))
        elif char == "," and stack:
            ends.append((index, "".join(stack)))  # a comma follows a complete value
    for end, still_open in reversed(ends[-200:]):
        value = _load(raw[:end] + "".join(_CLOSE[c] for c in reversed(still_open)))
        if value is not None:
            return value
    return None


def _load(text: str) -> Any | None:
    try:
        return json.loads(text)
    except ValueError:
        return None

"""Tool calls a small model wrote as text instead of as tool calls.

Ollama turns a reply into ``tool_calls`` only when the model wraps the call in its template's
tags (Qwen's ``<tool_call>``). Qwen2.5-Coder 1.5B, asked with tools, writes the call as a bare
JSON object, or in a fenced ``json`` block, and Ollama hands it back as the answer's text
(bench/README.md, #84). A reply whose whole text is such a call, or a list of them, is read here
as the calls it names; anything else (an answer that merely contains JSON) stays text.

The 0.5B, given the search made for it, writes that same call again and again until its token
cap: ``{"name": ...} {"name": ...} {"name": "sea``. Calls one after another are calls too, and
an object the cap cut short after them is left out.
"""

from __future__ import annotations

import json
import re
from typing import Any

_WRAPPED = re.compile(
    r"^\s*(?:<tool_call>\s*(?P<tagged>.*?)\s*</tool_call>|```(?:json)?\s*(?P<fenced>.*?)\s*```|(?P<bare>.*?))\s*$",
    re.DOTALL,
)


def calls_in_text(text: str) -> list[tuple[str, dict[str, Any]]] | None:
    """(name, arguments) of each call the whole ``text`` makes, or None when it is not calls."""
    match = _WRAPPED.match(text)  # (its last branch matches any text)
    body = next((g for g in match.group("tagged", "fenced", "bare") if g), "") if match else ""
    if not body.startswith(("{", "[")):
        return None
    items = _values(body)
    calls = [_call(item) for item in items or ()]
    if not calls or any(call is None for call in calls):
        return None
    return [call for call in calls if call is not None]


def _values(body: str) -> list[object] | None:
    """The JSON values ``body`` holds one after another (a list's items each a value), less an
    object cut short at the end; None when anything else is in it."""
    decoder = json.JSONDecoder()
    values: list[object] = []
    at = 0
    while at < len(body):
        try:
            value, at = decoder.raw_decode(body, at)
        except ValueError:
            return values if values and body[at] == "{" else None  # the call the token cap cut
        values.extend(value if isinstance(value, list) else [value])
        while at < len(body) and body[at].isspace():
            at += 1
    return values


def _call(item: object) -> tuple[str, dict[str, Any]] | None:
    """One call: an object with a name and its arguments (``parameters`` in some models' words),
    nothing else beside them."""
    if not isinstance(item, dict) or not isinstance(item.get("name"), str) or not item["name"].strip():
        return None
    arguments = item.get("arguments", item.get("parameters", {}))
    if isinstance(arguments, str):  # OpenAI's habit: the arguments as JSON text
        try:
            arguments = json.loads(arguments)
        except ValueError:
            return None
    if not isinstance(arguments, dict) or set(item) - {"name", "arguments", "parameters"}:
        return None
    return item["name"].strip(), arguments

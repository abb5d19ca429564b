"""A tool call's arguments held to the tool's schema, in the words of our other errors.

The SDK validates arguments with the tool's pydantic model, which ignores names it does not know
and words its refusals for Python developers ("1 validation error for store_memoryArguments ...
For further information visit https://errors.pydantic.dev/..."). A model that wrote
``conversation`` for ``conversation_id`` had its memory filed in the current conversation
without a word; one that wrote ``limit`` for ``top_k`` got ten results and no hint. Here:

- ``unknown_arguments``: a name the tool does not take is refused, with the names it takes, and
  nothing is done (REST refuses an unknown field the same way). A tool that takes no arguments
  ignores what it is sent: some clients send a placeholder argument to such tools.
- ``plain_refusal``: the SDK's validation error, one line per field: the field, what is wrong,
  and what to pass, from the tool's published schema.
- ``unknown_name``: a tool (or prompt) name this server does not have, with the names it has.

``CompactServer`` holds prompts to the same rules.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any

from pydantic import ValidationError

_SHOWN_VALUE_CHARS = 40  # of a refused value, quoted back (it is the caller's own input)
# Arguments the tools took once, with what to do instead (a client may still hold an old list).
RETIRED = {
    "include_messages": (
        'turns are searched by default now; leave it out, or pass kind ("note", "message", ...) to narrow'
    ),
}


def unknown_arguments(tool: str, takes: Sequence[str], arguments: Mapping[str, Any]) -> str | None:
    """The refusal of names ``tool`` does not take (it takes ``takes``), or None when every name
    is one of them or it takes none."""
    unknown = [name for name in arguments if name not in takes]
    if not takes or not unknown:
        return None
    if len(unknown) == 1 and unknown[0] in RETIRED:
        return f"{unknown[0]}: is no longer an argument of {tool}: {RETIRED[unknown[0]]}. Nothing was done."
    verb = "is not an argument" if len(unknown) == 1 else "are not arguments"
    hint = f" (did you mean {close}?)" if len(unknown) == 1 and (close := _closest(unknown[0], takes)) else ""
    return (
        f"{', '.join(unknown)}: {verb} of {tool}{hint}; it takes {', '.join(takes)}. Nothing was done; call it "
        "again with those names."
    )


def plain_refusal(published: Mapping[str, Any], error: ValidationError) -> str:
    """Each field the SDK's validation refused, with what is wrong and, from the tool's published
    schema (``compact_schema``'s: a nullable type is a list of types), what to pass."""
    properties = published.get("properties") or {}
    lines: list[str] = []
    for item in error.errors():
        loc = list(item.get("loc", ()))
        field = "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in loc).lstrip(".")
        field = field or "arguments"  # (messages[0].role, as our own checks name a turn's fields)
        if item.get("type") == "missing":
            said = "is required"
        else:
            said = _lowered(str(item.get("msg", "is not valid")).removeprefix("Input "))
            if "input" in item and not isinstance(item["input"], dict | list):
                said += f" (got {_shown(item['input'])})"
        wanted = _wanted(properties.get(str(loc[0]))) if len(loc) == 1 else None
        line = f"{field}: {said}" + (f"; pass {wanted}" if wanted else "")
        if line not in lines:
            lines.append(line)
    return "; ".join(lines[:5]) + ". Nothing was done."


def unknown_name(name: str, names: Collection[str], kind: str) -> str:
    """A tool or prompt (``kind``) this server does not have, with the ``names`` it has."""
    hint = f" (did you mean {close}?)" if (close := _closest(name, names)) else ""
    return f"{name!r} is not a {kind} of this server{hint}; its {kind}s are {', '.join(names)}."


def _closest(name: str, choices: Collection[str]) -> str | None:
    import difflib  # noqa: PLC0415  (2 ms, only on a refusal: this module loads before initialize is answered)

    found = difflib.get_close_matches(name, list(choices), n=1, cutoff=0.6)
    return found[0] if found else None


def _wanted(prop: Any) -> str | None:
    """What a property of the published schema takes, in words."""
    if not isinstance(prop, Mapping):
        return None
    if isinstance(prop.get("enum"), list):
        return "one of " + ", ".join(repr(v) for v in prop["enum"] if v is not None)
    kinds = prop.get("type")
    items = prop.get("items")
    item = items.get("type") if isinstance(items, Mapping) else None
    words = [
        f"a list of {_PLURALS[item]}" if kind == "array" and item in _PLURALS else _TYPE_WORDS.get(kind, kind)
        for kind in ([kinds] if isinstance(kinds, str) else kinds or []) if kind != "null"
    ]
    return " or ".join(words) or None


_TYPE_WORDS = {
    "string": "a string", "integer": "a whole number", "number": "a number", "boolean": "true or false",
    "array": "a list", "object": "a JSON object",
}
_PLURALS = {"string": "strings", "integer": "whole numbers", "number": "numbers", "object": "objects"}


def _lowered(text: str) -> str:
    return text[:1].lower() + text[1:]


def _shown(value: object) -> str:
    text = repr(value)
    return text if len(text) <= _SHOWN_VALUE_CHARS else text[: _SHOWN_VALUE_CHARS - 3] + "..."

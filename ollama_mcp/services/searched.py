"""What a search that found nothing says: that memory holds nothing on it, and what it looked
through (conversations, and memories of each kind), so that a model never reads an empty list as
"nothing was searched" and a person sees where to look instead."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ollama_mcp.domain import MemoryKind, counted

_NAMES: dict[str, tuple[str, str]] = {
    "note": ("note", "notes"),
    "message": ("recorded turn", "recorded turns"),
    "summary": ("summary", "summaries"),
    "fact": ("fact", "facts"),
}
NOTHING = "Memory holds nothing on this"
ORDER: tuple[MemoryKind, ...] = ("message", "note", "summary", "fact")


def nothing_found(
    conversations: int, by_kind: Mapping[str, int], kinds: Sequence[MemoryKind], tags: Sequence[str] = ()
) -> str:
    """The notice of a search that found nothing among ``conversations`` holding ``by_kind``
    memories of the ``kinds`` (and ``tags``) it covered."""
    said = _searched(conversations, by_kind, kinds)
    if tags and any(by_kind.values()):
        said += ' Query "*" lists every memory that carries these tags, newest first.'
    return said


def _searched(conversations: int, by_kind: Mapping[str, int], kinds: Sequence[MemoryKind]) -> str:
    if not conversations:
        return f"{NOTHING}: there is nothing to search here yet" + (
            "." if len(kinds) == len(ORDER) else f" of kind {', '.join(kinds)}; leave kinds out to search every kind."
        )
    parts = [counted(by_kind.get(kind, 0), *_NAMES[kind]) for kind in ORDER if kind in kinds]
    said = f"{NOTHING}: searched {counted(conversations, 'conversation', 'conversations')}"
    said += f" ({', '.join(parts)})."
    if len(kinds) < len(ORDER):
        said += " Leave kinds out to search every kind."
    return said

"""Anthropic's content blocks, as Claude.ai exports and Claude Code transcripts hold them: text is
kept as the message's words; a ``tool_use`` becomes a short tool turn saying what was called with
what, a ``tool_result`` one saying what came back (each at most ``TOOL_CHARS``); ``thinking`` and
``redacted_thinking`` are left out; anything else (an image, a document) is a placeholder naming
its type."""

from __future__ import annotations

from typing import Any

from ollama_mcp.services.imports.chats import TOOL_CHARS, Role, Turn, clipped, one_line

LEFT_OUT = {"thinking", "redacted_thinking"}


def turns_of_blocks(message_id: str, role: Role, blocks: list[Any], at: str | None) -> list[Turn]:
    """The turns one message's blocks make: its words as one turn of ``role``, then one tool turn
    per tool call or result, in order."""
    words: list[str] = []
    tools: list[Turn] = []
    for i, block in enumerate(blocks):
        if isinstance(block, str):
            words.append(block)
            continue
        if not isinstance(block, dict):
            continue
        kind = block.get("type")
        if kind == "text" and isinstance(block.get("text"), str):
            words.append(block["text"])
        elif kind == "tool_use":
            name = block.get("name") or "a tool"
            tools.append(Turn(f"{message_id}#{i}", "tool", clipped(f"called {name} {_short(block.get('input'))}",
                                                                   TOOL_CHARS), at, metadata={"tool": name}))
        elif kind == "tool_result":
            tools.append(Turn(f"{message_id}#{i}", "tool", clipped(f"result: {_short(block.get('content'))}",
                                                                   TOOL_CHARS), at))
        elif kind not in LEFT_OUT and kind:
            words.append(f"[{kind}]")
    text = "\n".join(w for w in words if w.strip()).strip()
    return ([Turn(message_id, role, clipped(text), at)] if text else []) + tools


def _short(value: object) -> str:
    """A tool's input or result on one line: its text, or its JSON."""
    if isinstance(value, list):  # a result's blocks
        value = " ".join(b.get("text", "") if isinstance(b, dict) else str(b) for b in value)
    return one_line(value)

"""A Claude.ai data export's ``conversations.json``: a list of conversations (``uuid``, ``name``,
``created_at``, ``chat_messages``), each message with ``uuid``, ``sender`` (human, assistant),
``created_at`` and its words in ``content`` blocks (text, tool_use, tool_result, thinking) or,
in older exports, ``text``. Text is kept, a tool call or result becomes a short tool turn, and
thinking is left out."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from ollama_mcp.services.imports.blocks import turns_of_blocks
from ollama_mcp.services.imports.chats import Chat, Malformed, Role, Skipped, Turn, clipped, each_conversation, iso

SENDERS: dict[str, Role] = {"human": "user", "user": "user", "assistant": "assistant"}


def chats(conversations: Iterable[object]) -> Iterator[Chat | Skipped]:
    return each_conversation(conversations, ("uuid",), _chat)


def _chat(raw: dict[str, Any], source_id: str) -> Chat:
    messages = raw.get("chat_messages")
    if not isinstance(messages, list):
        raise Malformed("has no list of chat_messages")
    turns = [turn for i, message in enumerate(messages) for turn in _turns(i, message)]
    name = raw.get("name")
    return Chat("claude.ai", source_id, name if isinstance(name, str) else None, iso(raw.get("created_at")), turns)


def _turns(index: int, message: object) -> list[Turn]:
    if not isinstance(message, dict):
        return []
    role = SENDERS.get(message.get("sender"))  # type: ignore[arg-type]
    if role is None:
        return []
    message_id = str(message.get("uuid") or f"#{index}")
    at = iso(message.get("created_at"))
    content: Any = message.get("content")
    if isinstance(content, list) and content:
        return turns_of_blocks(message_id, role, content, at)
    text = message.get("text")
    return [Turn(message_id, role, clipped(text.strip()), at)] if isinstance(text, str) and text.strip() else []

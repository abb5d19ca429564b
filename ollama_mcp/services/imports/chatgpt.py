"""A ChatGPT data export's ``conversations.json``: a list of conversations, each a tree of
messages in ``mapping`` (id → {message, parent, children}). Edits and regenerations are
branches; the conversation as its owner last saw it is the branch ending at ``current_node``,
read from there up to the root and imported in order.

Per message: ``author.role`` (user, assistant, system, tool), ``create_time`` in epoch seconds,
``content.content_type`` with ``parts`` (strings; anything else, such as an image, becomes a short
placeholder naming its type) or ``text`` (code, execution output). Empty and hidden messages (the
system prompt, custom instructions) are left out.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from ollama_mcp.services.imports.chats import Chat, Malformed, Role, Skipped, Turn, clipped, each_conversation, epoch

ROLES: dict[str, Role] = {"user": "user", "assistant": "assistant", "system": "system", "tool": "tool"}
LEFT_OUT_TYPES = {"user_editable_context", "model_editable_context"}  # custom instructions, memory


def chats(conversations: Iterable[object]) -> Iterator[Chat | Skipped]:
    return each_conversation(conversations, ("conversation_id", "id"), _chat)


def _chat(raw: dict[str, Any], source_id: str) -> Chat:
    mapping = raw.get("mapping")
    if not isinstance(mapping, dict) or not mapping:
        raise Malformed("has no mapping of messages")
    node_id = raw.get("current_node")
    if not isinstance(node_id, str) or node_id not in mapping:
        raise Malformed("its current_node is not one of its messages")
    branch: list[dict[str, Any]] = []
    seen: set[str] = set()
    while isinstance(node_id, str):
        if node_id in seen:
            raise Malformed("its messages' parents form a loop")
        seen.add(node_id)
        node = mapping.get(node_id)
        if not isinstance(node, dict):
            raise Malformed(f"message {node_id} is missing from its mapping")
        branch.append(node)
        node_id = node.get("parent")
    turns = [turn for node in reversed(branch) if (turn := _turn(node)) is not None]
    title = raw.get("title")
    return Chat("chatgpt", source_id, title if isinstance(title, str) else None, epoch(raw.get("create_time")), turns)


def _turn(node: dict[str, Any]) -> Turn | None:
    message = node.get("message")
    if not isinstance(message, dict):
        return None  # the tree's root
    author = message.get("author")
    role = ROLES.get(str(author.get("role"))) if isinstance(author, dict) else None
    metadata = message.get("metadata")
    if role is None or (isinstance(metadata, dict) and metadata.get("is_visually_hidden_from_conversation")):
        return None
    text = _text(message.get("content"))
    if not text:
        return None
    message_id = message.get("id") or node.get("id")
    return Turn(str(message_id), role, clipped(text), epoch(message.get("create_time")))


def _text(content: object) -> str:
    if not isinstance(content, dict):
        return ""
    kind = content.get("content_type")
    if kind in LEFT_OUT_TYPES:
        return ""
    parts = content.get("parts")
    if isinstance(parts, list):
        pieces = []
        for part in parts:
            if isinstance(part, str):
                pieces.append(part)
            elif isinstance(part, dict):
                pieces.append(f"[{part.get('content_type') or part.get('type') or 'attachment'}]")
        return "\n".join(p for p in pieces if p.strip()).strip()
    text = content.get("text") or content.get("result")
    return text.strip() if isinstance(text, str) else ""

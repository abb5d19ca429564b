"""What every foreign format is read into, and how it becomes conversations of ours.

A reader (``chatgpt``, ``claude_ai``, ``claude_code``, ``memory_server``) yields one ``Chat`` per
conversation it could read, or a ``Skipped`` naming where and why. ``record_of`` turns a chat
into an export ``ConversationRecord`` whose ids are derived from the source's own ids, so the
store's idempotent import adds nothing on a second run and only the new turns of a newer export.
Imported conversations are ended (status completed): they are past chats, never a client's
current one. A turn's ``occurred_at`` is its original time; ``created_at`` is when it was imported
(so retention counts from the import, not from a chat of three years ago).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

from ollama_mcp import json_depth
from ollama_mcp.domain import Conversation, Memory, MemoryKind, format_timestamp, headline
from ollama_mcp.services.export import ConversationRecord
from ollama_mcp.storage.memory_rules import SOURCE_ID

Source = Literal["chatgpt", "claude.ai", "claude-code", "memory-server", "codex", "gemini"]
Role = Literal["user", "assistant", "system", "tool"]
# Ids of ours are UUIDv5 of the source's ids under this namespace: the same source id, the same id.
NAMESPACE = uuid.UUID("6f0c7a52-8d1e-4c3b-9f8a-2b7e5d1c4a90")
MAX_TURN_CHARS = 100_000  # a longer turn is cut, marked (OLLAMA_MCP_MAX_CONTENT_CHARS' default)
TOOL_CHARS = 300  # a tool call or result is kept as a short line: what was run, what came back


@dataclass(frozen=True)
class Turn:
    source_id: str  # unique within its chat
    role: Role
    content: str
    at: str | None  # the original time, in the stored format; None: unknown
    kind: MemoryKind = "message"
    tags: tuple[str, ...] = ()
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Chat:
    source: Source
    source_id: str
    title: str | None
    created_at: str | None
    turns: list[Turn]
    metadata: dict[str, Any] = field(default_factory=dict)  # e.g. the project of a Claude Code session

    @property
    def last_at(self) -> str | None:
        times = [t.at for t in self.turns if t.at]
        return max(times) if times else self.created_at


@dataclass(frozen=True)
class Skipped:
    where: str  # "conversation 12 (id abc)", "line 40"
    reason: str


def json_lines(name: str, lines: Iterable[str | json_depth.Refused]) -> Iterator[tuple[int, Any] | Skipped]:
    """Each non-empty line of the JSON lines file ``name``, parsed, with its number (counted as the
    file counts them: a reader's ids may depend on it); a line that is not JSON, or that the reading
    refused (nested too deep, too long), as a Skipped naming it (``where``). What every reader of a
    ``.jsonl`` format reads its lines with."""
    for number, line in enumerate(lines, 1):
        if isinstance(line, str) and not line.strip():
            continue
        try:
            yield number, json_depth.loads(line)
        except json_depth.Refused as exc:
            yield Skipped(where(name, number), f"is {exc}")
        except json.JSONDecodeError as exc:
            yield Skipped(where(name, number), f"is not JSON ({exc.msg})")


def one_line(value: object) -> str:
    """A tool's input or result on one line: its text, else its JSON."""
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    return " ".join(text.split())


def where(name: str, number: int) -> str:
    """How a skipped line is named: ``<name> line 12``."""
    return f"{name} line {number}"


class Malformed(Exception):
    """A conversation a reader cannot use; the message is the reason its Skipped gives."""


def each_conversation(
    conversations: Iterable[object], id_keys: tuple[str, ...], read: Callable[[dict[str, Any], str], Chat]
) -> Iterator[Chat | Skipped]:
    """The chats of an export's list of conversations: ``read(raw, its id)`` for each object with
    a text id under the first of ``id_keys`` it has; anything else, or a ``Malformed`` from
    ``read``, is skipped and named by its place in the list (and its id, when it has one)."""
    for index, raw in enumerate(conversations):
        where = f"conversation {index + 1}"
        if not isinstance(raw, dict):
            yield Skipped(where, "is not an object")
            continue
        source_id = next((raw[k] for k in id_keys if isinstance(raw.get(k), str) and raw[k]), None)
        if source_id is None:
            yield Skipped(where, f"has no {id_keys[0]}")
            continue
        try:
            yield read(raw, source_id)
        except Malformed as exc:
            yield Skipped(f"{where} (id {source_id})", str(exc))


def epoch(value: object) -> str | None:
    """Epoch seconds (ChatGPT's create_time) in the stored format; None when absent or unusable."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        return format_timestamp(datetime.fromtimestamp(float(value), UTC))
    except (OverflowError, OSError, ValueError):
        return None


def iso(value: object) -> str | None:
    """An ISO 8601 time (Claude's exports) in the stored format; None when absent or unusable."""
    if not isinstance(value, str) or not value:
        return None
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return format_timestamp(moment if moment.tzinfo else moment.replace(tzinfo=UTC))


def clipped(text: str, limit: int = MAX_TURN_CHARS) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def was_cut(text: str) -> bool:
    """Whether ``text`` is a turn ``clipped`` cut at ``MAX_TURN_CHARS`` (as an export's string cut
    while it streamed by, ``long_strings``, always is next)."""
    return len(text) == MAX_TURN_CHARS and text.endswith("…")


def our_id(*parts: str) -> str:
    return str(uuid.uuid5(NAMESPACE, "\x1f".join(parts)))


def conversation_id(chat: Chat) -> str:
    return our_id(chat.source, chat.source_id)


def record_of(chat: Chat, now: str) -> ConversationRecord:
    """``chat`` as an export record with ids derived from the source's: importing it again adds
    nothing; a later export of the same chat adds only its new turns."""
    cid = conversation_id(chat)
    first = next((t.content for t in chat.turns if t.role == "user" and t.kind == "message"), None)
    title = chat.title.strip() if chat.title and chat.title.strip() else (headline(first) if first else None)
    conversation = Conversation(
        key=0, id=cid, name=title[:500] if title else None, status="completed", anonymous=False,
        created_at=chat.created_at or chat.last_at or now, ended_at=chat.last_at or chat.created_at or now,
        metadata={"source": chat.source, SOURCE_ID: chat.source_id, **chat.metadata},
    )
    memories = [
        Memory(
            id=our_id(chat.source, chat.source_id, turn.source_id), seq=0, conversation_id=cid, kind=turn.kind,
            content=turn.content, tags=turn.tags, metadata={SOURCE_ID: turn.source_id, **turn.metadata},
            created_at=now, role=turn.role if turn.kind == "message" else None,
            occurred_at=turn.at or conversation.created_at,
        )
        for turn in chat.turns
    ]
    return ConversationRecord(conversation, memories, None)

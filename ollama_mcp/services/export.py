"""The export format (JSON and Markdown) of conversations, and reading it back for import.

Pure functions over domain values: no I/O. The JSON keeps every id, every version (with the
``superseded_by`` chain) and every message, but no vectors: they belong to one embedding model
and are recomputed after an import, in the background.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from ollama_mcp.domain import Conversation, Memory, Superseded, utc_now
from ollama_mcp.errors import InvalidInputError
from ollama_mcp.inputs import fields
from ollama_mcp.services.passages import passage
from ollama_mcp.storage.fact_rules import FACT_KEY, FACT_SOURCE, fact_key

FORMAT = "ollama-mcp-export"
VERSION = 1
PAGE_ITEMS = 100  # memories and messages per page of an export or resource read, at most
# What an item costs on a page besides its text, in characters (times, ids, roles; JSON's keys).
ITEM_OVERHEAD = {"markdown": 60, "json": 250}


@dataclass(frozen=True)
class ConversationRecord:
    """One conversation read from an export: the conversation, its memories in order, and the
    id of the last message its rolling summary covers."""

    conversation: Conversation
    memories: list[Memory]
    summarized_through_id: str | None


def conversation_json(conversation: Conversation, memories: Sequence[Memory]) -> dict[str, Any]:
    through = next(
        (m.id for m in reversed(memories) if m.kind == "message" and m.seq <= conversation.summarized_through), None
    )
    return {
        "id": conversation.id, "name": conversation.name, "status": conversation.status,
        "anonymous": conversation.anonymous, "metadata": conversation.metadata,
        "created_at": conversation.created_at, "ended_at": conversation.ended_at,
        "summary": conversation.summary, "summary_status": conversation.summary_status,
        "rolling_summary": conversation.rolling_summary, "summarized_through_id": through,
        "expires_at": conversation.expires_at,
        "memories": [memory_json(m) for m in memories],
    }


def memory_json(memory: Memory) -> dict[str, Any]:
    record: dict[str, Any] = {
        "id": memory.id, "kind": memory.kind, "content": memory.content, "tags": list(memory.tags),
        "metadata": memory.metadata, "created_at": memory.created_at, "occurred_at": memory.occurred_at,
    }
    for key in ("role", "actor", "tool_call_id", "superseded_by"):
        if getattr(memory, key) is not None:
            record[key] = getattr(memory, key)
    if memory.tool_calls:
        record["tool_calls"] = list(memory.tool_calls)
    return record


def document(conversations: list[dict[str, Any]], exported_at: str) -> dict[str, Any]:
    return {"format": FORMAT, "version": VERSION, "exported_at": exported_at, "conversations": conversations}


def markdown(
    conversation: Conversation, memories: Sequence[Memory], page: int, pages: int,
    changed: Mapping[str, Superseded] | None = None,
) -> str:
    """One page of a conversation as Markdown: header, summaries, notes and transcript; a
    statement a later one superseded (``changed``, by memory id) says by which, when and why."""
    changed = changed or {}
    lines = [f"# {conversation.name or 'Conversation'}", ""]
    facts = [
        f"id: {conversation.id}", f"status: {conversation.status}", f"started: {_when(conversation.created_at)}",
    ]
    if conversation.ended_at:
        facts.append(f"ended: {_when(conversation.ended_at)}")
    if conversation.expires_at:
        facts.append(f"expires: {_when(conversation.expires_at)}")
    lines += [" · ".join(facts), ""]
    if page == 1:
        if conversation.summary:
            lines += ["## Summary", "", conversation.summary, ""]
        if conversation.rolling_summary:
            lines += ["## Summary of the earlier transcript", "", conversation.rolling_summary, ""]
    notes = [m for m in memories if m.kind != "message"]
    messages = [m for m in memories if m.kind == "message"]
    if notes:
        lines += ["## Memories", ""]
        for m in notes:
            extra = []
            if m.tags:
                extra.append("tags: " + ", ".join(m.tags))
            if m.superseded_by:
                extra.append(f"replaced by {m.superseded_by}")
            if m.id in changed:
                extra.append(_changed(changed[m.id]))
            suffix = f" ({'; '.join(extra)})" if extra else ""
            kind = "" if m.kind == "note" else f"[{m.kind}] "
            lines.append(f"- {_when(m.occurred_at)} {kind}{_one_line(m.content)}{suffix} `{m.id}`")
        lines.append("")
    if messages:
        lines += ["## Transcript", ""]
        for m in messages:
            who: str = m.role or "user"
            if m.actor:
                who += f" ({m.actor})"
            lines += [f"**{who}** · {_when(m.occurred_at)}", "", m.content, ""]
            if m.id in changed:
                lines += [f"_{_changed(changed[m.id])}_", ""]
    if pages > 1:
        lines.append(f"_Page {page} of {pages}._" + (f" Next: page {page + 1}." if page < pages else ""))
    return "\n".join(lines).rstrip() + "\n"


def _changed(superseded: Superseded) -> str:
    """A superseded statement's line of history: the newer statement's id and time, and why."""
    newer = superseded.by
    return f"superseded on {_when(newer.occurred_at)} by `{newer.id}`: {superseded.grounds}"


def clipped(memory: Memory, allowance: int) -> Memory:
    """``memory`` as a page shows it: whole when its text fits ``allowance`` characters, else its
    start, cut at ``passages.MARK``, with how to read the rest."""
    if len(memory.content) <= allowance:
        return memory
    hint = f" (read_memory memory_id={memory.id} reads all {len(memory.content):,} characters)"
    head = passage(memory.content, "", max(allowance - len(hint), 1)).text
    return replace(memory, content=head + hint)


def read_document(data: object) -> list[ConversationRecord]:
    """Check an export document field by field; every error names the path of the bad field."""
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise InvalidInputError("format", f"is not {FORMAT!r}", "pass a file written by `ollama-mcp export`")
    if data.get("version") != VERSION:
        raise InvalidInputError(
            "version", f"is {data.get('version')!r}; this version reads {VERSION}", "upgrade ollama-mcp"
        )
    raw = data.get("conversations")
    if not isinstance(raw, list):
        raise InvalidInputError("conversations", "must be a list", "pass an export document")
    return [_read_conversation(f"conversations[{i}]", item) for i, item in enumerate(raw)]


def _read_conversation(path: str, raw: object) -> ConversationRecord:
    if not isinstance(raw, dict):
        raise InvalidInputError(path, "must be an object", "pass an export document")
    conversation_id = _uuid(f"{path}.id", raw.get("id"))
    status = raw.get("status")
    if status not in ("active", "completed"):
        raise InvalidInputError(f"{path}.status", "must be 'active' or 'completed'", "fix the file")
    summary_status = raw.get("summary_status", "none")
    if summary_status not in ("none", "given", "pending", "done", "failed"):
        raise InvalidInputError(f"{path}.summary_status", "is not a known status", "fix the file")
    conversation = Conversation(
        key=0, id=conversation_id, name=fields.optional_name(f"{path}.name", raw.get("name")), status=status,
        anonymous=bool(raw.get("anonymous", False)), created_at=_time(f"{path}.created_at", raw.get("created_at")),
        ended_at=_optional_time(f"{path}.ended_at", raw.get("ended_at")),
        metadata=fields.metadata(f"{path}.metadata", raw.get("metadata")),
        summary=_optional_text(f"{path}.summary", raw.get("summary")),
        summary_status="failed" if summary_status == "pending" else summary_status,
        rolling_summary=_optional_text(f"{path}.rolling_summary", raw.get("rolling_summary")),
        expires_at=_optional_time(f"{path}.expires_at", raw.get("expires_at")),
    )
    memories_raw = raw.get("memories", [])
    if not isinstance(memories_raw, list):
        raise InvalidInputError(f"{path}.memories", "must be a list", "fix the file")
    memories: list[Memory] = []
    sources: set[str] = set()  # the notes and turns listed so far: what a fact may come from
    for i, item in enumerate(memories_raw):
        memory = _read_memory(f"{path}.memories[{i}]", item, conversation_id)
        if memory.kind == "fact":
            memory = _read_fact(f"{path}.memories[{i}].metadata", memory, sources)
        else:
            sources.add(memory.id)
        memories.append(memory)
    through = raw.get("summarized_through_id")
    return ConversationRecord(
        conversation, memories, None if through is None else _uuid(f"{path}.summarized_through_id", through)
    )


def _read_memory(path: str, raw: object, conversation_id: str) -> Memory:
    if not isinstance(raw, dict):
        raise InvalidInputError(path, "must be an object", "fix the file")
    kind = raw.get("kind", "note")
    if kind not in ("note", "message", "summary", "fact"):
        raise InvalidInputError(f"{path}.kind", "must be note, message, summary or fact", "fix the file")
    role = raw.get("role")
    if role not in (None, "user", "assistant", "system", "tool"):
        raise InvalidInputError(f"{path}.role", "must be user, assistant, system or tool", "fix the file")
    tool_calls = raw.get("tool_calls") or []
    if not isinstance(tool_calls, list) or not all(isinstance(c, dict) for c in tool_calls):
        raise InvalidInputError(f"{path}.tool_calls", "must be a list of objects", "fix the file")
    superseded = raw.get("superseded_by")
    return Memory(
        id=_uuid(f"{path}.id", raw.get("id")),
        seq=0,
        conversation_id=conversation_id,
        kind=kind,
        content=fields.text(f"{path}.content", raw.get("content"), 10_000_000, what="memory text"),
        tags=fields.tags(f"{path}.tags", raw.get("tags")),
        metadata=fields.metadata(f"{path}.metadata", raw.get("metadata")),
        created_at=_time(f"{path}.created_at", raw.get("created_at")),
        role=role,
        actor=fields.optional_name(f"{path}.actor", raw.get("actor")),
        tool_calls=tuple(tool_calls),
        tool_call_id=_optional_text(f"{path}.tool_call_id", raw.get("tool_call_id")),
        superseded_by=None if superseded is None else _uuid(f"{path}.superseded_by", superseded),
        # An export written before occurred_at existed: the memory happened when it was stored.
        occurred_at=fields.occurred_at(f"{path}.occurred_at", raw.get("occurred_at")),
    )


def _read_fact(path: str, fact: Memory, earlier: set[str]) -> Memory:
    """A fact needs its parts and the memory it came from, listed before it in its conversation
    (a fact is stored beside its source, and deleted with it)."""
    for part in ("subject", "predicate", "object"):
        if not isinstance(fact.metadata.get(part), str) or not fact.metadata[part].strip():
            raise InvalidInputError(f"{path}.{part}", "is missing from a fact", "fix the file")
    source = _uuid(f"{path}.{FACT_SOURCE}", fact.metadata.get(FACT_SOURCE))
    if source not in earlier:
        raise InvalidInputError(
            f"{path}.{FACT_SOURCE}", "names no note or message listed before the fact in its conversation",
            "keep the memory the fact came from in the file, before the fact, or leave the fact out",
        )
    key = fact_key(fact.metadata["subject"], fact.metadata["predicate"])
    return replace(fact, metadata={**fact.metadata, FACT_SOURCE: source, FACT_KEY: key})


def _uuid(field: str, value: object) -> str:
    found = fields.conversation_id(field, value)
    if found is None:
        raise InvalidInputError(field, "is missing", "every record needs its id")
    return found


def _time(field: str, value: object) -> str:
    found = fields.timestamp(field, value)
    if found is None:
        raise InvalidInputError(field, "is missing", "pass an ISO 8601 time")
    return found


def _optional_time(field: str, value: object) -> str | None:
    return None if value is None else _time(field, value)


def _optional_text(field: str, value: object) -> str | None:
    return None if value is None else fields.text(field, value, 10_000_000)


def _when(timestamp: str) -> str:
    return timestamp[:16].replace("T", " ")


def _one_line(text: str) -> str:
    return " ".join(text.split())


def dumps(data: object) -> str:
    return json.dumps(data, ensure_ascii=False, indent=1)


def document_of(found: list[tuple[Conversation, list[Memory]]]) -> dict[str, Any]:
    """The export document of these conversations with their memories, stamped now."""
    return document([conversation_json(c, m) for c, m in found], utc_now())

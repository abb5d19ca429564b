"""Gemini CLI sessions: one file a session in ``~/.gemini/tmp/<project>/chats/``, as Gemini CLI's
chat recording service writes them: ``session-<time>-<id>.jsonl`` (0.4x and later) or ``.json``
(earlier). The project folder's ``.project_root`` holds the project's path (its project, as the
hooks file Claude Code's).

A ``.jsonl`` file is a log: its first line the session's metadata (``sessionId``, ``projectHash``,
``startTime``), then each message as it was recorded and again each time it changed (the last
record of an id wins), ``{"$set": {...}}`` updates of the metadata (``messages`` among them replaces
them all) and ``{"$rewindTo": id}`` (the user rewound: that message and the ones after it go). A
``.json`` file is the whole record at once, its ``messages`` a list. A message of type ``user``
or ``gemini`` is a turn (its ``content`` a text or parts with ``text``; the user messages Gemini
CLI itself ignores, ``NOT_SAID``, are left out); a gemini message's
``toolCalls`` become short tool turns (what was called with what, what came back); ``info``,
``error`` and ``warning`` messages (the CLI's own notices) and thoughts are left out.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from typing import Any

from ollama_mcp import json_depth
from ollama_mcp.services.imports.chats import TOOL_CHARS, Chat, Role, Skipped, Turn, clipped, iso
from ollama_mcp.services.projects import project_of

ROLES: dict[str, Role] = {"user": "user", "gemini": "assistant"}
# A user message Gemini CLI itself does not count as one (``isIgnoredUserContent``): the context it
# puts first, what its hooks add, and its own commands (``/help``, ``?``).
NOT_SAID = ("<session_context>", "<hook_context>", "/", "?")


def session(name: str, lines: Iterable[str | json_depth.Refused], project_root: str | None = None) -> Iterator[
        Chat | Skipped]:
    """The session in the lines of the file ``name`` (a ``.jsonl`` log, or a ``.json`` record on
    one line or several); ``project_root``: its project folder's ``.project_root``."""
    meta: dict[str, Any] = {}
    messages: dict[str, dict[str, Any]] = {}
    buffered: list[str] = []  # a .json record over several lines
    for number, line in enumerate(lines, 1):
        if isinstance(line, str) and not line.strip():
            continue
        try:
            record = json_depth.loads(line)
        except json_depth.Refused as exc:
            yield Skipped(f"{name} line {number}", f"is {exc}")
            continue
        except json.JSONDecodeError as exc:
            if isinstance(line, str) and (buffered or number == 1):
                buffered.append(line)
                continue
            yield Skipped(f"{name} line {number}", f"is not JSON ({exc.msg})")
            continue
        if isinstance(record, dict):
            _apply(record, meta, messages)
    if buffered:
        try:
            record = json_depth.loads("".join(buffered))
        except (json_depth.Refused, json.JSONDecodeError) as exc:
            yield Skipped(name, f"is not a Gemini CLI session ({exc})")
            return
        if isinstance(record, dict):
            _apply(record, meta, messages)
    session_id = meta.get("sessionId")
    if not isinstance(session_id, str) or not session_id or meta.get("kind") == "subagent":
        return
    turns = [turn for message in messages.values() for turn in _turns(message)]
    metadata: dict[str, Any] = {"session_id": session_id}
    if project_root:
        metadata |= {"project": project_of(project_root), "cwd": project_root}
    title = meta.get("summary") if isinstance(meta.get("summary"), str) else None
    yield Chat("gemini", session_id, title, iso(meta.get("startTime")), turns, metadata)


def _apply(record: dict[str, Any], meta: dict[str, Any], messages: dict[str, dict[str, Any]]) -> None:
    """One record of the log (or the whole ``.json`` record) applied as Gemini CLI applies it."""
    if isinstance(record.get("$rewindTo"), str):
        ids = list(messages)
        if record["$rewindTo"] in messages:
            for gone in ids[ids.index(record["$rewindTo"]):]:
                del messages[gone]
        else:
            messages.clear()
        return
    if isinstance(record.get("$set"), dict):
        update = record["$set"]
        if isinstance(update.get("messages"), list):
            messages.clear()
            _add(update["messages"], messages)
        meta.update({k: v for k, v in update.items() if k != "messages"})
        return
    if isinstance(record.get("sessionId"), str) and isinstance(record.get("projectHash"), str):
        meta.update({k: v for k, v in record.items() if k != "messages"})
        if isinstance(record.get("messages"), list):
            _add(record["messages"], messages)
        return
    if isinstance(record.get("id"), str):
        messages[record["id"]] = record


def _add(listed: list[Any], messages: dict[str, dict[str, Any]]) -> None:
    for message in listed:
        if isinstance(message, dict) and isinstance(message.get("id"), str):
            messages[message["id"]] = message


def _turns(message: dict[str, Any]) -> list[Turn]:
    role = ROLES.get(str(message.get("type")))
    if role is None:
        return []
    message_id, at = str(message["id"]), iso(message.get("timestamp"))
    text = _text_of(message.get("content")).strip()
    if role == "user" and text.startswith(NOT_SAID):
        return []
    turns = [Turn(message_id, role, clipped(text), at)] if text else []
    for i, call in enumerate(message.get("toolCalls") or []):
        if not isinstance(call, dict):
            continue
        name = str(call.get("name") or "a tool")
        turns.append(Turn(f"{message_id}#{i}", "tool", clipped(f"called {name} {_short(call.get('args'))}",
                                                                 TOOL_CHARS), at, metadata={"tool": name}))
        if call.get("result") is not None:
            turns.append(Turn(f"{message_id}#{i}r", "tool", clipped(f"result: {_short(call.get('result'))}",
                                                                      TOOL_CHARS), at))
    return turns


def _text_of(content: object) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p["text"] for p in content if isinstance(p, dict) and isinstance(p.get("text"), str))
    if isinstance(content, dict) and isinstance(content.get("text"), str):
        return str(content["text"])
    return ""


def _short(value: object) -> str:
    if not isinstance(value, str):
        value = json.dumps(value, ensure_ascii=False, default=str)
    return " ".join(value.split())

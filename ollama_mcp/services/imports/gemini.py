"""Gemini CLI sessions: one file a session in ``~/.gemini/tmp/<project>/chats/``, as Gemini CLI's
chat recording service writes them: ``session-<time>-<id>.jsonl`` (0.4x and later) or ``.json``
(earlier). The project folder's ``.project_root`` holds the project's path (its project, as the
hooks file Claude Code's).

A ``.jsonl`` file is a log (``session``): its first line the session's metadata (``sessionId``,
``projectHash``, ``startTime``), then each message as it was recorded and again each time it
changed (the last record of an id wins), ``{"$set": {...}}`` updates of the metadata (``messages``
among them replaces them all) and ``{"$rewindTo": id}`` (the user rewound: that message and the
ones after it go). A ``.json`` file is the whole record at once, its ``messages`` a list
(``record``). A message of type ``user`` or ``gemini`` is a turn (its ``content`` a text or
parts with ``text``; the user messages Gemini CLI itself ignores, ``NOT_SAID``, are left out); a
gemini message's ``toolCalls`` become short tool turns (what was called with what, what came
back); ``info``, ``error`` and ``warning`` messages (the CLI's own notices) and thoughts are left
out.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from ollama_mcp import json_depth
from ollama_mcp.services.imports.chats import TOOL_CHARS, Chat, Role, Skipped, Turn, clipped, iso, json_lines, one_line
from ollama_mcp.services.projects import project_of

ROLES: dict[str, Role] = {"user": "user", "gemini": "assistant"}
# A user message Gemini CLI itself does not count as one (``isIgnoredUserContent``): the context it
# puts first, what its hooks add, and its own commands (``/help``, ``?``).
NOT_SAID = ("<session_context>", "<hook_context>", "/", "?")


def session(name: str, lines: Iterable[str | json_depth.Refused], project_root: str | None = None) -> Iterator[
        Chat | Skipped]:
    """The session in the lines of the ``.jsonl`` log ``name``; ``project_root``: its project
    folder's ``.project_root``."""
    meta: dict[str, Any] = {}
    messages: dict[str, dict[str, Any]] = {}
    for read in json_lines(name, lines):
        if isinstance(read, Skipped):
            yield read
        elif isinstance(read[1], dict):
            _apply(read[1], meta, messages)
    yield from _chat(meta, messages, project_root)


def record(document: dict[str, Any], project_root: str | None = None) -> Iterator[Chat]:
    """The session a ``.json`` file holds whole (``document``, as JSON gave it)."""
    meta: dict[str, Any] = {}
    messages: dict[str, dict[str, Any]] = {}
    _apply(document, meta, messages)
    yield from _chat(meta, messages, project_root)


def _chat(meta: dict[str, Any], messages: dict[str, dict[str, Any]], project_root: str | None) -> Iterator[Chat]:
    session_id = meta.get("sessionId")
    if not isinstance(session_id, str) or not session_id or meta.get("kind") == "subagent":
        return
    turns = [turn for message in messages.values() for turn in _turns(message)]
    metadata: dict[str, Any] = {"session_id": session_id}
    if project_root:
        metadata |= {"project": project_of(project_root), "cwd": project_root}
    title = meta.get("summary") if isinstance(meta.get("summary"), str) else None
    yield Chat("gemini", session_id, title, iso(meta.get("startTime")), turns, metadata)


def _apply(entry: dict[str, Any], meta: dict[str, Any], messages: dict[str, dict[str, Any]]) -> None:
    """One record of the log (or the whole ``.json`` record) applied as Gemini CLI applies it."""
    if isinstance(entry.get("$rewindTo"), str):
        ids = list(messages)
        if entry["$rewindTo"] in messages:
            for gone in ids[ids.index(entry["$rewindTo"]):]:
                del messages[gone]
        else:
            messages.clear()
        return
    if isinstance(entry.get("$set"), dict):
        update = entry["$set"]
        if isinstance(update.get("messages"), list):
            messages.clear()
            _add(update["messages"], messages)
        meta.update({k: v for k, v in update.items() if k != "messages"})
        return
    if isinstance(entry.get("sessionId"), str) and isinstance(entry.get("projectHash"), str):
        meta.update({k: v for k, v in entry.items() if k != "messages"})
        if isinstance(entry.get("messages"), list):
            _add(entry["messages"], messages)
        return
    if isinstance(entry.get("id"), str):
        messages[entry["id"]] = entry


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
        turns.append(Turn(f"{message_id}#{i}", "tool", clipped(f"called {name} {one_line(call.get('args'))}",
                                                                 TOOL_CHARS), at, metadata={"tool": name}))
        if call.get("result") is not None:
            turns.append(Turn(f"{message_id}#{i}r", "tool", clipped(f"result: {one_line(call.get('result'))}",
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


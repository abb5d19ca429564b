"""Claude Code transcripts: one ``.jsonl`` file a session (``~/.claude/projects/<folder>/<id>.jsonl``).

Each line is a JSON object. ``type`` user and assistant lines carry ``message.content`` (a text,
or blocks: text kept, tool use and results as short tool turns, thinking left out), ``timestamp``,
``sessionId``, ``cwd`` and ``uuid``; a ``summary`` line names the session. Lines of a subagent
(``isSidechain``) are left out, as are meta lines (``isMeta``: the notices Claude Code adds) and
every other type (file snapshots, system lines). The session's project is its ``cwd``'s
repository (``services.projects``), as the hooks file it. A line that is not JSON is skipped
and counted; the rest of the session is read.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from ollama_mcp import json_depth
from ollama_mcp.services.imports.blocks import turns_of_blocks
from ollama_mcp.services.imports.chats import Chat, Role, Skipped, Turn, clipped, iso, json_lines, where
from ollama_mcp.services.projects import project_of

ROLES: dict[str, Role] = {"user": "user", "assistant": "assistant"}


def session(name: str, lines: Iterable[str | json_depth.Refused]) -> Iterator[Chat | Skipped]:
    """The session in the lines of the file ``name``: the skipped lines, then the chat (none when
    the file holds no turn of a session)."""
    session_id = cwd = title = None
    started: str | None = None
    turns: list[Turn] = []
    for read in json_lines(name, lines):
        if isinstance(read, Skipped):
            yield read
            continue
        number, entry = read
        if not isinstance(entry, dict):
            yield Skipped(where(name, number), "is not a JSON object")
            continue
        if entry.get("type") == "summary" and isinstance(entry.get("summary"), str):
            title = entry["summary"]
            continue
        role = ROLES.get(entry.get("type"))  # type: ignore[arg-type]
        if role is None or entry.get("isSidechain") or entry.get("isMeta"):
            continue
        session_id = session_id or _text(entry.get("sessionId"))
        cwd = cwd or _text(entry.get("cwd"))
        at = iso(entry.get("timestamp"))
        started = started or at
        turns.extend(_turns(entry, role, number, at))
    if session_id is None:
        return
    metadata: dict[str, Any] = {"session_id": session_id}
    if cwd:
        metadata |= {"project": project_of(cwd), "cwd": cwd}
    yield Chat("claude-code", session_id, title, started, turns, metadata)


def _turns(entry: dict[str, Any], role: Role, number: int, at: str | None) -> list[Turn]:
    message = entry.get("message")
    if not isinstance(message, dict):
        return []
    line_id = _text(entry.get("uuid")) or f"line {number}"
    content = message.get("content")
    if isinstance(content, str):
        return [Turn(line_id, role, clipped(content.strip()), at)] if content.strip() else []
    if isinstance(content, list):
        return turns_of_blocks(line_id, role, content, at)
    return []


def _text(value: object) -> str | None:
    return value if isinstance(value, str) and value else None

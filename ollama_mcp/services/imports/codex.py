"""Codex CLI sessions: one JSON lines file a session (``~/.codex/sessions/YYYY/MM/DD/rollout-<time>-<id>.jsonl``,
``$CODEX_HOME`` when set), as Codex's rollout recorder writes them.

Each line is ``{"timestamp", "type", "payload"}``. ``session_meta`` names the session (``id``) and
its working directory (``cwd``: its project, as the hooks file Claude Code's). A ``response_item``
whose payload is a ``message`` is a turn: the user's and the assistant's text parts
(``input_text``, ``output_text``); the context Codex puts before the first prompt as user
messages (``<environment_context>``, ``<user_instructions>``, AGENTS.md) and the developer's and
system's messages are left out. A ``function_call`` (or ``custom_tool_call``, ``local_shell_call``)
becomes a short tool turn saying what was called with what, its output one saying what came back.
Reasoning, token counts, turn contexts and the ``event_msg`` lines that repeat the messages for
the UI are left out. A line that is not JSON is skipped and counted; the rest is read.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from typing import Any

from ollama_mcp import json_depth
from ollama_mcp.services.imports.chats import TOOL_CHARS, Chat, Role, Skipped, Turn, clipped, iso, json_lines, one_line
from ollama_mcp.services.projects import project_of

# What Codex says to the model as the user before the user says anything.
CONTEXT_PREFIXES = ("<environment_context>", "<user_instructions>", "# AGENTS.md instructions", "<permissions",
                    "<user_shell_command>", "<turn_aborted>")
TOOL_CALLS = ("function_call", "custom_tool_call", "local_shell_call")
TOOL_OUTPUTS = ("function_call_output", "custom_tool_call_output")


def session(name: str, lines: Iterable[str | json_depth.Refused]) -> Iterator[Chat | Skipped]:
    """The session in the lines of the file ``name``: the skipped lines, then the chat (none when
    the file names no session)."""
    session_id = cwd = started = None
    turns: list[Turn] = []
    for read in json_lines(name, lines):
        if isinstance(read, Skipped):
            yield read
            continue
        number, entry = read
        payload = entry.get("payload") if isinstance(entry, dict) else None
        if not isinstance(payload, dict):
            continue
        at = iso(entry.get("timestamp"))
        if entry.get("type") == "session_meta":
            session_id = session_id or _text(payload.get("id"))
            cwd = cwd or _text(payload.get("cwd"))
            started = started or iso(payload.get("timestamp")) or at
        elif entry.get("type") == "response_item":
            turns.extend(_turns(payload, f"line {number}", at))
    if session_id is None:
        return
    metadata: dict[str, Any] = {"session_id": session_id}
    if cwd:
        metadata |= {"project": project_of(cwd), "cwd": cwd}
    yield Chat("codex", session_id, None, started, turns, metadata)


def _turns(item: dict[str, Any], line_id: str, at: str | None) -> list[Turn]:
    kind = item.get("type")
    if kind == "message":
        role: Role | None = {"user": "user", "assistant": "assistant"}.get(str(item.get("role")))  # type: ignore[assignment]
        content = item.get("content")
        parts: list[Any] = content if isinstance(content, list) else []
        text = "\n".join(p["text"] for p in parts if isinstance(p, dict) and isinstance(p.get("text"), str)).strip()
        if role is None or not text or (role == "user" and text.startswith(CONTEXT_PREFIXES)):
            return []
        return [Turn(line_id, role, clipped(text), at)]
    if kind in TOOL_CALLS:
        name = _text(item.get("name")) or ("shell" if kind == "local_shell_call" else "a tool")
        given = item.get("arguments", item.get("input", item.get("action")))
        return [Turn(line_id, "tool", clipped(f"called {name} {_short(given)}", TOOL_CHARS), at,
                     metadata={"tool": name})]
    if kind in TOOL_OUTPUTS:
        return [Turn(line_id, "tool", clipped(f"result: {_short(_output(item.get('output')))}", TOOL_CHARS), at)]
    return []


def _output(value: object) -> object:
    """A tool's output: Codex keeps a shell's as JSON text of its output and metadata."""
    if isinstance(value, str) and value.startswith("{"):
        try:
            decoded = json.loads(value[:TOOL_CHARS * 20])
        except ValueError:
            return value
        if isinstance(decoded, dict) and "output" in decoded:
            return decoded["output"]
    return value


def _short(value: object) -> str:
    if isinstance(value, dict) and isinstance(value.get("content"), str):  # an output with its metadata
        value = value["content"]
    return one_line(value)


def _text(value: object) -> str | None:
    return value if isinstance(value, str) and value else None

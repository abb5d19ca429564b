"""What a Claude Code hook was sent, checked: the event, the session, its project and the text to
record (``parse``), read with nothing but the standard library and ``services.projects``, so the
per-prompt hooks can hand a turn on (``hook_spool``) before anything heavy is imported.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ollama_mcp import json_depth
from ollama_mcp.services.projects import project_of

EVENTS = ("SessionStart", "UserPromptSubmit", "Stop", "SessionEnd")
# The clients whose hooks send this payload (session_id, cwd, prompt, and the reply), and the
# events of ours each has: Codex's hooks send Claude Code's fields and have no SessionEnd; Gemini
# CLI's name two events otherwise (``CLIENT_EVENT_NAMES``) and send the reply as prompt_response.
HOOK_CLIENTS = {"claude-code": EVENTS, "codex": ("SessionStart", "UserPromptSubmit", "Stop"), "gemini": EVENTS}
CLIENT_EVENT_NAMES = {"gemini": {"UserPromptSubmit": "BeforeAgent", "Stop": "AfterAgent"}}
TRANSCRIPT_TAIL_BYTES = 2_000_000  # the latest turn is at the end of the transcript file


class HookError(Exception):
    """Why a hook did nothing: said on stderr, and the process still exits 0."""


@dataclass(frozen=True)
class HookCall:
    """One hook invocation, checked."""

    event: str
    session_id: str
    project: str  # the session's repository (services.projects): which earlier sessions are this project's
    prompt: str | None = None  # UserPromptSubmit
    reply: str | None = None  # Stop: the assistant's reply to record, when there is one
    client: str = "claude-code"  # whose hook it is (HOOK_CLIENTS): its conversation says so

    @property
    def turn(self) -> tuple[str, str] | None:
        """The (role, text) a UserPromptSubmit or Stop records; None when nothing was said (a
        Stop after tool calls only) or the event records no turn."""
        role, text = {"UserPromptSubmit": ("user", self.prompt), "Stop": ("assistant", self.reply)}.get(
            self.event, ("", None)
        )
        return (role, text) if text is not None and text.strip() else None


def event_name(given: str | None) -> str | None:
    """The Claude Code event a command-line word names (SessionStart, session-start,
    sessionstart...), or None when it names none."""
    if given is None:
        return None
    folded = given.replace("-", "").replace("_", "").lower()
    return next((event for event in EVENTS if event.lower() == folded), None)


def parse(event: str | None, raw: bytes, client: str = "claude-code") -> HookCall:
    """The hook's stdin JSON as a HookCall; ``event`` (from the command line) wins over the
    payload's ``hook_event_name``. Raises HookError naming the field that is wrong."""
    try:
        payload = json_depth.loads(raw.decode("utf-8") or "null")
    except (UnicodeDecodeError, ValueError) as exc:
        raise HookError(f"stdin is not the hook's JSON ({exc}); run this as a Claude Code hook command") from exc
    if not isinstance(payload, dict):
        raise HookError("stdin must be the hook's JSON object; run this as a Claude Code hook command")
    named = event or event_name(_text(payload, "hook_event_name"))
    if named is None:
        raise HookError(
            f"no event: pass one of {', '.join(EVENTS)} (`ollama-mcp hook SessionStart`), or send hook_event_name"
        )
    session_id = _text(payload, "session_id")
    if not session_id:
        raise HookError("the payload has no session_id; this command reads the JSON Claude Code sends to hooks")
    project = project_of(_text(payload, "cwd") or os.getcwd())  # the repository, worktrees included
    prompt = _text(payload, "prompt") if named == "UserPromptSubmit" else None
    reply = last_reply(payload) if named == "Stop" else None
    return HookCall(named, session_id, project, prompt, reply, client)


def _text(payload: Mapping[str, Any], key: str) -> str | None:
    value = payload.get(key)
    if value is not None and not isinstance(value, str):
        raise HookError(f"{key} must be a text in the hook's JSON, not {type(value).__name__}")
    return value


def last_reply(payload: Mapping[str, Any]) -> str | None:
    """The assistant's reply the Stop hook is about: ``last_assistant_message`` when Claude Code
    sends it, else the text of the assistant entries after the last prompt in the transcript."""
    for key in ("last_assistant_message", "prompt_response"):  # Claude Code's and Codex's; Gemini CLI's
        given = payload.get(key)
        if isinstance(given, str) and given.strip():
            return given
    path = payload.get("transcript_path")
    if not isinstance(path, str) or not path:
        return None
    lines = _tail_lines(path)
    texts: list[str] = []
    for line in lines:
        try:
            entry = json_depth.loads(line)
        except ValueError:
            continue  # a line cut by the tail, one being written, or one nested past reason
        if not isinstance(entry, dict) or entry.get("isSidechain") or entry.get("isMeta"):
            continue
        message = entry.get("message")
        content = message.get("content") if isinstance(message, dict) else None
        if entry.get("type") == "user" and _is_prompt(content):
            texts = []  # a new prompt: the reply is what follows it
        elif entry.get("type") == "assistant":
            texts.extend(_texts(content))
    return "\n\n".join(texts) or None


def _tail_lines(path: str) -> list[str]:
    """The last TRANSCRIPT_TAIL_BYTES of the transcript, as lines. Only a regular file is read: a
    FIFO would block until something writes to it, and a device such as /dev/zero never ends. It is
    opened without blocking and checked on the open descriptor (no race with a swapped path), then
    read by a bounded size."""
    try:
        fd = os.open(Path(path).expanduser(), os.O_RDONLY | os.O_NONBLOCK)
    except OSError as exc:
        raise HookError(f"transcript_path {path}: {exc.strerror}; the reply was not recorded") from exc
    with os.fdopen(fd, "rb") as file:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise HookError(f"transcript_path {path} is not a regular file; the reply was not recorded")
        try:
            file.seek(max(0, os.fstat(fd).st_size - TRANSCRIPT_TAIL_BYTES))
            data = file.read(TRANSCRIPT_TAIL_BYTES)
        except OSError as exc:
            raise HookError(f"transcript_path {path}: {exc.strerror}; the reply was not recorded") from exc
    return data.decode("utf-8", errors="replace").splitlines()


def _is_prompt(content: object) -> bool:
    """A user entry that is what the person typed, not a tool's result fed back."""
    if isinstance(content, str):
        return True
    return isinstance(content, list) and any(isinstance(b, dict) and b.get("type") == "text" for b in content)


def _texts(content: object) -> list[str]:
    if isinstance(content, str):
        return [content] if content.strip() else []
    if not isinstance(content, list):
        return []
    return [b["text"] for b in content if isinstance(b, dict) and b.get("type") == "text"
            and isinstance(b.get("text"), str) and b["text"].strip()]

"""Claude Code's own memory: the Markdown files its auto memory keeps for each project
(``~/.claude/projects/<project>/memory/MEMORY.md`` and the topic files beside it), imported as
notes of that project, read-only: the files are never changed, moved or switched off, and Claude
Code keeps using them as before.

Each project's files become one conversation ("Claude Code memory: <project>"), each file one
note with its text (tagged ``claude-code-memory``, at the file's time). A note's id comes from the
file's path and text, so importing again adds nothing, and a file Claude Code changed since adds
its new text as a new note beside the old (a changed fact then supersedes the old one as any
note's does). The project is the working directory its sessions in the same folder name.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

from ollama_mcp.domain import format_timestamp
from ollama_mcp.services.imports.chats import Chat, Skipped, Turn, clipped
from ollama_mcp.services.projects import project_of

TAG = "claude-code-memory"
MAX_FILE_BYTES = 1 << 20  # a memory file longer than this is no memory file: skipped, named


def notes(projects: Path) -> Iterator[Chat | Skipped]:
    """The memory files of every project folder in ``projects`` (Claude Code's projects folder)."""
    for folder in sorted(p for p in projects.glob("*/memory") if p.is_dir()):
        files = sorted(f for f in folder.rglob("*.md") if f.is_file())
        if not files:
            continue
        turns: list[Turn] = []
        for file in files:
            name = str(file.relative_to(projects))
            try:
                if file.stat().st_size > MAX_FILE_BYTES:
                    yield Skipped(name, f"is longer than {MAX_FILE_BYTES >> 20} MB, which no memory file is")
                    continue
                text = file.read_text(encoding="utf-8", errors="replace").strip()
                at = format_timestamp(datetime.fromtimestamp(file.stat().st_mtime, UTC))
            except OSError as exc:
                yield Skipped(name, f"cannot be read ({exc.strerror})")
                continue
            if text:
                digest = hashlib.sha256(text.encode()).hexdigest()[:16]
                turns.append(Turn(f"{file.relative_to(folder)}@{digest}", "user", clipped(text), at, kind="note",
                                  tags=(TAG,), metadata={"file": str(file)}))
        if not turns:
            continue
        cwd = _cwd_of(folder.parent)
        project = project_of(cwd) if cwd else folder.parent.name
        metadata = {"project": project, **({"cwd": cwd} if cwd else {})}
        yield Chat("claude-code", f"memory:{folder.parent.name}", f"Claude Code memory: {project}",
                   min(t.at for t in turns if t.at), turns, metadata)


def _cwd_of(project_folder: Path) -> str | None:
    """The working directory the sessions of a Claude Code project folder name (the newest first)."""
    sessions = sorted(project_folder.glob("*.jsonl"), key=lambda f: f.stat().st_mtime, reverse=True)
    for session in sessions[:5]:
        try:
            with session.open(encoding="utf-8", errors="replace") as lines:
                for _, line in zip(range(50), lines, strict=False):
                    try:
                        cwd = json.loads(line).get("cwd")
                    except (ValueError, AttributeError):
                        continue
                    if isinstance(cwd, str) and cwd:
                        return cwd
        except OSError:
            continue
    return None

"""Claude Code's transcripts on this machine, before Claude Code deletes them: how many there are,
how long each has left, which are not in memory yet, and Claude Code's own setting for it.

Claude Code deletes a session's transcript (``~/.claude/projects/<project>/<session>.jsonl``, or
under ``$CLAUDE_CONFIG_DIR``) once it was last used more than ``cleanupPeriodDays`` ago (30 unless
the user's ``settings.json`` says otherwise), when it next starts. A session is in memory when a
conversation of the store names it (``metadata.session_id``: imported, or recorded by the hooks).

``doctor``, ``config --client claude-code[-hooks] --write`` and the first SessionStart hook of a
store with transcripts about to go say so and how to keep them (``ollama-mcp import --claude-code``;
``--cleanup-period-days`` raises the setting, with the user's consent: a flag, never silently).
Reads files and the store only; nothing here writes.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from time import time

from ollama_mcp.config import Settings
from ollama_mcp.domain import ConversationQuery, counted
from ollama_mcp.errors import OllamaMcpError
from ollama_mcp.storage import backends
from ollama_mcp.storage.protocols import Storage

DEFAULT_CLEANUP_DAYS = 30  # Claude Code's, when settings.json does not set cleanupPeriodDays
SOON_DAYS = 7  # a transcript Claude Code deletes within this many days is about to go
DAY = 86_400.0


def claude_home(env: Mapping[str, str]) -> Path:
    """Claude Code's folder for this user: ``$CLAUDE_CONFIG_DIR``, else ``~/.claude``."""
    if env.get("CLAUDE_CONFIG_DIR"):
        return Path(env["CLAUDE_CONFIG_DIR"])
    return Path(env.get("HOME") or Path.home()) / ".claude"


@dataclass(frozen=True)
class Transcripts:
    """What Claude Code keeps: each session's id and days since its last use, and its setting."""

    folder: Path
    settings_path: Path
    cleanup_days: int
    ages: dict[str, float]  # session id -> days since the transcript was last written

    def days_left(self, session: str) -> float:
        return self.cleanup_days - self.ages[session]

    def missing(self, known: set[str]) -> list[str]:
        """The sessions not in memory, those Claude Code deletes first first."""
        return sorted((s for s in self.ages if s not in known), key=lambda s: -self.ages[s])

    def report(self, known: set[str]) -> tuple[bool, str]:
        """Whether nothing is about to be lost, and what to tell the user (counts, days, commands)."""
        missing = self.missing(known)
        soon = [s for s in missing if self.days_left(s) <= SOON_DAYS]
        oldest = max(self.ages.values(), default=0.0)
        said = (f"Claude Code keeps {counted(len(self.ages), 'session transcript')} in {self.folder} and deletes "
                f"each {self.cleanup_days} days after its last use (cleanupPeriodDays in {self.settings_path}); "
                f"the oldest has {max(self.cleanup_days - oldest, 0):.0f} day(s) left.")
        if not missing:
            return True, said + " All are in memory."
        said += (f" {counted(len(missing), 'session')} {'is' if len(missing) == 1 else 'are'} not in memory yet"
                 + (f", {len(soon)} of them deleted within {SOON_DAYS} days" if soon else "")
                 + ": run `ollama-mcp import --claude-code` (resumable; run it again any time). To keep transcripts "
                 "longer, `ollama-mcp config --client claude-code-hooks --write --cleanup-period-days 365` "
                 "raises Claude Code's setting (its file is backed up first).")
        return not soon, said


def transcripts(env: Mapping[str, str], now: float | None = None) -> Transcripts | None:
    """Claude Code's transcripts for this user (None: Claude Code has none here). A settings file
    that cannot be read counts as Claude Code's default, as Claude Code reads it."""
    home = claude_home(env)
    folder = home / "projects"
    if not folder.is_dir():
        return None
    settings_path = home / "settings.json"
    now = time() if now is None else now
    ages: dict[str, float] = {}
    for project in os.scandir(folder):
        if not project.is_dir():
            continue
        for entry in os.scandir(project.path):
            if entry.name.endswith(".jsonl") and entry.is_file():
                try:
                    ages[entry.name[:-6]] = max(now - entry.stat().st_mtime, 0.0) / DAY
                except OSError:
                    continue
    return Transcripts(folder, settings_path, cleanup_days(settings_path), ages)


def cleanup_days(settings_path: Path) -> int:
    """``cleanupPeriodDays`` as Claude Code reads it from ``settings_path`` (its default when unset)."""
    try:
        value = json.loads(settings_path.read_text(encoding="utf-8")).get("cleanupPeriodDays")
    except (OSError, ValueError, AttributeError):
        return DEFAULT_CLEANUP_DAYS
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else DEFAULT_CLEANUP_DAYS


def survey(settings: Settings, env: Mapping[str, str]) -> tuple[bool, str] | None:
    """``Transcripts.report`` against the store ``settings`` name, read without opening it for
    writing (what ``config --write`` says after it wrote; None: Claude Code has no transcripts here)."""
    found = transcripts(env)
    if found is None:
        return None
    try:
        summary = backends.holdings(settings)[1]
    except OllamaMcpError:
        summary = None
    return found.report(set(summary.sessions) if summary is not None else set())


class SessionNotices:
    """What the SessionStart hook tells the user of Claude Code's transcripts, from the store."""

    def __init__(self, store: Storage) -> None:
        self._store = store

    async def at_start(self, env: Mapping[str, str]) -> str | None:
        """What to tell the user about transcripts not in memory, at the first session the hooks
        record in this store and at every start while some of them are about to be deleted (None
        otherwise, and when all are in memory). The store is asked only then, so a start stays quick."""
        found = transcripts(env)
        if found is None:
            return None
        expiring = any(found.days_left(s) <= SOON_DAYS for s in found.ages)
        if not expiring and not await self._first_session():
            return None
        known = {str(meta["session_id"]) for _, meta in await self._store.conversations_with_setting("session_id")}
        return found.report(known)[1] if found.missing(known) else None

    async def _first_session(self) -> bool:
        """Whether the session starting now is the first one the hooks record in this store."""
        query = ConversationQuery(metadata=(("client", "claude-code"),), limit=2)
        return len(await self._store.list_conversations(query)) <= 1

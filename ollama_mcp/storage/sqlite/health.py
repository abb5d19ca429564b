"""The SQLite store as ``doctor`` and ``stats`` see it: read-only (no migration, no lock), or
only its folder when the file does not exist yet."""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
from pathlib import Path
from sqlite3 import sqlite_version

from ollama_mcp.domain import Check, StoreSummary
from ollama_mcp.errors import StorageError
from ollama_mcp.storage.migrations import schema_check
from ollama_mcp.storage.sqlite.db import bytes_on_disk, damaged, fts5_missing, migrations
from ollama_mcp.storage.sqlite.summary import free_space, quick_check, summarize

MIN_FREE_BYTES = 50 * 2**20  # below this a new store (and its WAL) soon fills the disk
# Free pages worth a `shrink` in a store that keeps them (auto_vacuum off): this many bytes, and
# this share of the file. (A store that gives them back keeps up to 4 MB for its next writes.)
SHRINK_AT_BYTES = 16 * 2**20
SHRINK_AT_SHARE = 0.1


def checks(path: Path, model: str) -> tuple[list[Check], StoreSummary | None]:
    """SQLite's features, then the file (or where it would be created), and what it holds."""
    database, summary = _database(path, model)
    return [_sqlite_features(), *database], summary


def holdings(path: Path, model: str) -> tuple[list[tuple[str, str]], StoreSummary | None, list[tuple[str, str]]]:
    """``stats``' lines before what the store holds, its summary, and the lines after."""
    if not path.exists():
        return [("database", f"{path} (not created yet)")], None, []
    size = bytes_on_disk(path)
    summary = summarize(path, model)
    free, _ = free_space(path)
    held = f", {free / 2**20:.1f} MiB of it free" if free >= 2**20 else ""
    return [("backend", f"SQLite {sqlite_version}"), ("database", f"{path} ({size / 2**20:.1f} MiB{held})"),
            ("schema", str(summary.schema_version))], summary, []


def _sqlite_features() -> Check:
    missing = fts5_missing()
    if missing:
        return Check("sqlite", False, f"SQLite {sqlite_version} lacks FTS5 ({missing}); use a Python built with FTS5.")
    return Check("sqlite", True, f"SQLite {sqlite_version} with FTS5")


def _database(path: Path, model: str) -> tuple[list[Check], StoreSummary | None]:
    if not path.exists():
        return [_creatable(path)], None
    checks = []
    if not os.access(path, os.R_OK | os.W_OK) or not os.access(path.parent, os.W_OK | os.X_OK):
        checks.append(Check("database", False, f"{path} or its folder is not writable by you; fix the permissions "
                            "or set OLLAMA_MCP_DB to a writable path."))
    mode = stat.S_IMODE(path.stat().st_mode)
    if mode & 0o077:
        checks.append(Check("permissions", False, f"{path} is readable by others (mode {mode:o}); "
                            f"run `chmod 600 {path}` to keep memories private.", blocking=False))
    try:
        summary = summarize(path, model)
        problem = quick_check(path)
    except StorageError as exc:
        return [*checks, Check("database", False, str(exc))], None
    if problem is not None:
        return [*checks, Check("database", False, str(damaged(path, f"SQLite's quick_check found: {problem}")))], None
    state = schema_check(str(path), summary.schema_version, migrations()[-1].version, sum(summary.memories.values()))
    return [*checks, state, *_space_held(path)], summary if state.ok else None


def _space_held(path: Path) -> list[Check]:
    """A line when the file holds much free space it will not give back by itself."""
    free, auto_vacuum = free_space(path)
    if auto_vacuum or free < max(SHRINK_AT_BYTES, SHRINK_AT_SHARE * path.stat().st_size):
        return []
    return [Check("disk", False, f"{free / 2**20:,.1f} MiB of {path} are free space that an older version's store "
                  "keeps; run `ollama-mcp shrink` with no client running to give it back.", blocking=False)]


def _creatable(path: Path) -> Check:
    """Whether the server could create the store at ``path``: tried, not guessed from permission
    bits (root passes every access() test, and /sys or a read-only mount still refuse), with a
    probe file in the nearest folder that exists, removed at once."""
    folder = next((p for p in [path.parent, *path.parent.parents] if p.exists()), Path("/"))
    fix = "Set OLLAMA_MCP_DB to an absolute path in a folder you can write to."
    if not folder.is_dir():
        return Check("database", False, f"{path} cannot be created: {folder} is not a folder. {fix}")
    try:
        with tempfile.TemporaryFile(dir=folder, prefix=".ollama-mcp-doctor-"):
            pass
    except OSError as exc:
        return Check("database", False, f"{path} cannot be created: {folder} refuses new files ({exc.strerror}). {fix}")
    free = shutil.disk_usage(folder).free
    if free < MIN_FREE_BYTES:
        return Check("database", False, f"{path} cannot be created: only {free / 2**20:.1f} MiB are free on the disk "
                     f"of {folder}. Free some space, or {fix[0].lower()}{fix[1:]}")
    return Check("database", True, f"{path} does not exist yet; it will be created on first use "
                 f"({free / 2**30:.1f} GiB free)")

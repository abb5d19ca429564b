"""Files the product writes for people (exports): checked before anything is opened, owner-only
from creation, and never half-written.

A file is written to a temporary file beside its target and renamed over it only once complete,
so an export that fails leaves the previous one as it was. A target that is the SQLite store
itself, one of its companion files (``-wal``, ``-shm``, ``-journal``) or a file in the store's
own default folder is refused before the store is opened: writing there would destroy the
memories being exported.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

from ollama_mcp.config import Settings, default_db_path
from ollama_mcp.errors import InvalidInputError

STORE_COMPANIONS = ("", "-wal", "-shm", "-journal")


def checked_output(raw: str, settings: Settings, *, force: bool, field: str = "--output") -> Path:
    """The file ``raw`` names, if an export may be written there; else InvalidInputError with the fix."""
    target = Path(raw).expanduser().resolve()
    stored = settings.store_file  # None: the memories live in a PostgreSQL database, no file to protect
    if stored is not None:
        store = stored.expanduser().resolve()
        if target in {Path(f"{store}{suffix}") for suffix in STORE_COMPANIONS} or _same_file(target, store):
            raise InvalidInputError(
                field, f"is the memory database itself ({store}); writing there would destroy it",
                "write the export to another file, for example ~/ollama-mcp-backup.json",
            )
        default_folder = default_db_path(os.environ, sys.platform).parent.resolve()
        if store.parent == default_folder and target.is_relative_to(default_folder):
            raise InvalidInputError(
                field, f"is inside the folder that holds the memory database ({default_folder})",
                "write the export to another folder, for example your home folder",
            )
    if target.is_dir():
        raise InvalidInputError(field, f"is a folder ({target})", "name a file, for example backup.json")
    if target.exists() and not force:
        raise InvalidInputError(
            field, f"{target} exists already", "pass --force to replace it, or name another file"
        )
    return target


def write_private(target: Path, text: str) -> None:
    """Write ``text`` to ``target`` (mode 0600 from creation) all at once: a temporary file in the
    same folder, synced, then renamed over the target. On any failure the target is untouched."""
    descriptor, temporary = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".partial")
    try:
        with os.fdopen(descriptor, "w", encoding="utf-8") as out:
            out.write(text)
            out.flush()
            os.fsync(out.fileno())
        os.replace(temporary, target)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def _same_file(a: Path, b: Path) -> bool:
    """Whether two existing paths are one file (a hard link to the store has another name)."""
    try:
        return a.exists() and b.exists() and os.path.samefile(a, b)
    except OSError:
        return False

"""The per-prompt hooks without the editor waiting for the store: ``UserPromptSubmit`` and
``Stop`` write the checked turn to a spool file (written whole, synced, then renamed into place)
and start a detached process that records it; Claude Code waits only for that write, about the
time of a bare Python start (``bench/hook_latency.py``), where opening the store would cost it
~0.2 s on every prompt.

Spooled turns are recorded in the order they were written, one drainer at a time (a lock file):
by the detached process, and by every ``SessionStart`` and ``SessionEnd`` before it acts, so a
session never ends before its last reply is in, and a turn whose drainer could not open the store
(a store on a disk that was not mounted) waits in the spool for the next one. A spool file is
deleted only once its turn is stored, or if it can never be (it is not a hook's turn).

Each store has its own spool: a SQLite file's beside it (``memory.db.hook-spool``), a PostgreSQL
store's in the data folder under a digest of its address.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ollama_mcp import json_depth
from ollama_mcp.cli.hook_payload import HookCall, HookError

if TYPE_CHECKING:
    from ollama_mcp.config import Settings

SPOOLED = ("UserPromptSubmit", "Stop")
LOCK_POLL_S = 0.02


def folder_for(settings: Settings) -> Path:
    """The spool of the store ``settings`` name."""
    if settings.postgres_url is None:
        path = settings.store_path
        return path.with_name(path.name + ".hook-spool")
    digest = hashlib.sha256(settings.store_url.encode()).hexdigest()[:16]
    return settings.db_path.parent / "hook-spool" / digest


def put(folder: Path, call: HookCall) -> Path:
    """Write ``call`` to the spool, whole or not at all: a temporary file, synced, renamed into
    place under a name that sorts in the order the turns came."""
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    name = f"{time.time_ns():020d}-{os.getpid()}"
    temporary, final = folder / f".{name}.tmp", folder / f"{name}.json"
    data = json.dumps(dataclasses.asdict(call), ensure_ascii=False).encode()
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(descriptor, "wb") as file:
            file.write(data)
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, final)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
    return final


def start_drainer() -> None:
    """Start ``ollama-mcp hook --drain`` detached: in a session of its own, with no pipe of the
    editor's open (Claude Code waits for the hook's stdout and stderr to close, not only for the
    process), so the hook returns at once and the drainer outlives it."""
    options: dict[str, Any] = {}
    if sys.platform.startswith("win"):
        options["creationflags"] = subprocess.DETACHED_PROCESS | subprocess.CREATE_NEW_PROCESS_GROUP
    else:
        options["start_new_session"] = True
    subprocess.Popen(  # noqa: S603 - our own interpreter and module
        [sys.executable, "-m", "ollama_mcp", "hook", "--drain"],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, close_fds=True,
        cwd=Path.home() if Path.home().is_dir() else None, **options,
    )


def waiting(folder: Path) -> list[Path]:
    """The spooled turns, oldest first."""
    try:
        return sorted(folder.glob("*.json"))
    except OSError:
        return []


def load(path: Path) -> HookCall:
    """A spooled turn; HookError if the file is not one (it can never be recorded)."""
    try:
        data = json_depth.loads(path.read_text(encoding="utf-8"))
        return HookCall(**data)
    except (ValueError, TypeError) as exc:
        raise HookError(f"{path.name} in the hook spool is not a spooled turn ({exc})") from exc


@asynccontextmanager
async def draining(folder: Path) -> AsyncIterator[None]:
    """Hold the lock of the spool ``folder`` (which exists): one drainer at a time, so turns are
    stored in order. It waits for a drainer at work for as long as the caller's deadline allows."""
    import anyio  # noqa: PLC0415 - the per-prompt path never drains

    descriptor = os.open(folder / ".lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        while not _try_lock(descriptor):
            await anyio.sleep(LOCK_POLL_S)
        yield
    finally:
        os.close(descriptor)  # closing releases the lock


def _try_lock(descriptor: int) -> bool:
    try:
        if sys.platform.startswith("win"):
            import msvcrt  # noqa: PLC0415

            msvcrt.locking(descriptor, msvcrt.LK_NBLCK, 1)
        else:
            import fcntl  # noqa: PLC0415

            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return False
    return True

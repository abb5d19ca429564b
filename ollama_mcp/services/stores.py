"""The stores a setting names, as whole stores: every principal's (the local one's, then each
other's), shrunk on disk or copied into another database. The CLI's ``shrink`` and ``migrate``
call these; they never open a backend themselves (the edges do not reach storage)."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager

from ollama_mcp.config import LOCAL_PRINCIPAL, Settings
from ollama_mcp.domain import Shrunk
from ollama_mcp.errors import InvalidInputError
from ollama_mcp.services.transfer import AccessReport, CopyReport, copy_access, copy_store
from ollama_mcp.storage.backends import open_backend, principal_stores

# What a copy reports as it goes: (done, total), within a context named by its label.
Progress = Callable[[str], AbstractContextManager[Callable[[int, int], None]]]


async def principals(settings: Settings) -> list[str]:
    """Every principal whose memory exists in the database ``settings`` names, the local one first."""
    return [LOCAL_PRINCIPAL, *await principal_stores(settings)]


async def shrink(settings: Settings) -> list[tuple[str, Shrunk]] | None:
    """Give back the space each SQLite store of ``settings`` holds free (the local principal's,
    then every other principal's file), each opened as the server opens it (migrated first); the
    file of each with what was done. None on PostgreSQL, which does it by itself."""
    if settings.store_file is None:
        return None
    done: list[tuple[str, Shrunk]] = []
    for principal in await principals(settings):
        chosen = settings.for_principal(principal)
        store, _ = await open_backend(chosen)
        try:
            shrunk = await store.shrink()
        finally:
            await store.aclose()
        if shrunk is not None:
            done.append((str(chosen.store_file), shrunk))
    return done


async def migrate(
    settings: Settings, destination: Settings, progress: Progress
) -> tuple[dict[str, CopyReport], AccessReport]:
    """Copy the database ``settings`` names into the one ``destination`` names (``transfer``): the
    local principal's store with the HTTP server's tokens and shares, then every other principal's
    store. Returns each store's report by principal, and the tokens' and shares'."""
    if settings.database == destination.database:
        raise InvalidInputError("--to", "names the store being copied", "name another database")
    reports, access = {}, AccessReport()
    for principal in await principals(settings):
        source, _ = await open_backend(settings.for_principal(principal))
        try:
            target, _ = await open_backend(destination.for_principal(principal))
            try:
                whose = "" if principal == LOCAL_PRINCIPAL else f"{principal}'s "
                with progress(f"copying {whose}conversations") as step:
                    reports[principal] = await copy_store(source, target, step)
                if principal == LOCAL_PRINCIPAL:
                    access = await copy_access(source, target)
            finally:
                await target.aclose()
        finally:
            await source.aclose()
    return reports, access

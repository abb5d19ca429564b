"""Finding a backend's versioned schema migrations: ``NNNN_short_description.sql`` files shipped
as package data, applied in order by each backend's opener (``db`` for SQLite,
``postgres.db`` for PostgreSQL)."""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from importlib import resources

from ollama_mcp.domain import Check, counted
from ollama_mcp.errors import SchemaError

_NAME = re.compile(r"^(\d{4})_([a-z0-9_]+)\.sql$")


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    sql: str


def shipped(package: str) -> list[Migration]:
    """The migrations in ``package`` (e.g. ``ollama_mcp.storage.sqlite.migrations``), in version order."""
    found = []
    for entry in resources.files(package).iterdir():
        match = _NAME.match(entry.name)
        if match:
            found.append(Migration(int(match[1]), match[2], entry.read_text(encoding="utf-8")))
    found.sort(key=lambda m: m.version)
    return found


def newest(known: list[Migration]) -> int:
    """The schema version these migrations bring a store to (0 for none)."""
    return known[-1].version if known else 0


def to_apply(known: list[Migration], applied: set[int], database: str) -> list[Migration]:
    """The ``known`` migrations not in ``applied``, in order. A database a newer ollama-mcp wrote
    (a version beyond the newest known) is refused with a SchemaError naming ``database``."""
    newest_known = newest(known)
    if applied and max(applied) > newest_known:
        raise SchemaError(
            f"{database} was written by a newer ollama-mcp (schema version {max(applied)}; this version knows up"
            f" to {newest_known}). Upgrade ollama-mcp; the database was not changed."
        )
    return [migration for migration in known if migration.version not in applied]


def report(log: logging.Logger, applied: set[int], done: list[Migration], where: str) -> None:
    """One line for the migrations just applied (each is logged at DEBUG as it runs): a new store
    is "created", an older one "upgraded"; the first command on a new store says one thing, not
    one line per migration."""
    if not done:
        return
    if not applied:
        log.info("created the memory store at %s (schema %d)", where, done[-1].version)
    else:
        log.info(
            "upgraded the memory store at %s from schema %d to %d (%s)", where, max(applied), done[-1].version,
            counted(len(done), "migration"),
        )


def schema_check(where: str, version: int, newest: int, memories: int) -> Check:
    """``doctor``'s line on a store at schema ``version`` holding ``memories``: failed when a newer
    ollama-mcp wrote it, else what it holds (and that it will be upgraded, when it will)."""
    if version > newest:
        return Check("schema", False, f"{where} was written by a newer ollama-mcp (schema {version}, this version"
                     f" knows {newest}); upgrade ollama-mcp.")
    note = "" if version == newest else f"; it will be upgraded from {version} on first use"
    return Check("database", True, f"{where}: {counted(memories, 'memory', 'memories')}, schema {newest}{note}")

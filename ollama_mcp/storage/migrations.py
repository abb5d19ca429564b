"""Finding a backend's versioned schema migrations: ``NNNN_short_description.sql`` files shipped
as package data, applied in order by each backend's opener (``db`` for SQLite,
``postgres.db`` for PostgreSQL)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from importlib import resources

_NAME = re.compile(r"^(\d{4})_([a-z0-9_]+)\.sql$")


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    sql: str


def shipped(package: str) -> list[Migration]:
    """The migrations in ``package`` (e.g. ``ollama_mcp.schema``), in version order."""
    found = []
    for entry in resources.files(package).iterdir():
        match = _NAME.match(entry.name)
        if match:
            found.append(Migration(int(match[1]), match[2], entry.read_text(encoding="utf-8")))
    found.sort(key=lambda m: m.version)
    return found

"""The ``ollama-mcp`` command as a user runs it, and reading rows of a store it wrote."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.conftest import Database
from tests.support.fake_ollama import FakeOllama

SCRIPT = Path(sys.executable).parent / "ollama-mcp"


def run(
    db: Database, fake: FakeOllama, *args: str, stdin: str | None = None, **extra: str
) -> subprocess.CompletedProcess[str]:
    env = {"PATH": os.environ.get("PATH", ""), "HOME": "/nonexistent", "OLLAMA_HOST": fake.url,
           "OLLAMA_MCP_DB": db.url, "OLLAMA_MCP_EMBED_TIMEOUT": "2", **extra}
    return subprocess.run([str(SCRIPT), *args], capture_output=True, text=True, timeout=120, env=env, cwd="/",
                          input=stdin)


def rows(db: Database, sql: str, *params: Any) -> list[tuple[Any, ...]]:
    return db.rows(sql, *params)

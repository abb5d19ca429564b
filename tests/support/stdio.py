"""The stdio server as a client starts it, and raw JSON-RPC over its pipes."""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from mcp import StdioServerParameters

from tests.support.fake_ollama import FakeOllama

SCRIPT = Path(sys.executable).parent / "ollama-mcp"


def server_env(db: Path | str, fake: FakeOllama) -> dict[str, str]:
    """The environment Claude Desktop gives the server; ``db``: a SQLite path or a PostgreSQL URL."""
    return {"OLLAMA_HOST": fake.url, "OLLAMA_MCP_DB": str(db), "OLLAMA_MCP_EMBED_TIMEOUT": "5"}


def stdio(db: Path | str, fake: FakeOllama, command: list[str] | None = None) -> StdioServerParameters:
    command = command or [sys.executable, "-m", "ollama_mcp"]
    return StdioServerParameters(command=command[0], args=command[1:], env=server_env(db, fake), cwd="/")


def send_rpc(proc: subprocess.Popen[bytes], message: dict[str, Any]) -> None:
    send_line(proc, json.dumps(message).encode())


@contextmanager
def raw_server(db_path: Path, fake: FakeOllama, **env: str) -> Iterator[tuple[subprocess.Popen[bytes], list[str]]]:
    """The real script started as Claude Desktop starts it, past ``initialize``; yields the process
    and a list that holds its stderr once it has exited (the caller closes stdin to end it)."""
    full_env = {"PATH": os.environ.get("PATH", ""), "HOME": os.environ.get("HOME", "/root"),
                **server_env(db_path, fake), **env}
    proc = subprocess.Popen(
        [str(SCRIPT)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd="/",
        bufsize=0,
        env=full_env,
    )
    stderr: list[str] = []
    try:
        send_rpc(proc, {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}})
        assert read_reply(proc)["id"] == 1
        send_rpc(proc, {"jsonrpc": "2.0", "method": "notifications/initialized"})
        yield proc, stderr
    finally:
        if proc.poll() is None:
            proc.kill()
        stderr.append(proc.stderr.read().decode() if proc.stderr else "")


def read_reply(proc: subprocess.Popen[bytes], timeout: float = 20) -> dict[str, Any]:
    """The next line on stdout, failing (not hanging) when none comes within ``timeout`` seconds."""
    assert proc.stdout is not None
    if not select.select([proc.stdout], [], [], timeout)[0]:  # stdout is unbuffered (bufsize=0)
        raise AssertionError(f"no answer on stdout within {timeout} s")
    line = proc.stdout.readline()
    assert line, "the server closed stdout"
    return json.loads(line)  # every byte on stdout must be protocol


def send_line(proc: subprocess.Popen[bytes], line: bytes) -> None:
    assert proc.stdin is not None
    proc.stdin.write(line + b"\n")
    proc.stdin.flush()

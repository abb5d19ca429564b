"""The HTTP server in process (``serving``) or as a user starts it (``ServeProcess``), and a client of it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx2
import uvicorn
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from ollama_mcp import listen
from ollama_mcp.config import Settings
from ollama_mcp.host import http
from ollama_mcp.services import tokens

SERVER = Path(sys.executable).parent / "ollama-mcp"


VIEW_TOKEN = "view-token-of-a-tokenless-server-0123456789ab"


@asynccontextmanager
async def serving(settings: Settings, *, stateless: bool = False) -> AsyncIterator[str]:
    """The HTTP server on a free loopback port, planned and built as ``serve --http`` does; its
    MCP URL (the browser view is beside it, at /ui, opened by VIEW_TOKEN when there are no tokens)."""
    sock = listen.bind("127.0.0.1", 0)
    port = sock.getsockname()[1]
    served = http.plan("127.0.0.1", port, None, await tokens.active(settings), settings.allowed_origins)
    server = uvicorn.Server(uvicorn.Config(
        http.http_app(settings, served, stateless=stateless, view_token=VIEW_TOKEN), log_level="warning",
        lifespan="on",
    ))
    async with anyio.create_task_group() as tasks:
        tasks.start_soon(lambda: server.serve(sockets=[sock]))
        with anyio.fail_after(10):
            while not server.started:
                await anyio.sleep(0.01)
        try:
            yield served.url
        finally:
            server.should_exit = True


@asynccontextmanager
async def client(url: str, token: str | None = None, mode: str = "legacy", **options: Any) -> AsyncIterator[Client]:
    headers = {} if token is None else {"Authorization": f"Bearer {token}"}
    async with httpx2.AsyncClient(headers=headers, timeout=30) as session, \
            Client(streamable_http_client(url, http_client=session), mode=mode, **options) as connected:
        yield connected


# Started through this, the server meets Ctrl-C as a terminal's foreground command does, however
# the test run itself was started: a background job of a non-interactive shell ignores SIGINT, the
# server would inherit that and never stop (four tests failed so in a run started with nohup ... &).
INTERRUPTIBLE = [
    sys.executable, "-c",
    "import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); os.execv(sys.argv[1], sys.argv[1:])",
]


class ServeProcess:
    """``ollama-mcp serve --http --port 0`` as a user starts it; its URL from the line it prints."""

    def __init__(self, env: dict[str, str], *args: str) -> None:
        self.process = subprocess.Popen(
            [*INTERRUPTIBLE, str(SERVER), "serve", "--http", "--port", "0", *args], env=env, cwd="/",
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        assert self.process.stderr is not None
        self.lines: list[str] = []
        for line in self.process.stderr:
            self.lines.append(line)
            if "serves MCP at" in line:
                break
        else:
            raise AssertionError(f"the server did not start: {''.join(self.lines)}")
        self.banner = self.lines[-1]
        self.url = self.banner.split("serves MCP at ", 1)[1].split(" ", 1)[0]

    def stop(self) -> tuple[int, str]:
        self.process.send_signal(signal.SIGINT)
        _, err = self.process.communicate(timeout=20)
        return self.process.returncode, err


def environment(settings: Settings) -> dict[str, str]:
    database = str(settings.db_path) if settings.postgres_url is None else settings.postgres_url
    return {"PATH": os.environ["PATH"], "HOME": os.environ.get("HOME", "/tmp"), "OLLAMA_MCP_DB": database,
            "OLLAMA_HOST": settings.ollama_host}


def cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(SERVER), *args], env=env, capture_output=True, text=True, timeout=60, cwd="/")

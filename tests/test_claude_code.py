"""ollama-mcp as Claude Code users get it, checked with Claude Code's own CLI (``@anthropic-ai/
claude-code``, installed by .ci/run; its plugin and MCP commands run offline): the plugin in this
repository validated, added as a marketplace and installed, its server connected and its hooks
recording a session; and what Claude Code shows for an HTTP server's missing or wrong token."""

from __future__ import annotations

import functools
import json
import shutil
import sqlite3
import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import anyio
import pytest

from ollama_mcp.cli import admin
from ollama_mcp.config import Settings
from ollama_mcp.mcp.unauthorized import NO_OAUTH, NOT_OURS
from tests.support.http import serving
from tests.support.installs import ROOT, committed_copy, need_node_tool, uv_env

pytestmark = pytest.mark.anyio
CLAUDE = ROOT / "node_modules" / ".bin" / "claude"
VERSION = "@anthropic-ai/claude-code@2.1.332"


@pytest.fixture
def claude_home(tmp_path: Path) -> Iterator[Path]:
    """A home of Claude Code's own, with nothing configured."""
    need_node_tool(CLAUDE, VERSION)
    home = tmp_path / "claude-home"
    home.mkdir()
    yield home
    shutil.rmtree(home, ignore_errors=True)


def claude(home: Path, *args: str, cwd: Path | None = None, env: dict[str, str] | None = None,
           timeout: float = 120) -> subprocess.CompletedProcess[str]:
    full = {"PATH": "/usr/bin:/bin", **(env or {}), "HOME": str(home)}
    return subprocess.run([str(CLAUDE), *args], capture_output=True, text=True, cwd=cwd or home, env=full,
                          timeout=timeout)


def test_claude_codes_validator_passes_the_plugin_and_the_marketplace_strictly(claude_home: Path) -> None:
    for target in (ROOT, ROOT / ".claude-plugin" / "marketplace.json"):
        done = claude(claude_home, "plugin", "validate", "--strict", str(target))
        assert done.returncode == 0, done.stdout + done.stderr
        assert "Validation passed" in done.stdout


@pytest.mark.slow
def test_the_plugin_installs_from_the_repository_connects_its_server_and_its_hooks_record_the_session(
    claude_home: Path, tmp_path: Path
) -> None:
    src = committed_copy(tmp_path)
    for args in (("plugin", "marketplace", "add", str(src)), ("plugin", "install", "ollama-mcp@ollama-mcp")):
        done = claude(claude_home, *args)
        assert done.returncode == 0, done.stdout + done.stderr
    db = tmp_path / "data" / "memory.db"
    env = {**uv_env(claude_home), "OLLAMA_MCP_DB": str(db), "OLLAMA_HOST": "http://127.0.0.1:9"}

    listed = claude(claude_home, "mcp", "list", env=env)
    assert "plugin:ollama-mcp:ollama-mcp: uv run --directory" in listed.stdout, listed.stdout + listed.stderr
    assert "✔ Connected" in listed.stdout

    # One prompt in a project folder. The model's API is a stand-in that refuses at once (Claude Code
    # needs an account to reach the real one); the hooks run around it all the same.
    project = tmp_path / "shop-api"
    project.mkdir()
    with _refusing_messages_api() as api:
        claude(claude_home, "-p", "Remember that the build uses uv", cwd=project,
               env={**env, "ANTHROPIC_API_KEY": "sk-ant-test", "ANTHROPIC_BASE_URL": api})
    with sqlite3.connect(db) as conn:
        (name, status, metadata), = conn.execute("SELECT name, status, metadata FROM conversations").fetchall()
        recorded = conn.execute("SELECT role, content FROM memories WHERE kind = 'message'").fetchall()
    assert (name, status) == ("shop-api", "completed")  # SessionStart opened it, SessionEnd closed it
    assert json.loads(metadata)["project"] == str(project)
    assert recorded == [("user", "Remember that the build uses uv")]  # UserPromptSubmit


async def test_claude_code_shows_why_a_missing_or_wrong_token_is_refused_and_the_fix(
    claude_home: Path, settings: Settings
) -> None:
    _, secret = await admin.create_token(settings, "alice", None)
    async with serving(settings) as url:
        for name, header in (("none", None), ("wrong", f"Bearer {secret[:-2]}xx"), ("right", f"Bearer {secret}")):
            args = ["mcp", "add", "--transport", "http", "--scope", "user", name, url]
            done = await anyio.to_thread.run_sync(functools.partial(
                claude, claude_home, *args, *(("--header", f"Authorization: {header}") if header else ())))
            assert done.returncode == 0, done.stderr
        listed = await anyio.to_thread.run_sync(lambda: claude(claude_home, "mcp", "list"))
    lines = {line.split(":", 1)[0]: line for line in listed.stdout.splitlines() if line.startswith(("none", "wrong",
                                                                                                       "right"))}
    # No header: Claude Code tries OAuth, registers at /register, and shows our answer.
    assert "Failed to connect" in lines["none"] and json.dumps(NO_OAUTH)[1:-1] in lines["none"]
    assert "Failed to connect" in lines["wrong"] and json.dumps(NOT_OURS)[1:-1] in lines["wrong"]
    assert "✔ Connected" in lines["right"]


class _RefusingHandler(BaseHTTPRequestHandler):
    """Anthropic's Messages API as a stand-in that answers every request with a 400 error."""

    def log_message(self, *_: object) -> None:
        pass

    def do_POST(self) -> None:  # noqa: N802 - the standard library's name
        self.rfile.read(int(self.headers.get("content-length") or 0))
        body = json.dumps({"type": "error", "error": {"type": "invalid_request_error",
                                                      "message": "no model in this test"}}).encode()
        self.send_response(400)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_HEAD = do_POST


@contextmanager
def _refusing_messages_api() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _RefusingHandler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()

"""``ollama-mcp config --client NAME --write``: the server merged into each client's own config
file in a temporary home, every other server and setting kept, a copy of the old file beside it,
the same entry twice changing nothing, and bad files refused with nothing written."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from mcp import Client, StdioServerParameters

from tests.conftest import Database
from tests.support.fake_ollama import FakeOllama
from tests.support.mcp_client import call

SCRIPT = Path(sys.executable).parent / "ollama-mcp"
TOKEN = "omcp_" + "A" * 43
# Where each client reads its servers on Linux, and under which key.
FILES = {
    "claude-desktop": (".config/Claude/claude_desktop_config.json", "mcpServers"),
    "claude-code": (".claude.json", "mcpServers"),
    "cursor": (".cursor/mcp.json", "mcpServers"),
    "vscode": (".config/Code/User/mcp.json", "servers"),
}


def config(home: Path, db: str, fake: FakeOllama, *args: str, **extra: str) -> subprocess.CompletedProcess[str]:
    env = {"PATH": os.environ.get("PATH", ""), "HOME": str(home), "OLLAMA_HOST": fake.url, "OLLAMA_MCP_DB": db,
           **extra}
    return subprocess.run([str(SCRIPT), "config", *args], capture_output=True, text=True, timeout=60, env=env, cwd="/")


def seeded(home: Path, client: str) -> tuple[Path, str]:
    """The client's file as a user has it: another server and a setting of their own."""
    relative, key = FILES[client]
    path = home / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"theme": "dark", key: {"notes": {"command": "/usr/bin/notes", "args": ["-q"]}}}))
    return path, key


@pytest.mark.anyio
@pytest.mark.parametrize("client", sorted(FILES))
async def test_write_merges_the_server_into_the_clients_own_file_keeps_the_rest_and_is_idempotent(
    tmp_path: Path, db: Database, fake_ollama: FakeOllama, client: str
) -> None:
    path, key = seeded(tmp_path, client)
    before = path.read_text()
    done = config(tmp_path, db.url, fake_ollama, "--client", client, "--write")
    assert done.returncode == 0, done.stderr
    written = json.loads(path.read_text())
    assert written["theme"] == "dark" and written[key]["notes"] == {"command": "/usr/bin/notes", "args": ["-q"]}
    entry = written[key]["ollama-mcp"]
    backups = list(path.parent.glob(path.name + ".bak-*"))
    assert [b.read_text() for b in backups] == [before] and f"kept as {backups[0].name}" in done.stdout
    again = config(tmp_path, db.url, fake_ollama, "--client", client, "--write")
    assert again.returncode == 0 and "nothing was changed" in again.stdout
    assert json.loads(path.read_text()) == written and len(list(path.parent.glob(path.name + ".bak-*"))) == 1
    # What the client then does with the entry: start it from / with only that environment.
    assert entry.pop("type", "stdio") == "stdio"
    params = StdioServerParameters(command=entry["command"], args=entry["args"], env=entry["env"], cwd="/")
    async with Client(params, mode="legacy") as started:
        stored = await call(started, "store_memory", content=f"configured for {client} by config --write")
    assert stored["embedding_status"] == "embedded"


def test_write_creates_a_missing_file_and_its_folders(tmp_path: Path, fake_ollama: FakeOllama) -> None:
    done = config(tmp_path, "/tmp/m.db", fake_ollama, "--client", "vscode", "--write")
    path = tmp_path / FILES["vscode"][0]
    assert done.returncode == 0 and json.loads(path.read_text())["servers"]["ollama-mcp"]["type"] == "stdio"
    assert not list(path.parent.glob("*.bak-*"))


@pytest.mark.parametrize("damage", ["not json", "read-only", "not an object", "servers not an object"])
def test_a_file_it_cannot_safely_merge_into_is_refused_by_its_path_and_left_unchanged(
    tmp_path: Path, fake_ollama: FakeOllama, damage: str
) -> None:
    path, _ = seeded(tmp_path, "cursor")
    if damage == "not json":
        path.write_text('{"mcpServers": {"notes": {}},')
    elif damage == "not an object":
        path.write_text("[1, 2]")
    elif damage == "servers not an object":
        path.write_text('{"mcpServers": ["notes"]}')
    else:
        path.chmod(stat.S_IRUSR | stat.S_IRGRP)
    before = path.read_bytes()
    done = config(tmp_path, "/tmp/m.db", fake_ollama, "--client", "cursor", "--write")
    assert done.returncode == 2 and str(path) in done.stderr and "Nothing was written" in done.stderr
    assert {"not json": "is not valid JSON", "read-only": "is read-only", "not an object": "not an object",
            "servers not an object": "'mcpServers' is not a JSON object"}[damage] in done.stderr
    assert path.read_bytes() == before and sorted(p.name for p in path.parent.iterdir()) == ["mcp.json"]


def test_a_different_server_of_the_same_name_is_refused_unless_replaced_or_named_apart(
    tmp_path: Path, fake_ollama: FakeOllama
) -> None:
    path, _ = seeded(tmp_path, "claude-desktop")
    assert config(tmp_path, "/tmp/one.db", fake_ollama, "--client", "claude-desktop", "--write").returncode == 0
    first = path.read_text()
    refused = config(tmp_path, "/tmp/two.db", fake_ollama, "--client", "claude-desktop", "--write")
    assert refused.returncode == 2 and "already has a server named 'ollama-mcp' that differs" in refused.stderr
    assert "--replace" in refused.stderr and path.read_text() == first
    beside = config(tmp_path, "/tmp/two.db", fake_ollama, "--client", "claude-desktop", "--write", "--name", "work")
    replaced = config(tmp_path, "/tmp/three.db", fake_ollama, "--client", "claude-desktop", "--write", "--replace")
    assert beside.returncode == 0 and replaced.returncode == 0
    servers = json.loads(path.read_text())["mcpServers"]
    assert {n: s.get("env", {}).get("OLLAMA_MCP_DB") for n, s in servers.items()} == {
        "notes": None, "ollama-mcp": "/tmp/three.db", "work": "/tmp/two.db"}


def test_the_http_variant_takes_the_token_from_a_variable_or_file_and_never_prints_it(
    tmp_path: Path, fake_ollama: FakeOllama
) -> None:
    url = "https://memory.example.com/mcp"
    printed = {
        client: config(tmp_path, "/tmp/m.db", fake_ollama, "--client", client, "--url", url,
                       "--token-env", "MY_TOKEN", MY_TOKEN=TOKEN)
        for client in ("claude-code", "cursor", "vscode")
    }
    assert all(p.returncode == 0 and TOKEN not in p.stdout + p.stderr for p in printed.values())
    assert printed["claude-code"].stdout.strip() == (
        f'claude mcp add --transport http --scope user ollama-mcp {url} --header "Authorization: Bearer $MY_TOKEN"')
    cursor: dict[str, Any] = json.loads(printed["cursor"].stdout)["mcpServers"]["ollama-mcp"]
    assert cursor == {"url": url, "headers": {"Authorization": "Bearer ${env:MY_TOKEN}"}}
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN + "\n")
    vscode = config(tmp_path, "/tmp/m.db", fake_ollama, "--client", "vscode", "--url", url, "--token-file",
                    str(token_file))
    block = json.loads(vscode.stdout)
    assert TOKEN not in vscode.stdout and block["inputs"][0]["password"] is True
    assert block["servers"]["ollama-mcp"]["headers"] == {"Authorization": "Bearer ${input:ollama-mcp-token}"}
    written = config(tmp_path, "/tmp/m.db", fake_ollama, "--client", "claude-code", "--url", url, "--token-file",
                     str(token_file), "--write")
    assert written.returncode == 0 and TOKEN not in written.stdout + written.stderr
    assert json.loads((tmp_path / ".claude.json").read_text())["mcpServers"]["ollama-mcp"] == {
        "type": "http", "url": url, "headers": {"Authorization": f"Bearer {TOKEN}"}}


@pytest.mark.parametrize(("args", "expected"), [
    (["--client", "cursor", "--url", "memory.example.com"], "is not an http(s) URL"),
    (["--client", "claude-desktop", "--url", "http://127.0.0.1:8765/mcp"], "Settings > Connectors"),
    (["--client", "cursor", "--url", "http://h/mcp", "--token-env", "UNSET_VAR", "--write"], "UNSET_VAR is not set"),
    (["--client", "cursor", "--url", "http://h/mcp", "--token-env", "BAD", "--write"], "not an ollama-mcp token"),
    (["--client", "cursor", "--token-env", "BAD"], "go with --url"),
    (["--client", "cursor", "--replace"], "go with --write"),
])
def test_bad_http_options_are_refused_naming_the_option_and_nothing_is_written(
    tmp_path: Path, fake_ollama: FakeOllama, args: list[str], expected: str
) -> None:
    done = config(tmp_path, "/tmp/m.db", fake_ollama, *args, BAD="omcp_short")
    assert done.returncode == 2 and expected in done.stderr, done.stderr
    assert not (tmp_path / ".cursor").exists()


def test_write_adds_the_hooks_beside_the_users_own_and_again_changes_nothing(
    tmp_path: Path, fake_ollama: FakeOllama
) -> None:
    path = tmp_path / ".claude" / "settings.json"
    path.parent.mkdir()
    theirs = {"matcher": "", "hooks": [{"type": "command", "command": "notify-send done"}]}
    path.write_text(json.dumps({"model": "opus", "hooks": {"Stop": [theirs]}}))
    done = config(tmp_path, "/tmp/m.db", fake_ollama, "--client", "claude-code-hooks", "--write")
    assert done.returncode == 0, done.stderr
    hooks = json.loads(path.read_text())["hooks"]
    assert sorted(hooks) == ["SessionEnd", "SessionStart", "Stop", "UserPromptSubmit"]
    assert hooks["Stop"][0] == theirs and hooks["Stop"][1]["hooks"][0]["command"].endswith("hook Stop")
    again = config(tmp_path, "/tmp/m.db", fake_ollama, "--client", "claude-code-hooks", "--write")
    assert "nothing was changed" in again.stdout and json.loads(path.read_text())["hooks"] == hooks
    moved = config(tmp_path, "/tmp/other.db", fake_ollama, "--client", "claude-code-hooks", "--write")
    assert moved.returncode == 2 and "--replace" in moved.stderr

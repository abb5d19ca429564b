"""Codex and Gemini CLI (#83): their configs written by ``config --client codex|gemini --write`` and
read back by their own CLIs (from npm, as users install them), and their sessions imported from
where they keep them (``import --codex``, ``import --gemini``), once, each under its project, found
by the default search. Session files are fixtures in the formats their recorders write
(``tests/fixtures/codex``, ``tests/fixtures/gemini``); Gemini CLI itself lists its fixture."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.conftest import Database
from tests.support.cli import rows, run
from tests.support.cli_models import ANSWER, FakeGemini, FakeResponses
from tests.support.fake_ollama import FakeOllama
from tests.support.http import SERVER
from tests.support.installs import ROOT, need_node_tool

FIXTURES = Path(__file__).parent.parent / "fixtures"
CODEX = ROOT / "node_modules" / ".bin" / "codex"
GEMINI = ROOT / "node_modules" / ".bin" / "gemini"


def _messages(db: Database) -> list[tuple[str, str]]:
    return rows(db, "SELECT role, content FROM memories WHERE kind = 'message' ORDER BY seq")


def _as_json(value: object) -> dict[str, object]:
    return json.loads(value) if isinstance(value, str) else value  # type: ignore[return-value]


def test_import_codex_finds_the_sessions_itself_and_imports_each_turn_once(
    tmp_path: Path, db: Database, fake_ollama: FakeOllama
) -> None:
    shutil.copytree(FIXTURES / "codex", tmp_path / ".codex")
    done = run(db, fake_ollama, "import", "--codex", HOME=str(tmp_path))
    assert done.returncode == 0, done.stderr
    assert "codex: imported 1 new conversation(s) and 6 new turns (0 of 6 were already present)" in done.stdout
    assert "line 15: is not JSON" in done.stdout  # the line a crash cut, named; the rest read
    assert _messages(db) == [
        ("user", "Which port does the staging proxy listen on? Check deploy/proxy.toml."),
        ("tool", 'called shell {"command":["bash","-lc","cat deploy/proxy.toml"],"workdir":"/home/dana/proxy"}'),
        ("tool", 'result: [server] listen = 8443 upstream = "app:9000"'),
        ("assistant", "The staging proxy listens on port 8443 (deploy/proxy.toml, `listen = 8443`)."),
        ("user", "And the metrics exporter?"), ("assistant", "The metrics exporter listens on 9100 beside it."),
    ]
    [(name, metadata)] = rows(db, "SELECT name, metadata FROM conversations")
    assert name.startswith("Which port does the staging proxy listen on?")
    assert _as_json(metadata)["project"] == "/home/dana/proxy"
    again = run(db, fake_ollama, "import", "--codex", HOME=str(tmp_path))
    assert "imported 0 new conversation(s) and 0 new turns (6 of 6 were already present)" in again.stdout
    assert rows(db, "SELECT min(occurred_at) FROM memories") == [("2026-11-30T09:12:05.402000Z",)]


def test_import_gemini_follows_the_log_rewinds_included_and_reads_the_older_json(
    tmp_path: Path, db: Database, fake_ollama: FakeOllama
) -> None:
    shutil.copytree(FIXTURES / "gemini", tmp_path / ".gemini")
    done = run(db, fake_ollama, "import", "--gemini", HOME=str(tmp_path))
    assert done.returncode == 0, done.stderr
    assert "gemini: imported 2 new conversation(s) and 8 new turns" in done.stdout
    by_name = {name: _as_json(meta) for name, meta in rows(db, "SELECT name, metadata FROM conversations")}
    assert {name: meta["project"] for name, meta in by_name.items()} == {
        "Staging proxy ports": "/home/dana/proxy", "Remind me which note app we picked": "/home/dana/notes-app"}
    assert _messages(db) == [
        ("user", "Remind me which note app we picked"), ("assistant", "You picked Obsidian, synced with Syncthing."),
        ("user", "Which port does the staging proxy listen on?"),
        ("tool", 'called read_file {"absolute_path": "/home/dana/proxy/deploy/proxy.toml"}'),
        ("tool", 'result: [{"functionResponse": {"id": "read_file-1764597742-0", "name": "read_file", "response": '
                 '{"output": "[server]\\nlisten = 8443"}}}]'),
        ("assistant", "It listens on port 8443, set in deploy/proxy.toml."),
        ("user", "And the metrics port?"), ("assistant", "The metrics exporter uses 9100."),
    ]  # the rewound turns ("Delete the staging proxy config") and the CLI's notices are not there
    again = run(db, fake_ollama, "import", "--gemini", HOME=str(tmp_path))
    assert "imported 0 new conversation(s) and 0 new turns (8 of 8 were already present)" in again.stdout


def test_gemini_cli_itself_lists_the_session_fixture_as_one_of_its_own(tmp_path: Path) -> None:
    need_node_tool(GEMINI, "@google/gemini-cli")
    project = tmp_path / "proxy"
    chats = tmp_path / "home" / ".gemini" / "tmp" / "proxy" / "chats"
    chats.mkdir(parents=True)
    project.mkdir()
    shutil.copy(next((FIXTURES / "gemini" / "tmp" / "proxy" / "chats").glob("*.jsonl")), chats)
    (chats.parent / ".project_root").write_text(str(project))
    (chats.parent.parent.parent / "settings.json").write_text('{"security": {"folderTrust": {"enabled": false}}}')
    listed = subprocess.run([str(GEMINI), "--list-sessions"], capture_output=True, text=True, timeout=120,
                            cwd=project, env={"PATH": os.environ["PATH"], "HOME": str(tmp_path / "home"),
                                              "GEMINI_API_KEY": "unused-offline"})
    assert "Staging proxy ports" in listed.stdout and "8d1f3c2a-5b6e-4f70-9a81-b2c3d4e5f607" in listed.stdout, (
        listed.stdout + listed.stderr)


def test_import_without_file_or_history_flag_names_both_ways_and_writes_nothing(
    tmp_path: Path, db: Database, fake_ollama: FakeOllama
) -> None:
    done = run(db, fake_ollama, "import")
    assert done.returncode == 2 and "FILE: is missing" in done.stderr and "--claude-code" in done.stderr
    missing = run(db, fake_ollama, "import", "--codex", HOME=str(tmp_path))
    assert missing.returncode == 2
    assert f"--codex: found no Codex sessions at {tmp_path}/.codex/sessions" in missing.stderr


def _config(home: Path, db: Database, client: str, *more: str) -> subprocess.CompletedProcess[str]:
    env = {"PATH": os.environ["PATH"], "HOME": str(home), "OLLAMA_MCP_DB": db.url, "OLLAMA_HOST": "http://127.0.0.1:9"}
    return subprocess.run([str(SERVER), "config", "--client", client, "--write", *more], env=env, cwd="/",
                          capture_output=True, text=True, timeout=60)


def test_codex_reads_back_the_server_written_into_its_toml_keeping_the_users_own(
    tmp_path: Path, db: Database
) -> None:
    need_node_tool(CODEX, "@openai/codex")
    config = tmp_path / ".codex" / "config.toml"
    config.parent.mkdir()
    mine = '# my settings\nmodel = "gpt-5.5-codex"\n\n[mcp_servers.docs]\ncommand = "docs-mcp"\nargs = ["--stdio"]\n'
    config.write_text(mine)
    done = _config(tmp_path, db, "codex")
    assert done.returncode == 0, done.stderr
    assert config.read_text().startswith(mine)  # the user's text, comment and all, as it was
    listed = subprocess.run([str(CODEX), "mcp", "list", "--json"], capture_output=True, text=True, timeout=60,
                            env={"PATH": os.environ["PATH"], "HOME": str(tmp_path)})
    assert listed.returncode == 0, listed.stderr
    servers = {s["name"]: s["transport"] for s in json.loads(listed.stdout)}
    assert servers["docs"]["command"] == "docs-mcp"
    assert servers["ollama-mcp"] == {"type": "stdio", "command": str(SERVER), "args": [], "cwd": None,
                                     "env": {"OLLAMA_HOST": "http://127.0.0.1:9", "OLLAMA_MCP_DB": db.url},
                                     "env_vars": []}
    before = config.read_bytes()
    assert _config(tmp_path, db, "codex").returncode == 0 and config.read_bytes() == before  # again: no change

    config.write_text("model = \n")  # not TOML
    broken = _config(tmp_path, db, "codex")
    assert broken.returncode != 0 and f"{config} is not valid TOML" in broken.stderr
    assert config.read_text() == "model = \n"


def test_gemini_cli_connects_to_the_server_written_into_its_settings(tmp_path: Path, db: Database) -> None:
    need_node_tool(GEMINI, "@google/gemini-cli")
    settings = tmp_path / ".gemini" / "settings.json"
    settings.parent.mkdir()
    settings.write_text(json.dumps({"security": {"folderTrust": {"enabled": False}}, "ui": {"theme": "GitHub"}}))
    done = _config(tmp_path, db, "gemini")
    assert done.returncode == 0, done.stderr
    written = json.loads(settings.read_text())
    assert written["ui"] == {"theme": "GitHub"} and written["mcpServers"]["ollama-mcp"]["command"] == str(SERVER)
    listed = subprocess.run([str(GEMINI), "mcp", "list"], capture_output=True, text=True, timeout=120, cwd=tmp_path,
                            env={"PATH": os.environ["PATH"], "HOME": str(tmp_path)})
    assert f"✓ ollama-mcp: {SERVER}  (stdio) - Connected" in listed.stdout + listed.stderr  # it prints to stderr

    settings.chmod(0o444)
    try:
        refused = _config(tmp_path, db, "gemini", "--name", "second")
        assert refused.returncode != 0 and f"{settings} is read-only" in refused.stderr
    finally:
        settings.chmod(0o644)
    assert "second" not in json.loads(settings.read_text())["mcpServers"]


@pytest.mark.parametrize("client", ["codex", "gemini"])
def test_config_prints_what_codex_and_gemini_read(client: str, db: Database) -> None:
    env = {"PATH": os.environ["PATH"], "HOME": "/nonexistent", "OLLAMA_MCP_DB": db.url}
    done = subprocess.run([str(SERVER), "config", "--client", client], env=env, capture_output=True, text=True,
                          timeout=60, cwd="/")
    assert done.returncode == 0, done.stderr
    if client == "codex":
        assert done.stdout.startswith(f'[mcp_servers.ollama-mcp]\ncommand = "{SERVER}"\nargs = []\n')
        assert "~/.codex/config.toml" in done.stderr
    else:
        assert json.loads(done.stdout)["mcpServers"]["ollama-mcp"]["env"] == {"OLLAMA_MCP_DB": db.url}


def _codex(home: Path, project: Path, prompt: str, *more: str) -> subprocess.CompletedProcess[str]:
    """One real ``codex exec`` session in ``project``, its model the offline stand-in."""
    return subprocess.run([str(CODEX), "exec", *more, "--skip-git-repo-check", prompt], capture_output=True,
                          text=True, timeout=120, cwd=project, env={"PATH": os.environ["PATH"], "HOME": str(home)})


def test_codex_sessions_are_recorded_by_its_hooks_and_the_others_imported_once(
    tmp_path: Path, db: Database, fake_ollama: FakeOllama
) -> None:
    need_node_tool(CODEX, "@openai/codex")
    model = FakeResponses()
    home, project = tmp_path / "home", tmp_path / "proxy"
    project.mkdir()
    try:
        model.codex_config(home / ".codex")
        env = {"PATH": os.environ["PATH"], "HOME": str(home), "OLLAMA_MCP_DB": db.url, "OLLAMA_HOST": fake_ollama.url}
        written = subprocess.run([str(SERVER), "config", "--client", "codex-hooks", "--write"], env=env, cwd="/",
                                 capture_output=True, text=True, timeout=60)
        assert written.returncode == 0, written.stderr
        # Codex runs hooks only once trusted (in its /hooks review); this flag stands in for that review.
        live = _codex(home, project, "Which port does the staging proxy listen on?", "--dangerously-bypass-hook-trust")
        assert live.returncode == 0 and ANSWER in live.stdout, live.stderr
        subprocess.run([str(SERVER), "hook", "--drain"], env=env, cwd="/", capture_output=True, timeout=60, check=True)
        [(conversation, meta)] = rows(db, "SELECT id, metadata FROM conversations")
        assert {k: _as_json(meta)[k] for k in ("client", "project")} == {"client": "codex", "project": str(project)}
        assert _messages(db) == [("user", "Which port does the staging proxy listen on?"), ("assistant", ANSWER)]

        (home / ".codex" / "hooks.json").unlink()  # a session the hooks did not see
        quiet = _codex(home, project, "And the metrics exporter?")
        assert quiet.returncode == 0, quiet.stderr
        done = run(db, fake_ollama, "import", "--codex", HOME=str(home))
        assert "codex: imported 1 new conversation(s) and 2 new turns" in done.stdout, done.stdout + done.stderr
        assert "left out 1 session the hooks recorded as they happened" in done.stdout
        assert _messages(db)[2:] == [("user", "And the metrics exporter?"), ("assistant", ANSWER)]
    finally:
        model.stop()


def test_gemini_cli_sessions_are_recorded_by_its_hooks_and_imported_once(
    tmp_path: Path, db: Database, fake_ollama: FakeOllama
) -> None:
    need_node_tool(GEMINI, "@google/gemini-cli")
    model = FakeGemini()
    home, project = tmp_path / "home", tmp_path / "proxy"
    (home / ".gemini").mkdir(parents=True)
    project.mkdir()
    (home / ".gemini" / "settings.json").write_text(json.dumps(
        {"security": {"folderTrust": {"enabled": False}, "auth": {"selectedType": "gemini-api-key"}}}))
    env = {"PATH": os.environ["PATH"], "HOME": str(home), "OLLAMA_MCP_DB": db.url, "OLLAMA_HOST": fake_ollama.url}

    def gemini(prompt: str) -> None:  # one real session, its model the offline stand-in
        done = subprocess.run([str(GEMINI), "-m", "gemini-2.5-flash", "-p", prompt], capture_output=True, text=True,
                              timeout=120, cwd=project, env={"PATH": os.environ["PATH"], "HOME": str(home),
                                                             **model.env()})
        assert done.returncode == 0 and ANSWER in done.stdout, done.stdout + done.stderr

    try:
        written = subprocess.run([str(SERVER), "config", "--client", "gemini-hooks", "--write"], env=env, cwd="/",
                                 capture_output=True, text=True, timeout=60)
        assert written.returncode == 0, written.stderr
        hooks = json.loads((home / ".gemini" / "settings.json").read_text())["hooks"]
        assert set(hooks) == {"SessionStart", "BeforeAgent", "AfterAgent", "SessionEnd"}
        gemini("Which port does the staging proxy listen on?")
        subprocess.run([str(SERVER), "hook", "--drain"], env=env, cwd="/", capture_output=True, timeout=60, check=True)
        [(meta, status)] = rows(db, "SELECT metadata, status FROM conversations")
        assert (_as_json(meta)["client"], _as_json(meta)["project"], status) == ("gemini", str(project), "completed")
        assert _messages(db) == [("user", "Which port does the staging proxy listen on?"), ("assistant", ANSWER)]

        settings = json.loads((home / ".gemini" / "settings.json").read_text())
        del settings["hooks"]  # a session the hooks do not see
        (home / ".gemini" / "settings.json").write_text(json.dumps(settings))
        gemini("And the metrics exporter?")
        done = run(db, fake_ollama, "import", "--gemini", HOME=str(home))
        assert "gemini: imported 1 new conversation(s) and 2 new turns" in done.stdout, done.stdout + done.stderr
        assert "left out 1 session the hooks recorded as they happened" in done.stdout
        assert _messages(db)[2:] == [("user", "And the metrics exporter?"), ("assistant", ANSWER)]
    finally:
        model.stop()

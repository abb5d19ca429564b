"""Claude Code's history rescued before Claude Code deletes it (#83): a ``~/.claude`` with old
transcripts and an auto-memory file; ``doctor``, ``config --write`` and the SessionStart hook say
how many there are, how long they have and how to keep them; ``--cleanup-period-days`` raises
Claude Code's setting only when asked; ``import --claude-code`` brings in every session once
(the ones the hooks recorded are not doubled), the memory files read-only, and resumes after a
SIGKILL. Through the real CLI, on both backends."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

from tests.conftest import Database
from tests.support.cli import SCRIPT, rows, run
from tests.support.fake_ollama import FakeOllama

DAY = 86_400


def _session(folder: Path, session: str, cwd: str, said: list[str], age_days: float) -> Path:
    """A Claude Code transcript as Claude Code writes it, last used ``age_days`` ago."""
    lines: list[dict[str, object]] = [{"type": "summary", "summary": f"About {said[0]}", "leafUuid": "x"}]
    for i, text in enumerate(said):
        lines.append({"type": "user" if i % 2 == 0 else "assistant", "sessionId": session, "cwd": cwd,
                      "uuid": f"{session}-{i}", "timestamp": f"2026-11-0{1 + i % 9}T10:00:0{i % 10}.000Z",
                      "message": {"role": "user" if i % 2 == 0 else "assistant", "content": text}})
    path = folder / f"{session}.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(json.dumps(line) for line in lines) + "\n")
    moment = time.time() - age_days * DAY
    os.utime(path, (moment, moment))
    return path


def _home(tmp_path: Path) -> Path:
    """A home whose Claude Code has three sessions (26, 10 and 1 days old) and an auto-memory file."""
    home = tmp_path / "home"
    project = home / ".claude" / "projects" / "-home-dana-proxy"
    _session(project, "a1111111-0000-4000-8000-000000000001", "/home/dana/proxy",
             ["Which port does staging use?", "Port 8443."], 26)
    _session(project, "a2222222-0000-4000-8000-000000000002", "/home/dana/proxy",
             ["Where are the proxy logs?", "In /var/log/proxy."], 10)
    _session(project, "a3333333-0000-4000-8000-000000000003", "/home/dana/proxy",
             ["Rotate the TLS cert", "Done, it expires in March."], 1)
    memory = project / "memory"
    memory.mkdir()
    (memory / "MEMORY.md").write_text("# Memory\n\n- The staging proxy listens on 8443; prod on 443.\n")
    (home / ".claude" / "settings.json").write_text(json.dumps({"model": "opus"}))
    return home


def test_doctor_counts_the_transcripts_their_days_left_and_those_not_in_memory(
    tmp_path: Path, db: Database, fake_ollama: FakeOllama
) -> None:
    home = _home(tmp_path)
    done = run(db, fake_ollama, "doctor", HOME=str(home))
    assert done.returncode == 0, done.stdout + done.stderr  # a warning, not a failure
    [line] = [line for line in done.stdout.splitlines() if line[5:16] == "claude-code"]
    assert line.startswith("warn claude-code")
    assert "keeps 3 session transcripts" in line and "deletes each 30 days after its last use" in line
    assert "the oldest has 4 day(s) left" in line
    assert "3 sessions are not in memory yet, 1 of them deleted within 7 days" in line
    assert "ollama-mcp import --claude-code" in line

    imported = run(db, fake_ollama, "import", "--claude-code", HOME=str(home))
    assert imported.returncode == 0, imported.stderr
    after = run(db, fake_ollama, "doctor", HOME=str(home))
    assert "ok   claude-code" in after.stdout and "All are in memory." in after.stdout


def test_import_claude_code_finds_sessions_and_memory_files_once_leaving_the_files_as_they_were(
    tmp_path: Path, db: Database, fake_ollama: FakeOllama
) -> None:
    home = _home(tmp_path)
    memory_file = home / ".claude" / "projects" / "-home-dana-proxy" / "memory" / "MEMORY.md"
    before = (memory_file.read_bytes(), memory_file.stat().st_mtime_ns)
    done = run(db, fake_ollama, "import", "--claude-code", HOME=str(home))
    assert done.returncode == 0, done.stderr
    assert "claude-code: imported 4 new conversation(s) and 7 new turns" in done.stdout
    notes = rows(db, "SELECT content FROM memories WHERE kind = 'note'")
    assert notes == [("# Memory\n\n- The staging proxy listens on 8443; prod on 443.",)]
    projects = {json.loads(m)["project"] if isinstance(m, str) else m["project"]
                for (m,) in rows(db, "SELECT metadata FROM conversations")}
    assert projects == {"/home/dana/proxy"}
    assert (memory_file.read_bytes(), memory_file.stat().st_mtime_ns) == before  # read, never written
    again = run(db, fake_ollama, "import", "--claude-code", HOME=str(home))
    assert "imported 0 new conversation(s) and 0 new turns (7 of 7 were already present)" in again.stdout

    memory_file.write_text("# Memory\n\n- The staging proxy moved to 9443.\n")  # Claude Code changed it
    changed = run(db, fake_ollama, "import", "--claude-code", HOME=str(home))
    assert "imported 0 new conversation(s) and 1 new turns" in changed.stdout


def test_a_session_the_hooks_recorded_is_not_imported_a_second_time(
    tmp_path: Path, db: Database, fake_ollama: FakeOllama
) -> None:
    home = _home(tmp_path)
    session = "a3333333-0000-4000-8000-000000000003"
    payload = {"session_id": session, "transcript_path": "/nonexistent.jsonl", "cwd": "/home/dana/proxy",
               "hook_event_name": "UserPromptSubmit", "prompt": "Rotate the TLS cert"}
    env = {"PATH": os.environ["PATH"], "HOME": str(home), "OLLAMA_MCP_DB": db.url, "OLLAMA_HOST": fake_ollama.url}
    for args, sent in ((["hook", "UserPromptSubmit"], json.dumps(payload)), (["hook", "--drain"], "")):
        subprocess.run([str(SCRIPT), *args], input=sent, env=env, capture_output=True, text=True, timeout=60,
                       check=True, cwd="/")
    done = run(db, fake_ollama, "import", "--claude-code", HOME=str(home))
    assert "left out 1 session the hooks recorded as they happened" in done.stdout
    assert rows(db, "SELECT count(*) FROM memories WHERE content = 'Rotate the TLS cert'") == [(1,)]


def test_session_start_tells_the_user_of_transcripts_about_to_go_until_they_are_imported(
    tmp_path: Path, db: Database, fake_ollama: FakeOllama
) -> None:
    home = _home(tmp_path)
    env = {"PATH": os.environ["PATH"], "HOME": str(home), "OLLAMA_MCP_DB": db.url, "OLLAMA_HOST": fake_ollama.url}
    payload = json.dumps({"session_id": "b0000000-0000-4000-8000-000000000009", "transcript_path": "/x.jsonl",
                          "cwd": "/home/dana/proxy", "hook_event_name": "SessionStart", "source": "startup"})

    def start() -> dict[str, object]:
        done = subprocess.run([str(SCRIPT), "hook", "SessionStart"], input=payload, env=env, capture_output=True,
                              text=True, timeout=60, cwd="/")
        assert done.returncode == 0 and done.stderr == "", done.stderr
        return json.loads(done.stdout) if done.stdout.strip() else {}

    said = start()
    assert "1 of them deleted within 7 days" in str(said["systemMessage"])
    assert "ollama-mcp import --claude-code" in str(said["systemMessage"])
    assert "1 of them deleted within 7 days" in str(start()["systemMessage"])  # again, while it is about to go
    run(db, fake_ollama, "import", "--claude-code", HOME=str(home))
    assert "systemMessage" not in start()


def test_the_first_session_start_says_what_is_not_in_memory_and_later_ones_stay_quiet(
    tmp_path: Path, db: Database, fake_ollama: FakeOllama
) -> None:
    home = tmp_path / "home"
    _session(home / ".claude" / "projects" / "-home-dana-proxy", "d1111111-0000-4000-8000-000000000001",
             "/home/dana/proxy", ["Which port?", "8443."], 3)  # far from Claude Code's 30 days
    env = {"PATH": os.environ["PATH"], "HOME": str(home), "OLLAMA_MCP_DB": db.url, "OLLAMA_HOST": fake_ollama.url}
    said = []
    for session in ("e0000000-0000-4000-8000-000000000001", "e0000000-0000-4000-8000-000000000002"):
        payload = json.dumps({"session_id": session, "transcript_path": "/x.jsonl", "cwd": "/home/dana/proxy",
                              "hook_event_name": "SessionStart", "source": "startup"})
        done = subprocess.run([str(SCRIPT), "hook", "SessionStart"], input=payload, env=env, capture_output=True,
                              text=True, timeout=60, cwd="/")
        said.append(json.loads(done.stdout).get("systemMessage") if done.stdout.strip() else None)
    assert "1 session is not in memory yet: run `ollama-mcp import --claude-code`" in str(said[0])
    assert said[1] is None


def test_cleanup_period_days_is_raised_only_when_asked_never_into_a_broken_file(
    tmp_path: Path, db: Database, fake_ollama: FakeOllama
) -> None:
    home = _home(tmp_path)
    settings = home / ".claude" / "settings.json"
    plain = run(db, fake_ollama, "config", "--client", "claude-code-hooks", "--write", HOME=str(home))
    assert plain.returncode == 0, plain.stderr
    assert "cleanupPeriodDays" not in json.loads(settings.read_text())  # never silently
    assert "3 sessions are not in memory yet" in plain.stderr

    raised = run(db, fake_ollama, "config", "--client", "claude-code-hooks", "--write", "--cleanup-period-days",
                 "365", HOME=str(home))
    assert raised.returncode == 0, raised.stderr
    written = json.loads(settings.read_text())
    assert written["cleanupPeriodDays"] == 365 and written["model"] == "opus" and "SessionStart" in written["hooks"]
    assert f"set cleanupPeriodDays to 365 in {settings} (the previous file is kept as" in raised.stdout
    assert "deletes each 365 days after its last use" in raised.stderr
    assert list(settings.parent.glob("settings.json.bak-*"))

    settings.write_text("{not json")
    broken = run(db, fake_ollama, "config", "--client", "claude-code-hooks", "--write", "--cleanup-period-days",
                 "400", HOME=str(home))
    assert broken.returncode == 2 and f"{settings} is not valid JSON" in broken.stderr
    assert settings.read_text() == "{not json"
    alone = run(db, fake_ollama, "config", "--client", "cursor", "--write", "--cleanup-period-days", "400",
                HOME=str(home))
    assert alone.returncode == 2 and "--cleanup-period-days goes with --write and --client claude-code" in alone.stderr


def test_an_import_killed_half_way_resumes_to_the_same_store_as_one_run(
    tmp_path: Path, db: Database, fake_ollama: FakeOllama
) -> None:
    home = tmp_path / "home"
    project = home / ".claude" / "projects" / "-home-dana-big"
    for i in range(400):
        _session(project, f"c{i:07d}-0000-4000-8000-000000000000", "/home/dana/big",
                 [f"Question {i} about the build", f"Answer {i}: " + "details " * 200] * 3, 2)
    env = {"PATH": os.environ["PATH"], "HOME": str(home), "OLLAMA_MCP_DB": db.url, "OLLAMA_HOST": fake_ollama.url}
    proc = subprocess.Popen([str(SCRIPT), "import", "--claude-code"], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, cwd="/")
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and proc.poll() is None:
        if db.backend == "postgres" or (Path(db.url).exists() and Path(db.url).stat().st_size > 0):
            try:
                if rows(db, "SELECT count(*) FROM conversations")[0][0] >= 20:
                    break
            except Exception:  # noqa: BLE001 - the store is still being created
                pass
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    part = rows(db, "SELECT count(*) FROM conversations")[0][0]
    assert 0 < part < 400, part  # killed half-way
    done = run(db, fake_ollama, "import", "--claude-code", HOME=str(home))
    assert done.returncode == 0, done.stderr
    assert rows(db, "SELECT count(*) FROM conversations") == [(400,)]
    assert rows(db, "SELECT count(*), count(DISTINCT id) FROM memories") == [(2400, 2400)]

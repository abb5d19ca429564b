"""Claude Code's hooks replayed: recorded payloads sent to the commands `config --client
claude-code-hooks` prints, run the way Claude Code runs them (a shell, working directory /, a
minimal environment), on both storage backends, with Ollama down."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from ollama_mcp.app import open_app
from ollama_mcp.cli.hooks import CONTEXT_NOTICE
from ollama_mcp.config import Settings
from ollama_mcp.inputs.search import search_request
from tests.conftest import Database
from tests.support.fake_ollama import FakeOllama
from tests.support.http import SERVER, environment

pytestmark = pytest.mark.anyio

FIXTURES = Path(__file__).parent.parent / "fixtures" / "claude_code"
SESSION = "5d3c5a0e-8f2b-4f5e-9a51-2c1e0b7d9f10"
REPLY_FROM_TRANSCRIPT = (
    "Let me read the proxy config.\n\nThe staging proxy listens on port 8443 (deploy/proxy.toml, `listen = 8443`)."
)


def payload(name: str, project: str = "/home/dana/proxy", **changes: Any) -> dict[str, Any]:
    recorded = json.loads((FIXTURES / "payloads.json").read_text())[name]
    filled = {key: value.format(transcript=FIXTURES / "transcript.jsonl", project=project) if isinstance(value, str)
              else value for key, value in recorded.items()}
    return {**filled, **changes}


def hook_commands(settings: Settings) -> dict[str, str]:
    """The command for each event, from `config --client claude-code-hooks`."""
    done = subprocess.run([str(SERVER), "config", "--client", "claude-code-hooks"], env=environment(settings),
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    block = json.loads(done.stdout)["hooks"]
    assert set(block) == {"SessionStart", "UserPromptSubmit", "Stop", "SessionEnd"}
    return {event: entries[0]["hooks"][0]["command"] for event, entries in block.items()}


def fire(command: str, sent: object) -> subprocess.CompletedProcess[str]:
    """Run a hook command as Claude Code does: through a shell, from /, with the payload on stdin."""
    data = sent if isinstance(sent, str) else json.dumps(sent)
    return subprocess.run(["sh", "-c", command], input=data, env={"PATH": os.environ["PATH"]}, cwd="/",
                          capture_output=True, text=True, timeout=60)


def drained(settings: Settings) -> None:
    """Wait until the spooled prompts and replies are recorded: the drainer's own command, which
    waits for any drainer at work and records what is left."""
    done = subprocess.run([str(SERVER), "hook", "--drain"], env=environment(settings), capture_output=True,
                          text=True, timeout=60, cwd="/")
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")


def quiet(done: subprocess.CompletedProcess[str]) -> None:
    assert (done.returncode, done.stdout, done.stderr) == (0, "", ""), done.stderr


async def test_a_session_replayed_through_the_hooks_is_recorded_and_ended_with_ollama_down(
    settings: Settings, db: Database, fake_ollama: FakeOllama
) -> None:
    hooks = hook_commands(settings)
    fake_ollama.stop()  # the hook path never calls Ollama: the turns wait for a server's backfill
    quiet(fire(hooks["SessionStart"], payload("SessionStart")))  # a first session: nothing to recall, nothing printed
    quiet(fire(hooks["UserPromptSubmit"], payload("UserPromptSubmit")))
    quiet(fire(hooks["Stop"], payload("Stop")))  # the reply read back from the transcript file
    quiet(fire(hooks["Stop"], payload("Stop")))  # fired again for the same reply: a retry, kept once
    quiet(fire(hooks["UserPromptSubmit"], payload("UserPromptSubmit2")))
    quiet(fire(hooks["Stop"], payload("Stop2")))  # the reply as last_assistant_message
    quiet(fire(hooks["SessionEnd"], payload("SessionEnd")))

    [(conversation, name, status, metadata)] = db.rows("SELECT id, name, status, metadata FROM conversations")
    assert (name, status) == ("proxy", "completed")
    assert (json.loads(metadata) if isinstance(metadata, str) else metadata) == {
        "client": "claude-code", "session_id": SESSION, "project": "/home/dana/proxy"}
    assert db.rows("SELECT role, content FROM memories WHERE kind = 'message' ORDER BY seq") == [
        ("user", payload("UserPromptSubmit")["prompt"]), ("assistant", REPLY_FROM_TRANSCRIPT),
        ("user", payload("UserPromptSubmit2")["prompt"]), ("assistant", payload("Stop2")["last_assistant_message"])]
    # Every call is audited as through the hook door, the retry too (it wrote nothing new).
    assert db.rows("SELECT door, action FROM write_audit ORDER BY id") == [
        ("hook", "init_conversation"), *[("hook", "add_messages")] * 5, ("hook", "end_conversation")]

    # Once Ollama is back, a server embeds the turns and a search that includes messages finds them.
    fake_ollama.start()
    async with open_app(settings, background=False) as app:
        while await app.indexer.backfill_once():
            pass
        found = await app.recall.search(search_request("metrics exporter", everywhere=True))
    assert found.mode == "hybrid", found
    assert found.hits[0].memory.conversation_id == conversation
    assert found.hits[0].memory.content == payload("Stop2")["last_assistant_message"]


async def test_the_next_session_in_the_project_starts_with_what_the_last_one_said(
    settings: Settings, db: Database
) -> None:
    hooks = hook_commands(settings)
    for name in ("SessionStart", "UserPromptSubmit", "Stop", "UserPromptSubmit2", "Stop2", "SessionEnd"):
        quiet(fire(hooks[name.rstrip("2")], payload(name)))
    quiet(fire(hooks["UserPromptSubmit"], payload("UserPromptSubmit", "/home/dana/billing", session_id="other",
                                                   prompt="The invoice cron runs at 02:00.")))

    started = fire(hooks["SessionStart"], payload("SessionStart", session_id="next-session"))
    assert started.returncode == 0 and started.stderr == "" and started.stdout.count("\n") == 1
    output = json.loads(started.stdout)["hookSpecificOutput"]
    assert output["hookEventName"] == "SessionStart"
    context = output["additionalContext"]
    assert context.startswith(CONTEXT_NOTICE) and 'status="ended"' in context
    assert "user: Move it to 9443 and note why." in context
    assert "because 8443 clashed with the metrics exporter" in context
    assert "invoice cron" not in context  # another project's session is not this one's memory
    # The new session has its own conversation, and a session in an empty project starts with nothing.
    assert db.count("SELECT count(*) FROM conversations WHERE status = 'active'") == 2
    quiet(fire(hooks["SessionStart"], payload("SessionStart", "/home/dana/new-project", session_id="third")))


async def test_a_resumed_session_whose_conversation_ended_continues_in_a_new_one(
    settings: Settings, db: Database
) -> None:
    hooks = hook_commands(settings)
    for name in ("SessionStart", "UserPromptSubmit2", "Stop2", "SessionEnd"):
        quiet(fire(hooks[name.rstrip("2")], payload(name)))
    resumed = fire(hooks["SessionStart"], payload("SessionStart", source="resume"))
    assert "because 8443 clashed" in json.loads(resumed.stdout)["hookSpecificOutput"]["additionalContext"]
    quiet(fire(hooks["UserPromptSubmit"], payload("UserPromptSubmit")))
    drained(settings)
    assert db.rows("SELECT c.status, count(m.id) FROM conversations c LEFT JOIN memories m ON m.conversation_id = c.id"
                   " GROUP BY c.id, c.status, c.created_at ORDER BY c.created_at") == [("completed", 2), ("active", 1)]
    [(ended, _)] = db.rows("SELECT id, 0 FROM conversations WHERE status = 'completed'")
    [(resumed_in, _)] = db.rows("SELECT id, 0 FROM conversations WHERE status = 'active'")
    assert db.rows("SELECT conversation_id, related_id, kind FROM conversation_relations") == [
        (resumed_in, ended, "follow_up")]  # the new conversation continues the ended one


async def test_a_store_that_cannot_be_opened_records_nothing_and_the_hook_exits_0(
    settings: Settings, backend: str, tmp_path: Path
) -> None:
    """SessionStart and SessionEnd say so at once. A prompt or a reply is kept in the store's spool
    when there can be one (a PostgreSQL server that is down), and said at once when not (a SQLite
    path under a file: neither the store nor its spool can be there)."""
    if backend == "sqlite":
        (tmp_path / "a-file").write_text("")
        broken = f"OLLAMA_MCP_DB={tmp_path / 'a-file' / 'memory.db'}"
    else:
        broken = "OLLAMA_MCP_DB=postgresql://memory@127.0.0.1:1/memory"
    for event in ("SessionStart", "UserPromptSubmit", "Stop", "SessionEnd"):
        command = hook_commands(settings)[event]
        done = fire(f"HOME={tmp_path} {broken} {command.split(' ', 1)[1]}",
                    payload(event if event != "Stop" else "Stop2"))
        assert done.returncode == 0 and done.stdout == ""
        if backend == "postgres" and event in ("UserPromptSubmit", "Stop"):
            assert done.stderr == ""
            continue
        assert done.stderr.count("\n") == 1 and done.stderr.startswith(f"ollama-mcp hook {event}: nothing recorded: ")
    if backend == "postgres":  # the prompt and the reply wait for the server, in its spool
        [spool] = (tmp_path / ".local" / "share" / "ollama-mcp" / "hook-spool").iterdir()
        assert len(list(spool.glob("*.json"))) == 2


@pytest.mark.sqlite_only  # (a store path that cannot be opened until it is mended)
async def test_turns_spooled_while_the_store_is_closed_are_recorded_in_order_at_the_next_start(
    settings: Settings, db: Database
) -> None:
    hooks = hook_commands(settings)
    settings.db_path.parent.mkdir(parents=True, exist_ok=True)
    settings.db_path.write_bytes(b"not a database " * 100)  # no store can be opened
    for name in ("UserPromptSubmit", "Stop", "UserPromptSubmit2", "Stop2"):
        quiet(fire(hooks[name.rstrip("2")], payload(name)))  # handed to the spool: the editor waits for nothing
    drained(settings)  # the drainers could not open the store; the turns stay
    spool = settings.db_path.with_name(settings.db_path.name + ".hook-spool")
    assert len(list(spool.glob("*.json"))) == 4

    settings.db_path.unlink()  # mended
    started = fire(hooks["SessionStart"], payload("SessionStart", session_id="a-later-session"))
    assert started.returncode == 0 and started.stderr == "" and list(spool.glob("*.json")) == []
    # Recorded before the new session looked back: it starts knowing what they said.
    context = json.loads(started.stdout)["hookSpecificOutput"]["additionalContext"]
    assert payload("Stop2")["last_assistant_message"][:40] in context
    assert db.rows("SELECT role, content FROM memories WHERE kind = 'message' ORDER BY seq") == [
        ("user", payload("UserPromptSubmit")["prompt"]), ("assistant", REPLY_FROM_TRANSCRIPT),
        ("user", payload("UserPromptSubmit2")["prompt"]), ("assistant", payload("Stop2")["last_assistant_message"])]
    sessions = db.rows("SELECT json_extract(metadata, '$.session_id') FROM conversations ORDER BY created_at")
    assert sessions == [(SESSION,), ("a-later-session",)]


@pytest.mark.parametrize(("sent", "said"), [
    ("not json", "stdin is not the hook's JSON"),
    ([], "stdin must be the hook's JSON object"),
    ({"hook_event_name": "UserPromptSubmit", "prompt": "hi"}, "the payload has no session_id"),
    ({"session_id": 7, "prompt": "hi"}, "session_id must be a text in the hook's JSON, not int"),
    ({"session_id": "s", "prompt": ["hi"]}, "prompt must be a text in the hook's JSON, not list"),
    ("[" * 200_000 + "]" * 200_000, "nested deeper than 64 levels"),  # was a RecursionError traceback
])
async def test_a_payload_that_is_not_a_hooks_records_nothing_and_says_which_field(
    settings: Settings, db: Database, sent: object, said: str
) -> None:
    hooks = hook_commands(settings)
    quiet(fire(hooks["SessionStart"], payload("SessionStart")))
    done = fire(hooks["UserPromptSubmit"], sent)
    assert done.returncode == 0 and done.stdout == "" and said in done.stderr, done.stderr
    drained(settings)
    assert db.count("SELECT count(*) FROM memories") == 0


def test_a_stop_hook_given_a_fifo_or_a_device_returns_at_once_recording_nothing(
    settings: Settings, db: Database, tmp_path: Path
) -> None:
    fifo = tmp_path / "transcript.fifo"
    os.mkfifo(fifo)
    hooks = hook_commands(settings)
    quiet(fire(hooks["SessionStart"], payload("SessionStart")))
    for path in (fifo, Path("/dev/zero")):
        sent = payload("Stop", transcript_path=str(path))
        sent.pop("last_assistant_message", None)
        started = time.monotonic()
        done = fire(hooks["Stop"], sent)  # before the fix: blocked on the FIFO, read /dev/zero until killed
        assert time.monotonic() - started < 30
        assert done.returncode == 0 and done.stdout == "", done.stderr
        assert f"transcript_path {path} is not a regular file; the reply was not recorded" in done.stderr
    assert db.count("SELECT count(*) FROM memories WHERE kind = 'message'") == 0


def test_hook_help_says_when_it_exits_1() -> None:
    done = subprocess.run([str(SERVER), "hook", "--help"], capture_output=True, text=True, timeout=60)
    said = " ".join(done.stdout.split())
    assert "always exits 0" not in said and "naming an event it does not handle exits 1" in said


def test_a_command_line_naming_no_event_exits_1_which_claude_code_shows_without_blocking() -> None:
    done = subprocess.run([str(SERVER), "hook", "PreToolUse"], input="{}", capture_output=True, text=True, timeout=60)
    assert done.returncode == 1 and done.stdout == ""
    assert "'PreToolUse' is not a Claude Code event this handles; use one of SessionStart" in done.stderr


async def test_the_event_may_come_from_the_payload_and_in_any_spelling(settings: Settings, db: Database) -> None:
    command = hook_commands(settings)["Stop"].rsplit(" ", 1)[0]  # `... ollama-mcp hook`, no event
    quiet(fire(command, payload("UserPromptSubmit")))
    quiet(fire(command + " stop", payload("Stop2")))
    drained(settings)
    assert [role for (role,) in db.rows("SELECT role FROM memories ORDER BY seq")] == ["user", "assistant"]


async def test_a_prompt_longer_than_a_memory_may_be_is_recorded_cut_and_says_so(
    settings: Settings, db: Database
) -> None:
    long = "word " * 30_000
    quiet(fire(hook_commands(settings)["UserPromptSubmit"], payload("UserPromptSubmit", prompt=long)))
    drained(settings)
    [(content,)] = db.rows("SELECT content FROM memories")
    assert len(content) == settings.max_content_chars and content.startswith("word word")
    assert content.endswith("more characters not recorded]")


async def test_a_session_in_a_worktree_starts_with_what_a_session_in_its_repository_said(
    settings: Settings, db: Database, tmp_path: Path
) -> None:
    """The project is the repository, resolved by the hook itself: a second window on another
    branch (a linked worktree) is the same project, without the model passing anything."""
    repo, worktree = tmp_path / "proxy", tmp_path / "proxy-tls"
    (repo / "src").mkdir(parents=True)
    for args in (["init", "-q"], ["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "--allow-empty",
                                  "-m", "s"], ["worktree", "add", "-q", str(worktree)]):
        subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True)
    hooks = hook_commands(settings)
    for name in ("SessionStart", "UserPromptSubmit", "SessionEnd"):
        quiet(fire(hooks[name], payload(name, str(repo / "src"), prompt="The TLS port is 9443.")))
    started = fire(hooks["SessionStart"], payload("SessionStart", str(worktree), session_id="in-the-worktree"))
    assert "The TLS port is 9443." in json.loads(started.stdout)["hookSpecificOutput"]["additionalContext"]
    projects = db.rows("SELECT metadata FROM conversations ORDER BY created_at")
    assert [json.loads(m)["project"] if isinstance(m, str) else m["project"] for (m,) in projects] == [str(repo)] * 2

"""``ollama-mcp import`` of the histories people have elsewhere, through the real CLI on both
backends: ChatGPT (a tree with a regenerated answer), Claude.ai, Claude Code (tool use, a
subagent's sidechain, a worktree), the MCP memory server's graph; then each bad input."""

from __future__ import annotations

import json
import subprocess
import zipfile
from pathlib import Path
from typing import Any

import anyio

from ollama_mcp.config import Settings
from tests.conftest import Database, connect
from tests.support.chats import chatgpt_conversation
from tests.support.cli import rows, run
from tests.support.fake_ollama import FakeOllama
from tests.support.mcp_client import call


def first_hit(db: Database, fake: FakeOllama, question: str) -> str:
    """The best hit of ``search_all_conversations`` for ``question``, through the MCP tool."""
    settings = Settings.from_env({"OLLAMA_MCP_DB": db.url, "OLLAMA_HOST": fake.url, "HOME": "/nonexistent"})

    async def search() -> str:
        async with connect(settings) as client:
            found = await call(client, "search_all_conversations", query=question, top_k=3)
        return str(found["results"][0]["content"])

    return anyio.run(search)


def as_json(value: Any) -> Any:
    """A JSON column as SQLite (text) or PostgreSQL (decoded) returns it."""
    return json.loads(value) if isinstance(value, str) else value


def messages(db: Database) -> list[tuple[str, str]]:
    return rows(db, "SELECT role, content FROM memories WHERE kind = 'message' ORDER BY seq")


def test_a_chatgpt_export_imports_the_current_branch_in_order_with_titles_and_times_once(
    tmp_path: Path, db: Database, fake_ollama: FakeOllama
) -> None:
    export = tmp_path / "conversations.json"
    export.write_text(json.dumps([chatgpt_conversation()]))
    done = run(db, fake_ollama, "import", str(export))
    assert done.returncode == 0, done.stderr
    assert "chatgpt: imported 1 new conversation(s) and 4 new turns (0 of 4 were already present)" in done.stdout
    assert messages(db) == [
        ("user", "Which day do the flights to Lisbon leave?"),
        ("assistant", "They leave on May 4.\n[image_asset_pointer]"),
        ("user", "And the hotel?"), ("assistant", "The Alfama hotel, three nights."),
    ]
    (name, status, metadata), = rows(db, "SELECT name, status, metadata FROM conversations")
    assert (name, status) == ("Lisbon trip", "completed")
    assert as_json(metadata) == {"source": "chatgpt", "source_id": "c-1"}
    times = [r[0] for r in rows(db, "SELECT occurred_at FROM memories ORDER BY seq")]
    assert times == ["2023-11-14T22:13:30.000000Z", "2023-11-14T22:13:50.000000Z", "2023-11-14T22:14:00.000000Z",
                     "2023-11-14T22:14:10.000000Z"]

    again = run(db, fake_ollama, "import", str(export))
    assert "imported 0 new conversation(s) and 0 new turns (4 of 4 were already present)" in again.stdout
    # A newer export of the same chat, with two more exchanges, and a zip of it: only those are new.
    newer = tmp_path / "chatgpt-export.zip"
    with zipfile.ZipFile(newer, "w") as archive:
        archive.writestr("conversations.json", json.dumps([chatgpt_conversation(extra=2)]))
        archive.writestr("chat.html", "<html></html>")
    later = run(db, fake_ollama, "import", str(newer))
    assert "imported 0 new conversation(s) and 4 new turns (4 of 8 were already present)" in later.stdout
    assert [m[1] for m in messages(db)][-1] == "Follow-up answer 1"
    assert first_hit(db, fake_ollama, "which hotel in Alfama?") == "The Alfama hotel, three nights."


def test_a_claude_ai_export_keeps_text_and_tool_use_and_leaves_thinking_out(
    tmp_path: Path, db: Database, fake_ollama: FakeOllama
) -> None:
    export = tmp_path / "conversations.json"
    export.write_text(json.dumps([{
        "uuid": "u-1", "name": "Garden plans", "created_at": "2024-03-01T09:00:00.000000Z",
        "chat_messages": [
            {"uuid": "m1", "sender": "human", "created_at": "2024-03-01T09:00:05Z", "text": "Plant tomatoes when?",
             "content": [{"type": "text", "text": "Plant tomatoes when?"}]},
            {"uuid": "m2", "sender": "assistant", "created_at": "2024-03-01T09:00:09Z", "text": "",
             "content": [{"type": "thinking", "thinking": "secret reasoning"},
                         {"type": "tool_use", "name": "web_search", "input": {"query": "tomato frost dates"}},
                         {"type": "text", "text": "After the last frost, mid-May."}]},
            {"uuid": "m3", "sender": "human", "created_at": "2024-03-01T09:01:00Z", "text": "Thanks"},
        ],
    }]))
    done = run(db, fake_ollama, "import", str(export))
    assert done.returncode == 0, done.stderr
    assert "claude.ai: imported 1 new conversation(s) and 4 new turns" in done.stdout
    assert messages(db) == [
        ("user", "Plant tomatoes when?"), ("assistant", "After the last frost, mid-May."),
        ("tool", 'called web_search {"query": "tomato frost dates"}'), ("user", "Thanks"),
    ]
    assert not rows(db, "SELECT 1 FROM memories WHERE content LIKE ?", "%secret%")
    assert rows(db, "SELECT name FROM conversations") == [("Garden plans",)]
    assert first_hit(db, fake_ollama, "when after the frost?") == "After the last frost, mid-May."


def _session_lines(session: str, cwd: str) -> list[dict[str, Any]]:
    base = {"sessionId": session, "cwd": cwd, "isSidechain": False}
    return [
        {"type": "summary", "summary": "Fix the flaky upload test", "leafUuid": "x"},
        {**base, "type": "user", "uuid": "l1", "timestamp": "2025-02-01T10:00:00Z",
         "message": {"role": "user", "content": "The upload test fails one run in ten"}},
        {**base, "type": "assistant", "uuid": "l2", "timestamp": "2025-02-01T10:00:05Z",
         "message": {"role": "assistant", "content": [
             {"type": "thinking", "thinking": "hmm"}, {"type": "text", "text": "Let me run it."},
             {"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "pytest tests/test_upload.py"}}]}},
        {**base, "type": "user", "uuid": "l3", "timestamp": "2025-02-01T10:00:09Z",
         "message": {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1",
                                                   "content": "1 failed, 9 passed"}]}},
        {**base, "type": "assistant", "uuid": "s1", "isSidechain": True, "timestamp": "2025-02-01T10:00:10Z",
         "message": {"role": "assistant", "content": "a subagent's own work"}},
        {**base, "type": "user", "uuid": "m1", "isMeta": True, "timestamp": "2025-02-01T10:00:11Z",
         "message": {"role": "user", "content": "<local-command-stdout></local-command-stdout>"}},
        {**base, "type": "assistant", "uuid": "l4", "timestamp": "2025-02-01T10:01:00Z",
         "message": {"role": "assistant", "content": [{"type": "text", "text": "The race is in the temp dir."}]}},
    ]


def test_claude_code_sessions_import_tool_turns_without_sidechains_filing_worktrees_under_their_repository(
    tmp_path: Path, db: Database, fake_ollama: FakeOllama
) -> None:
    repo, worktree = tmp_path / "shop", tmp_path / "shop-feature"
    repo.mkdir()
    for args in (["init", "-q"], ["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "--allow-empty",
                                  "-m", "s"], ["worktree", "add", "-q", str(worktree)]):
        subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True)
    projects = tmp_path / "projects"
    (projects / "shop").mkdir(parents=True)
    (projects / "shop" / "s-1.jsonl").write_text(
        "\n".join(json.dumps(line) for line in _session_lines("s-1", str(repo / "src"))) + "\n{broken\n")
    (projects / "shop-feature").mkdir()
    (projects / "shop-feature" / "s-2.jsonl").write_text(
        "\n".join(json.dumps(line) for line in _session_lines("s-2", str(worktree))) + "\n")

    done = run(db, fake_ollama, "import", str(projects))
    assert done.returncode == 0, done.stderr
    assert "claude-code: imported 2 new conversation(s) and 10 new turns" in done.stdout
    assert "skipped 1: shop/s-1.jsonl line 8: is not JSON" in done.stdout
    found = rows(db, "SELECT name, metadata FROM conversations ORDER BY name")
    assert [name for name, _ in found] == ["Fix the flaky upload test", "Fix the flaky upload test"]
    assert {as_json(m)["project"] for _, m in found} == {str(repo)}  # the worktree is the repository's
    assert messages(db)[:5] == [
        ("user", "The upload test fails one run in ten"), ("assistant", "Let me run it."),
        ("tool", 'called Bash {"command": "pytest tests/test_upload.py"}'), ("tool", "result: 1 failed, 9 passed"),
        ("assistant", "The race is in the temp dir."),
    ]
    left_out = "SELECT 1 FROM memories WHERE content LIKE ? OR content LIKE ?"
    assert not rows(db, left_out, "%subagent%", "%local-command%")
    assert first_hit(db, fake_ollama, "what race in the temp dir?") == "The race is in the temp dir."


def test_the_memory_servers_graph_becomes_notes_found_by_search(
    tmp_path: Path, db: Database, fake_ollama: FakeOllama
) -> None:
    graph = tmp_path / "memory.jsonl"
    graph.write_text("\n".join(json.dumps(e) for e in (
        {"type": "entity", "name": "Ada", "entityType": "person", "observations": ["Prefers tea", "Lives in Porto"]},
        {"type": "entity", "name": "Porto", "entityType": "city", "observations": []},
        {"type": "relation", "from": "Ada", "to": "Porto", "relationType": "lives in"},
    )) + "\n")
    done = run(db, fake_ollama, "import", str(graph))
    assert done.returncode == 0, done.stderr
    assert "memory-server: imported 1 new conversation(s) and 3 new turns" in done.stdout
    assert rows(db, "SELECT kind, content FROM memories ORDER BY seq") == [
        ("note", "Ada (person): Prefers tea"), ("note", "Ada (person): Lives in Porto"), ("note", "Ada lives in Porto"),
    ]
    assert "imported 0 new conversation(s) and 0 new turns" in run(db, fake_ollama, "import", str(graph)).stdout

    assert first_hit(db, fake_ollama, "Does Ada drink tea?") == "Ada (person): Prefers tea"


def test_dry_run_counts_without_writing_and_since_leaves_older_turns_out(
    tmp_path: Path, db: Database, fake_ollama: FakeOllama
) -> None:
    export = tmp_path / "conversations.json"
    export.write_text(json.dumps([chatgpt_conversation(), chatgpt_conversation("c-2", "Old", 0)]))
    dry = run(db, fake_ollama, "import", "--dry-run", str(export))
    assert dry.returncode == 0, dry.stderr
    assert "chatgpt: would import 2 new conversation(s) and 8 new turns (0 of 8 were already present)" in dry.stdout
    assert rows(db, "SELECT count(*) FROM memories") == [(0,)]
    since = run(db, fake_ollama, "import", "--since", "2023-11-14T22:13:55Z", str(export))
    assert "imported 2 new conversation(s) and 4 new turns" in since.stdout, since.stdout + since.stderr
    assert [m[1] for m in messages(db)] == ["And the hotel?", "The Alfama hotel, three nights."] * 2


def test_bad_files_are_refused_naming_what_was_expected_and_nothing_is_written(
    tmp_path: Path, db: Database, fake_ollama: FakeOllama
) -> None:
    def refused(name: str, content: bytes | None, *expected: str, args: tuple[str, ...] = ()) -> None:
        path = tmp_path / name
        if content is not None:
            path.write_bytes(content)
        done = run(db, fake_ollama, "import", *args, str(path))
        assert done.returncode == 2, (name, done.stdout, done.stderr)
        for text in expected:
            assert text in done.stderr, (name, done.stderr)

    refused("empty.json", b"", "FILE: empty.json is empty")
    refused("notes.txt", b"just some words", "is not JSON or JSON lines", "a ChatGPT data export")
    refused("other.json", b'[{"foo": 1}]', "holds a list of no format ollama-mcp imports")
    refused("export.zip", b'[{"mapping": {}}]', "ends in .zip but is not a zip archive")
    with zipfile.ZipFile(tmp_path / "whole.zip", "w") as archive:
        archive.writestr("conversations.json", json.dumps([chatgpt_conversation()] * 3))
    (tmp_path / "cut.zip").write_bytes((tmp_path / "whole.zip").read_bytes()[:200])
    refused("cut.zip", None, "is not a complete zip archive", "download the export again")
    with zipfile.ZipFile(tmp_path / "evil.zip", "w") as archive:
        archive.writestr("../../conversations.json", "[]")
    refused("evil.zip", None, "holds paths outside its own folder ('../../conversations.json')")
    with zipfile.ZipFile(tmp_path / "photos.zip", "w") as archive:
        archive.writestr("photo.jpg", "x")
    refused("photos.zip", None, "holds no conversations.json")
    refused("x.json", b"[]", "--format: invalid choice: 'word'", args=("--format", "word"))
    # Every refusal came before the store was opened: it was not even created.
    if db.backend == "sqlite":
        assert not Path(db.url).exists()
    else:
        assert rows(db, "SELECT to_regclass('conversations')") == [(None,)]

    # A list that breaks off: the whole conversations before the break are kept, and the error says so.
    whole = json.dumps([chatgpt_conversation("c-1"), chatgpt_conversation("c-2")])
    cut = tmp_path / "cut.json"
    cut.write_text(whole[: len(whole) - 40])
    done = run(db, fake_ollama, "import", str(cut))
    assert done.returncode == 2 and "breaks off or is not valid JSON" in done.stderr
    assert "The 1 new conversation before the break was imported." in done.stderr
    assert rows(db, "SELECT count(*) FROM conversations") == [(1,)]

    # Malformed conversations inside a good file are skipped with their reason; the rest is imported.
    mixed = tmp_path / "mixed.json"
    broken = {**chatgpt_conversation("c-9"), "current_node": "nowhere"}
    mixed.write_text(json.dumps([broken, "not an object", chatgpt_conversation("c-3")]))
    done = run(db, fake_ollama, "import", str(mixed))
    assert done.returncode == 0, done.stderr
    assert "imported 1 new conversation(s)" in done.stdout
    assert "skipped 2: conversation 1 (id c-9): its current_node is not one of its messages; " \
           "conversation 2: is not an object" in done.stdout


def test_summarize_queues_a_summary_per_grown_conversation_and_says_how_long_the_budget_takes(
    tmp_path: Path, db: Database, fake_ollama: FakeOllama
) -> None:
    export = tmp_path / "conversations.json"
    export.write_text(json.dumps([chatgpt_conversation(), chatgpt_conversation("c-2", "Old", 0)]))
    refused = run(db, fake_ollama, "import", "--summarize", str(export), OLLAMA_MCP_CHAT_MODEL="none")
    assert refused.returncode != 0 and "--summarize" in refused.stderr and "OLLAMA_MCP_CHAT_MODEL" in refused.stderr
    assert rows(db, "SELECT count(*) FROM memories") == [(0,)]

    plain = run(db, fake_ollama, "import", str(export))
    assert "queued" not in plain.stdout and rows(db, "SELECT count(*) FROM jobs WHERE kind = 'summarize'") == [(0,)]
    export.write_text(json.dumps([chatgpt_conversation(extra=1), chatgpt_conversation("c-2", "Old", 0),
                                  chatgpt_conversation("c-3", "New", 0)]))
    asked = run(db, fake_ollama, "import", "--summarize", str(export), OLLAMA_MCP_CHAT_CALLS_PER_HOUR="1")
    assert asked.returncode == 0, asked.stderr
    assert ("queued 2 summaries: the server writes them in the background, at most 1 chat-model call an hour"
            " (OLLAMA_MCP_CHAT_CALLS_PER_HOUR): about 2.0 hour(s) or more") in asked.stdout
    queued = rows(db, "SELECT c.name FROM jobs j JOIN conversations c ON c.id = j.conversation_id"
                      " WHERE j.kind = 'summarize' AND j.state = 'queued' ORDER BY c.name")
    assert queued == [("Lisbon trip",), ("New",)]  # "Old" gained nothing

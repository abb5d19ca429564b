"""Hostile input on every door that reads JSON from outside (#80 items 1 and 2): nesting far past
what any export or request holds is refused before it is built, in bounded memory and time, with
a line naming the file, line or field; REST values that used to answer 500 are a JSON 400/404
naming the field. Both backends, the real CLI and the real HTTP server."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import time
import zipfile
from pathlib import Path

import anyio
import httpx2
import pytest

from ollama_mcp.app import App, open_app
from ollama_mcp.cli import admin
from ollama_mcp.config import Settings
from ollama_mcp.rest.models import PREFIX
from tests.conftest import Database
from tests.support.cli import SCRIPT, rows
from tests.support.fake_ollama import FakeOllama
from tests.support.http import serving
from tests.support.view import BASE, csrf_of, view

pytestmark = pytest.mark.anyio

DEEP = 200_000  # levels: a 400 KB file, which took the CLI to MemoryError after 33-38 s
MEMORY_CEILING = 1 << 30  # bytes of address space the CLI may take (it needs about 300 MB to start)


def _import_limited(db: Database, fake: FakeOllama, path: Path) -> tuple[subprocess.CompletedProcess[str], float]:
    """``ollama-mcp import PATH`` under a 1 GiB address-space ceiling, and how long it took."""
    env = {"PATH": os.environ.get("PATH", ""), "HOME": "/nonexistent", "OLLAMA_HOST": fake.url,
           "OLLAMA_MCP_DB": db.url}

    def ceiling() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (MEMORY_CEILING, MEMORY_CEILING))

    started = time.monotonic()
    done = subprocess.run([str(SCRIPT), "import", str(path)], capture_output=True, text=True, timeout=120,
                          env=env, cwd="/", preexec_fn=ceiling)
    return done, time.monotonic() - started


def _store(db: Database, fake: FakeOllama) -> None:
    """The store, made (an import refused before it opens the store leaves none to look at)."""
    async def made() -> None:
        settings = Settings.from_env({"OLLAMA_MCP_DB": db.url, "OLLAMA_HOST": fake.url, "HOME": "/nonexistent"})
        async with open_app(settings, background=False):
            pass

    anyio.run(made)


def test_an_export_nested_200000_deep_is_refused_naming_the_file_in_bounded_memory_and_time(
    tmp_path: Path, db: Database, fake_ollama: FakeOllama
) -> None:
    listed = tmp_path / "conversations.json"
    listed.write_text("[" * DEEP + "]" * DEEP)
    ours = tmp_path / "backup.json"
    ours.write_text('{"format": "ollama-mcp-export", "x": ' + "[" * DEEP + "]" * DEEP + "}")
    _store(db, fake_ollama)
    zipped = tmp_path / "chatgpt.zip"
    with zipfile.ZipFile(zipped, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("conversations.json", "[" * DEEP + "]" * DEEP)
    for path in (listed, ours, zipped):
        done, seconds = _import_limited(db, fake_ollama, path)
        assert done.returncode != 0 and seconds < 30, (path.name, seconds, done.stderr[-500:])
        assert "nested deeper than 64 levels" in done.stderr, done.stderr[-500:]
        assert path.name in done.stderr and "Traceback" not in done.stderr
    assert rows(db, "SELECT count(*) FROM conversations") == [(0,)]


def test_a_jsonl_line_nested_200000_deep_is_skipped_naming_its_line(
    tmp_path: Path, db: Database, fake_ollama: FakeOllama
) -> None:
    graph = tmp_path / "memory.jsonl"
    entity = {"type": "entity", "name": "Dana", "entityType": "person", "observations": ["likes tea"]}
    graph.write_text(json.dumps(entity) + "\n" + "[" * DEEP + "]" * DEEP + "\n")
    session = tmp_path / "session.jsonl"
    line = {"type": "user", "sessionId": "s1", "cwd": "/tmp/p", "uuid": "u1", "timestamp": "2026-01-01T00:00:00Z",
            "message": {"role": "user", "content": "hello there"}}
    session.write_text(json.dumps(line) + "\n" + '{"a": ' + "[" * DEEP + "]" * DEEP + "}\n")
    for path in (graph, session):
        done, seconds = _import_limited(db, fake_ollama, path)
        assert done.returncode == 0 and seconds < 30, (path.name, seconds, done.stderr[-500:])
        assert f"{path.name} line 2: is nested deeper than 64 levels" in done.stdout, done.stdout
    assert rows(db, "SELECT content FROM memories ORDER BY seq") == [("Dana (person): likes tea",), ("hello there",)]


async def test_rest_answers_hostile_values_with_a_json_error_naming_the_field(
    settings: Settings, db: Database
) -> None:
    _, secret = await admin.create_token(settings, "alice-laptop", "alice")
    async with serving(settings) as url, httpx2.AsyncClient(
        headers={"Authorization": f"Bearer {secret}"}, timeout=30
    ) as http:
        base = url.removesuffix("/mcp") + PREFIX
        created = (await http.post(base + "/conversations", json={"name": "x"})).json()
        turns = f"{base}/conversations/{created['id']}/turns"
        nested = '{"role": "assistant", "content": "", "tool_calls": ' + "[" * 10_000 + "]" * 10_000 + "}"
        deep = await http.post(turns, content=nested, headers={"content-type": "application/json"})
        assert deep.status_code == 400, deep.text
        assert "nested deeper than 64 levels" in deep.json()["error"]
        surrogate = await http.post(base + "/conversations", content='{"name": "a\\ud800b"}',
                                    headers={"content-type": "application/json"})
        assert surrogate.status_code == 400, surrogate.text
        assert surrogate.json()["field"] == "name" and "surrogate" in surrogate.json()["error"]
        superscript = await http.get(f"{turns}?limit=²")
        assert superscript.status_code == 400 and superscript.json()["field"] == "limit", superscript.text
        for job in ("²", "9" * 40):
            missing = await http.get(f"{base}/jobs/{job}")
            assert missing.status_code == 404, (job, missing.text)
            assert missing.headers["content-type"].startswith("application/json")
        listed = (await http.get(base + "/conversations")).json()["conversations"]
        assert [c["id"] for c in listed] == [created["id"]]  # the refused name made none
        assert (await http.get(turns)).json()["turns"] == []  # the refused turn was not kept


async def test_an_upload_nested_100000_deep_is_refused_at_once_and_the_page_says_why(app: App, db: Database) -> None:
    async with view(app) as client:
        token = csrf_of(await client.get("/import"))
        started = time.monotonic()
        refused = await client.post("/import", data={"csrf": token}, headers={"origin": BASE},
                                    files={"file": ("conversations.json", b"[" * 100_000 + b"]" * 100_000,
                                                    "application/json")})
        assert time.monotonic() - started < 10  # it took the shared server to 4 GB and a 500
    assert refused.status_code == 400, refused.text
    assert "conversations.json is nested deeper than 64 levels" in refused.text
    assert db.count("SELECT count(*) FROM conversations") == 0


def test_imports_of_broken_files_say_what_is_wrong_and_fail_when_nothing_was_read(
    tmp_path: Path, db: Database, fake_ollama: FakeOllama
) -> None:
    from tests.support.chats import chatgpt_conversation  # noqa: PLC0415
    from tests.support.cli import run  # noqa: PLC0415

    latin = tmp_path / "memory.jsonl"  # a stray latin-1 byte in the first line was a UnicodeDecodeError traceback
    latin.write_bytes(b'{"type": "entity", "name": "Ren\xe9", "entityType": "person", "observations": ["cycles"]}\n')
    done = run(db, fake_ollama, "import", str(latin))
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    assert "imported 1 new conversation(s) and 1 new turns" in done.stdout

    broken_first = tmp_path / "conversations.json"  # refused whole before; skipped with its reason now
    broken_first.write_text(json.dumps([{"id": "x"}, chatgpt_conversation()]))
    done = run(db, fake_ollama, "import", str(broken_first))
    assert done.returncode == 0, done.stderr
    assert "imported 1 new conversation(s) and 4 new turns" in done.stdout
    assert "skipped 1: conversation 1" in done.stdout

    truncated = tmp_path / "truncated.json"
    truncated.write_text(json.dumps([chatgpt_conversation("c-8"), chatgpt_conversation("c-9")])[:-40])
    done = run(db, fake_ollama, "import", str(truncated))
    assert done.returncode != 0 and "breaks off or is not valid JSON" in done.stderr
    said = [line for line in done.stderr.splitlines() if "truncated.json" in line]
    assert len(said) == 1 and "Traceback" not in done.stderr, done.stderr

    nothing = tmp_path / "nothing.json"
    nothing.write_text(json.dumps([{"id": "a", "mapping": {}}, {"id": "b", "mapping": {}}]))
    done = run(db, fake_ollama, "import", str(nothing))
    assert done.returncode == 1, done.stdout
    assert "nothing.json: nothing in it could be imported" in done.stderr


HUGE_TURN = 128 << 20  # one turn's bytes: 32 MB took 4.5 s and 150 MB, 128 MB past a minute before


def _with_huge_turn(path: Path, export: str, placeholder: str) -> None:
    """``export`` written to ``path`` with ``placeholder`` (inside a JSON string) replaced by
    ``HUGE_TURN`` bytes of words, written a megabyte at a time."""
    head, tail = export.split(placeholder)
    words = ("deploy on fridays " * ((1 << 20) // 18 + 1))[: 1 << 20].encode()
    with path.open("wb") as out:
        out.write(head.encode())
        for _ in range(HUGE_TURN >> 20):
            out.write(words)
        out.write(tail.encode())


@pytest.mark.slow
def test_a_turn_of_128_mb_is_cut_while_it_streams_and_the_summary_says_so(
    tmp_path: Path, db: Database, fake_ollama: FakeOllama
) -> None:
    from tests.support.chats import chatgpt_conversation  # noqa: PLC0415

    chat = chatgpt_conversation()
    chat["mapping"]["q2"]["message"]["content"]["parts"] = ["HUGE"]
    listed = tmp_path / "conversations.json"
    _with_huge_turn(listed, json.dumps([chat]), "HUGE")
    session = tmp_path / "session.jsonl"
    line = {"type": "user", "sessionId": "s1", "cwd": "/tmp/p", "uuid": "u1", "timestamp": "2026-01-01T00:00:00Z",
            "message": {"role": "user", "content": "HUGE"}}
    _with_huge_turn(session, json.dumps(line) + "\n", "HUGE")
    for path in (listed, session):
        done, seconds = _import_limited(db, fake_ollama, path)
        assert done.returncode == 0 and seconds < 30, (path.name, seconds, done.stderr[-500:])
        assert "cut 1 turn longer than 100,000 characters at that length" in done.stdout, done.stdout
    cut = [(len(text), text[:18], text[-1]) for (text,) in rows(db, "SELECT content FROM memories")
           if len(text) > 1000]
    assert cut == [(100_000, "deploy on fridays ", "…")] * 2


def test_a_zip_bomb_is_refused_unexpanded_and_an_overlong_line_is_skipped_after_cutting(
    tmp_path: Path, db: Database, fake_ollama: FakeOllama
) -> None:
    bomb = tmp_path / "chatgpt.zip"
    with zipfile.ZipFile(bomb, "w", zipfile.ZIP_DEFLATED) as archive, archive.open("conversations.json", "w") as out:
        out.write(b'[{"id": "x", "mapping": {}, "title": "')
        for _ in range(256):
            out.write(b"a" * (1 << 20))
        out.write(b'"}]')
    assert bomb.stat().st_size < 1 << 20
    _store(db, fake_ollama)
    done, seconds = _import_limited(db, fake_ollama, bomb)
    assert done.returncode != 0 and seconds < 30, (seconds, done.stderr[-500:])
    expanded = len(b'[{"id": "x", "mapping": {}, "title": "') + (256 << 20) + len(b'"}]')
    assert f"chatgpt.zip holds a conversations.json of {expanded:,} bytes packed into" in done.stderr
    assert "(a zip bomb)" in done.stderr and "Traceback" not in done.stderr

    graph = tmp_path / "memory.jsonl"  # a line of numbers: nothing to cut, too long to hold
    entity = {"type": "entity", "name": "Dana", "entityType": "person", "observations": ["likes tea"]}
    with graph.open("wb") as out:
        out.write(json.dumps(entity).encode() + b"\n")
        out.write(b'{"type": "entity", "numbers": [' + b"0," * (33 << 20) + b"0]}\n")
        out.write(json.dumps({**entity, "name": "Ravi"}).encode() + b"\n")
    done, seconds = _import_limited(db, fake_ollama, graph)
    assert done.returncode == 0 and seconds < 30, (seconds, done.stderr[-500:])
    assert "memory.jsonl line 2: is longer than 64 MB after its texts were cut, which no export is" in done.stdout
    assert rows(db, "SELECT content FROM memories ORDER BY seq") == [
        ("Dana (person): likes tea",), ("Ravi (person): likes tea",)
    ]

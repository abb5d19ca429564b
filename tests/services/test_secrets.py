"""Secrets never stored (#83): a secret pasted into any path that writes text is replaced by a
placeholder naming its kind before anything is stored, embedded, indexed, exported or audited; the
audit says what was replaced (kind and count), never the secret. Look-alikes stay as written. On
both backends, through the real doors: MCP, REST (one turn, a streamed turn, an edit), Claude
Code's hook, the CLI's import and the browser view's edit."""

from __future__ import annotations

import json
import subprocess
import uuid
from dataclasses import replace
from pathlib import Path

import httpx2
import pytest

from ollama_mcp import redaction
from ollama_mcp.app import open_app
from ollama_mcp.cli import admin
from ollama_mcp.config import Settings
from ollama_mcp.inputs.conversations import new_conversation
from ollama_mcp.inputs.memories import note as new_note
from ollama_mcp.inputs.turns import parse_turns
from ollama_mcp.rest.models import PREFIX
from tests.conftest import Database, backfill, connect
from tests.support.chats import chatgpt_conversation
from tests.support.cli import run
from tests.support.fake_ollama import FakeOllama
from tests.support.http import SERVER, environment, serving
from tests.support.mcp_client import call
from tests.support.view import BASE, csrf_of, view

pytestmark = pytest.mark.anyio

AWS = "AKIAZ3MPL5QRSTUV7WXY"
GITHUB = "ghp_R2x9Kq7Lm4Np8Vt3Wz6Yb1Cd5Fg0Hj2Ks7Qa"
URL_PASSWORD = "Tr0ub4dor!x9"
ANTHROPIC = "sk-ant-api03-" + "Xy9_aB3cD4eF5gH6iJ7kL8mN9oP0qR1sT2uV3wX4yZ5aB6cD7eF8gH9iJ0kL1mN2oP3q-AbCdEfAA"
JWT = ("eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4gRG9lIn0"
       ".SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c")
PEM_BODY = "MIIEowIBAAKCAQEAu1SU1LfVLPHCozMxH2Mo4lgOEePzNm0tRgeLezV6ffAt0gunVTLw7onLRnrq0"
PEM = f"-----BEGIN RSA PRIVATE KEY-----\n{PEM_BODY}\nq8dL3Zc0w2\n-----END RSA PRIVATE KEY-----"
OPENAI = "sk-proj-" + "Abc123def456ghi789jkl012mno345pqr678stu901vwxYZ"
PASSWORD = "hunter2horse!"
# What must never be found anywhere once written (the PEM by its body).
SECRETS = (AWS, GITHUB, URL_PASSWORD, ANTHROPIC, JWT, PEM_BODY, OPENAI, PASSWORD, AWS[:10] + AWS[10:])


@pytest.mark.parametrize(("text", "kind"), [
    (f"my key is {AWS}, use it", "AWS access key"),
    (f"push with {GITHUB}.", "GitHub token"),
    (f"postgresql://app:{URL_PASSWORD}@db.internal:5432/prod", "password in a URL"),
    (f"ANTHROPIC_API_KEY={ANTHROPIC}", "Anthropic API key"),
    (f"OPENAI_API_KEY={OPENAI}", "OpenAI API key"),
    (f"Authorization: Bearer {JWT}", "JSON web token"),
    (f"here it is:\n{PEM}\nthanks", "private key"),
    (f"DB_PASSWORD={PASSWORD}", "password"),
    ('{"api_key": "f8a9c2b1e7d64f3a9b0c"}', "secret"),
    ("AUTH_TOKEN=8f14e45fceea167a5a36dedd4bea2543a9", "secret"),
])
def test_each_kind_of_secret_becomes_a_placeholder_naming_it(text: str, kind: str) -> None:
    done = redaction.redact(text)
    assert done.found == ((kind,  1),)
    assert f"[redacted: {kind}]" in done.text
    assert not any(secret in done.text for secret in SECRETS)
    assert redaction.redact(done.text).found == ()  # a placeholder is never redacted again


@pytest.mark.parametrize("text", [
    "fixed in commit 3f786850e387550fdab836ed7e6dc881de23001b yesterday",
    'sha = "3f786850e387550fdab836ed7e6dc881de23001b"',
    "conversation 123e4567-e89b-12d3-a456-426614174000 and token: 123e4567-e89b-12d3-a456-426614174000",
    "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==",
    "apple banana cherry dragonfruit elderberry fig grape honeydew kiwi lemon mango nectarine orange papaya",
    "the token expired yesterday, and the key thing is the password policy: reset it monthly",
    "password = ${DB_PASSWORD} and secret = os.environ['SECRET_KEY']",
    "https://example.com/docs?page=2 and ssh://git@github.com/acme/app.git",
])
def test_look_alikes_of_secrets_stay_as_written(text: str) -> None:
    assert redaction.redact(text) == redaction.Redacted(text)


def _everything_stored(db: Database) -> str:
    """Every text of every memory and open turn as the store holds it, with the audit's rows."""
    rows = db.rows("SELECT content, CAST(metadata AS TEXT), CAST(tool_calls AS TEXT) FROM memories")
    rows += db.rows("SELECT at, door, action, arguments_digest, redacted FROM write_audit")
    return json.dumps(rows, default=str)


def _assert_nowhere(db: Database, fake: FakeOllama, *more: str) -> None:
    stored = _everything_stored(db)
    embedded = json.dumps([r.body for r in fake.embed_requests()])
    for secret in SECRETS:
        assert secret not in stored and secret not in embedded, secret
        assert all(secret not in text for text in more), secret
    for word in (AWS, GITHUB, PASSWORD.rstrip("!"), "Tr0ub4dor"):
        assert db.keyword_matches("content", f'"{word}"') == 0, word


async def test_a_secret_through_any_write_path_is_stored_nowhere_and_audited_by_kind(
    settings: Settings, db: Database, fake_ollama: FakeOllama, tmp_path: Path
) -> None:
    async with connect(settings) as client:
        stored = await call(client, "store_memory", content=f"The deploy key is {AWS} (rotate in May)")
        await call(client, "update_memory", memory_id=stored["memory_id"], content=f"The push token is {GITHUB}")
        conversation = (await call(client, "init_conversation", name="ops"))["conversation_id"]
        await call(client, "add_messages", conversation_id=conversation, messages=[
            {"role": "user", "content": f"Connect to postgresql://app:{URL_PASSWORD}@db.internal:5432/prod"},
            {"role": "assistant", "content": "", "tool_calls": [{"id": "call_1", "type": "function", "function": {
                "name": "set_env", "arguments": json.dumps({"ANTHROPIC_API_KEY": ANTHROPIC})}}]},
            {"role": "tool", "tool_call_id": "call_1", "content": f"set; DB_PASSWORD={PASSWORD} too"},
        ])
        found = await call(client, "search_all_conversations", query="deploy push token key")
        assert found["results"] and all(s not in json.dumps(found) for s in SECRETS)
        exported = await call(client, "export_conversation", conversation_id=conversation, format="json")

    _, token = await admin.create_token(settings, "alice-laptop", "local")
    async with serving(settings) as url, httpx2.AsyncClient(
            headers={"Authorization": f"Bearer {token}"}, timeout=30) as http:
        base = url.removesuffix("/mcp") + PREFIX
        conv = (await http.post(f"{base}/conversations", json={})).json()["id"]
        said = await http.post(f"{base}/conversations/{conv}/turns", json={"role": "user",
                                                                          "content": f"Bearer {JWT}"})
        assert said.status_code == 201 and JWT not in said.text
        opened = (await http.post(f"{base}/conversations/{conv}/turns",
                                  json={"role": "assistant", "content": "", "status": "open"})).json()["id"]
        for chunk in ("Your key: AKIAZ3MPL5", "QRSTUV7WXY, keep it safe"):  # split across two chunks
            await http.patch(f"{base}/turns/{opened}", json={"append": chunk})
        committed = (await http.post(f"{base}/turns/{opened}/commit", json={})).json()
        assert committed["content"] == "Your key: [redacted: AWS access key], keep it safe"
        edited = await http.put(f"{base}/turns/{said.json()['id']}", json={"content": f"my key\n{PEM}"})
        assert edited.status_code == 200 and edited.json()["content"] == "my key\n[redacted: private key]"

    _hook_prompt(settings, f"use OPENAI_API_KEY={OPENAI} for the batch job")
    chat = chatgpt_conversation("c-secret", "keys")
    chat["mapping"]["q2"]["message"]["content"]["parts"] = [f"And the hotel? The wifi is DB_PASSWORD={PASSWORD}"]
    export = tmp_path / "conversations.json"
    export.write_text(json.dumps([chat]))
    report = await admin.import_file(settings, str(export))
    assert report.redacted == {"password": 1}
    assert "replaced 1 secret (1 password)" in admin.import_summary(report)

    async with open_app(settings, background=False) as app, view(app) as browser:
        note = await app.memories.store(new_note("Sam prefers window seats"))
        page = f"/conversations/{note.memory.conversation_id}"
        saved = await browser.post(f"/memories/{note.memory.id}/update", headers={"origin": BASE}, data={
            "csrf": csrf_of(await browser.get(page)), "content": f"Sam's token is {GITHUB}", "tags": ""})
        assert saved.status_code == 303
        markdown, _ = await app.archive.export_text(None, "markdown")

    _assert_nowhere(db, fake_ollama, json.dumps(exported), markdown)
    assert sorted(db.rows("SELECT door, action, redacted FROM write_audit WHERE redacted IS NOT NULL")) == [
        ("hook", "add_messages", "1 OpenAI API key"),
        ("import", "import", "1 password"),
        ("rest", "add_messages", "1 JSON web token"),
        ("rest", "commit_turn", "1 AWS access key"),
        ("rest", "edit_turn", "1 private key"),
        ("tool", "add_messages", "1 Anthropic API key, 1 password, 1 password in a URL"),
        ("tool", "store_memory", "1 AWS access key"),
        ("tool", "update_memory", "1 GitHub token"),
        ("ui", "update_memory", "1 GitHub token"),
    ]
    tool_call = db.rows("SELECT CAST(tool_calls AS TEXT) FROM memories WHERE tool_calls IS NOT NULL")[0][0]
    assert "[redacted: Anthropic API key]" in tool_call


def _hook_prompt(settings: Settings, prompt: str) -> None:
    """A prompt recorded by Claude Code's UserPromptSubmit hook, as the hook command runs."""
    env = environment(settings)
    sent = {"session_id": str(uuid.uuid4()), "transcript_path": "/nonexistent.jsonl", "cwd": "/home/dana/proxy",
            "hook_event_name": "UserPromptSubmit", "prompt": prompt}
    for args, payload in ((("hook", "UserPromptSubmit"), json.dumps(sent)), (("hook", "--drain"), "")):
        done = subprocess.run([str(SERVER), *args], input=payload, env=env, capture_output=True, text=True,
                              timeout=60, cwd="/")
        assert done.returncode == 0, done.stderr
        assert OPENAI not in done.stdout + done.stderr


async def test_a_conversation_that_opts_out_and_the_server_switch_keep_text_verbatim(
    settings: Settings, db: Database
) -> None:
    async with connect(settings) as client:
        mine = (await call(client, "init_conversation", name="keys", metadata={"redact_secrets": False}))
        await call(client, "store_memory", conversation_id=mine["conversation_id"], content=f"key {AWS}")
        plain = (await call(client, "init_conversation", name="plain"))["conversation_id"]
        other = await call(client, "store_memory", conversation_id=plain, content=f"key {AWS}")
        refused = await client.call_tool("init_conversation", {"metadata": {"redact_secrets": "no"}})
        assert refused.is_error and "metadata.redact_secrets" in refused.content[0].text
    async with open_app(replace(settings, redact=False), background=False) as app:
        verbatim = await app.memories.store(new_note(f"again {GITHUB}"))
    rows = dict(db.rows("SELECT id, content FROM memories WHERE kind = 'note'"))
    assert rows[other["memory_id"]] == "key [redacted: AWS access key]"
    assert sorted(rows.values()) == sorted([f"key {AWS}", "key [redacted: AWS access key]", f"again {GITHUB}"])
    assert rows[verbatim.memory.id] == f"again {GITHUB}"


async def test_redact_scan_counts_an_older_stores_secrets_and_apply_removes_every_trace(
    settings: Settings, db: Database, fake_ollama: FakeOllama
) -> None:
    older = replace(settings, redact=False)  # a store written before redaction existed
    async with open_app(older, background=False) as app:
        ops = await app.conversations.start(new_conversation(f"ops {AWS}"))
        kept = await app.conversations.start(new_conversation("verbatim", metadata={"redact_secrets": False}))
        await app.memories.store(new_note(f"The deploy key is {AWS}", conversation_id=ops.id))
        await app.memories.store(new_note(f"my own key {GITHUB}", conversation_id=kept.id))
        [said], _ = await app.transcript.add_messages(ops.id, parse_turns("messages", [
            {"role": "user", "content": f"DB_PASSWORD={PASSWORD}"}]))
        await app.transcript.revise_turn(said.id, "never mind")  # the old text stays in earlier_versions
        await app.transcript.add_messages(ops.id, parse_turns("messages", [
            {"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "type": "function", "function": {
                "name": "login", "arguments": json.dumps({"token": JWT})}}]}]))
        await backfill(app)
    assert db.keyword_matches("content", f'"{AWS}"') == 1

    scanned = run(db, fake_ollama, "redact", "--scan")
    assert scanned.returncode == 0, scanned.stderr
    assert scanned.stdout.strip() == (
        "scanned 4 memories: 3 memories and 1 conversation name or summary hold secrets (2 AWS access key, "
        "1 JSON web token, 1 password). Run `ollama-mcp redact --scan --apply` to replace them.")
    assert db.keyword_matches("content", f'"{AWS}"') == 1  # a scan changes nothing

    applied = run(db, fake_ollama, "redact", "--scan", "--apply")
    assert applied.returncode == 0, applied.stderr
    assert applied.stdout.startswith("replaced the secrets (2 AWS access key, 1 JSON web token, 1 password) of "
                                     "3 memories and 1 conversation name or summary;")
    stored = json.dumps(db.rows("SELECT content, CAST(metadata AS TEXT), CAST(tool_calls AS TEXT) FROM memories"
                                " WHERE conversation_id = ?", ops.id))
    stored += json.dumps(db.rows("SELECT name FROM conversations"))
    assert not any(secret in stored for secret in (AWS, PASSWORD, JWT))
    assert "[redacted: password]" in stored and "[redacted: JSON web token]" in stored
    assert db.keyword_matches("content", f'"{AWS}"') == 0
    assert db.rows("SELECT content FROM memories WHERE conversation_id = ?", kept.id) == [(f"my own key {GITHUB}",)]
    assert db.rows("SELECT door, action, redacted FROM write_audit WHERE action = 'redact' ORDER BY id") == [
        ("cli", "redact", "1 AWS access key, 1 JSON web token, 1 password"), ("cli", "redact", "1 AWS access key")]
    if db.backend == "sqlite":  # the old text is gone from the file, its free pages and its log included
        files = [settings.db_path, settings.db_path.with_name(settings.db_path.name + "-wal")]
        raw = b"".join(f.read_bytes() for f in files if f is not None and f.exists())
        assert AWS.encode() not in raw and PASSWORD.encode() not in raw and GITHUB.encode() in raw
    again = run(db, fake_ollama, "redact", "--scan")
    assert again.stdout.strip() == "scanned 4 memories: no secrets found"

    before = len(fake_ollama.embed_requests())
    async with open_app(settings, background=False) as app:  # the vectors come back, of the new text
        await backfill(app)
    asked = json.dumps([r.body for r in fake_ollama.embed_requests()[before:]])
    assert "[redacted: AWS access key]" in asked and AWS not in asked
    assert db.count("SELECT count(*) FROM memory_embeddings") >= 4


async def test_an_aborted_streamed_turn_keeps_its_text_without_the_secret(
    settings: Settings, db: Database
) -> None:
    _, token = await admin.create_token(settings, "alice-laptop", "local")
    async with serving(settings) as url, httpx2.AsyncClient(
            headers={"Authorization": f"Bearer {token}"}, timeout=30) as http:
        base = url.removesuffix("/mcp") + PREFIX
        conv = (await http.post(f"{base}/conversations", json={})).json()["id"]
        opened = (await http.post(f"{base}/conversations/{conv}/turns",
                                  json={"role": "assistant", "content": "", "status": "open"})).json()["id"]
        for chunk in (f"use {GITHUB[:12]}", f"{GITHUB[12:]} to push"):
            await http.patch(f"{base}/turns/{opened}", json={"append": chunk})
        aborted = (await http.post(f"{base}/turns/{opened}/abort")).json()
    assert aborted["content"] == "use [redacted: GitHub token] to push"
    assert db.rows("SELECT content FROM open_turns") == [("use [redacted: GitHub token] to push",)]
    assert db.rows("SELECT action, redacted FROM write_audit WHERE redacted IS NOT NULL") == [
        ("redact", "1 GitHub token")]


async def test_a_conversation_name_with_a_secret_is_stored_without_it(settings: Settings, db: Database) -> None:
    async with connect(settings) as client:
        named = await call(client, "init_conversation", name=f"deploy with {AWS}")
    assert db.rows("SELECT name FROM conversations WHERE id = ?", named["conversation_id"]) == [
        ("deploy with [redacted: AWS access key]",)]
    assert db.rows("SELECT action, redacted FROM write_audit") == [("init_conversation", "1 AWS access key")]

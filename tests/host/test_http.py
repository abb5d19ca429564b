"""MCP over streamable HTTP: the real MCP client against the server on a loopback port (uvicorn,
as ``ollama-mcp serve --http`` runs it), tokens, isolation between principals, and the checks on
Host, Origin and body size. Both storage backends, both protocol eras."""

from __future__ import annotations

import json
import os
import subprocess
import uuid
from dataclasses import replace
from pathlib import Path
from typing import Any

import anyio
import httpx2
import psycopg
import pytest
from mcp import types
from mcp.shared.exceptions import MCPError
from psycopg import sql
from psycopg.conninfo import make_conninfo

from ollama_mcp.app import open_app
from ollama_mcp.cli import admin
from ollama_mcp.config import Settings
from ollama_mcp.errors import ConfigError, InvalidInputError
from ollama_mcp.host import http
from ollama_mcp.inputs.memories import note as new_note
from ollama_mcp.mcp.unauthorized import MISSING, NO_OAUTH, NOT_OURS
from ollama_mcp.storage.postgres import db as pg_db
from tests.conftest import Database, with_database
from tests.support.agent import tool_call
from tests.support.fake_ollama import FakeModel, FakeOllama
from tests.support.http import ServeProcess, cli, client, environment, serving
from tests.support.mcp_client import call, error

pytestmark = pytest.mark.anyio

ERAS = ["legacy", "auto"]
ROOT = Path(__file__).resolve().parents[2]
INSPECTOR = Path(os.environ.get("OLLAMA_MCP_INSPECTOR", ROOT / "node_modules" / ".bin" / "mcp-inspector"))


async def post(url: str, body: object, **headers: str) -> httpx2.Response:
    """One raw JSON-RPC POST, as a client nobody wrote might send it."""
    async with httpx2.AsyncClient(timeout=30) as session:
        return await session.post(url, content=json.dumps(body), headers={
            "Content-Type": "application/json", "Accept": "application/json, text/event-stream", **headers,
        })


INITIALIZE: dict[str, Any] = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}}


@pytest.mark.parametrize("mode", ERAS)
async def test_every_tool_works_over_http_as_over_stdio(settings: Settings, mode: str) -> None:
    async with serving(settings) as url, client(url, mode=mode) as mcp:
        assert "ask_agent" in {tool.name for tool in (await mcp.list_tools()).tools}
        conversation = (await call(mcp, "init_conversation", name="over http"))["conversation_id"]
        stored = await call(
            mcp, "store_memory", content="The deploy key rotates every Monday", conversation_id=conversation
        )
        assert stored["embedding_status"] == "embedded"
        found = await call(
            mcp, "search_memories", query="when does the deploy key rotate", conversation_id=conversation
        )
        assert [hit["memory_id"] for hit in found["results"]][:1] == [stored["memory_id"]]
        assert found["mode"] == "hybrid"
        updated = await call(
            mcp, "update_memory", memory_id=stored["memory_id"], content="The deploy key rotates on Fridays"
        )
        assert updated["memory_id"] != stored["memory_id"]
        exported = await call(mcp, "export_conversation", conversation_id=conversation)
        assert "rotates on Fridays" in exported["markdown"]
        listed = await call(mcp, "list_conversations")
        assert [c["conversation_id"] for c in listed["conversations"]] == [conversation]
        ended = await call(mcp, "end_conversation", conversation_id=conversation, summary="Key rotation moved.")
        assert ended["status"] == "completed"
        everywhere = await call(mcp, "search_all_conversations", query="key rotation")
        assert updated["memory_id"] in {hit["memory_id"] for hit in everywhere["results"]}
        page = await mcp.read_resource(f"memory://conversations/{conversation}")
        assert "rotates on Fridays" in page.contents[0].text
        assert (await call(mcp, "delete_conversation", conversation_id=conversation))["memories_deleted"] >= 2


async def test_two_clients_of_one_server_keep_separate_current_conversations(settings: Settings) -> None:
    async with serving(settings) as url, client(url) as first, client(url) as second:
        one = (await call(first, "init_conversation", name="first"))["conversation_id"]
        two = (await call(second, "init_conversation", name="second"))["conversation_id"]
        assert one != two
        in_first = await call(first, "store_memory", content="Written by the first client")
        in_second = await call(second, "store_memory", content="Written by the second client")
        assert (in_first["conversation_id"], in_second["conversation_id"]) == (one, two)
        assert (await call(first, "get_conversation_id"))["current"]["conversation_id"] == one
        assert (await call(second, "get_conversation_id"))["current"]["conversation_id"] == two
        # Ending one client's conversation leaves the other's current, and its store goes on there.
        await call(first, "end_conversation")
        assert (await call(first, "get_conversation_id"))["current"] is None
        assert (await call(second, "store_memory", content="Still the second"))["conversation_id"] == two


async def test_two_clients_without_a_conversation_get_separate_anonymous_ones(settings: Settings) -> None:
    async with serving(settings) as url, client(url) as first, client(url) as second:
        a = await call(first, "store_memory", content="An anonymous first note")
        b = await call(second, "store_memory", content="An anonymous second note")
        assert a["conversation_id"] != b["conversation_id"]


@pytest.mark.parametrize("mode", ERAS)
async def test_a_token_without_a_session_keeps_its_current_conversation_on_every_instance(
    settings: Settings, db: Database, mode: str
) -> None:
    """Two stateless instances on one store, as behind a load balancer: whichever answers, a
    client known by its token continues the conversation it began on the other."""
    _, secret = await admin.create_token(settings, "alice-laptop", "local")
    async with serving(settings, stateless=True) as first, serving(settings, stateless=True) as second, \
            client(first, secret, mode) as on_first, client(second, secret, mode) as on_second:
        begun = (await call(on_first, "init_conversation", name="begun on the first"))["conversation_id"]
        stored = await call(on_second, "store_memory", content="Stored through the second instance")
        assert stored["conversation_id"] == begun
        assert (await call(on_second, "get_conversation_id"))["current"]["conversation_id"] == begun
        await call(on_second, "end_conversation")
        assert (await call(on_first, "get_conversation_id"))["current"] is None
        anonymous = (await call(on_first, "store_memory", content="After the end"))["conversation_id"]
        assert anonymous != begun
        assert (await call(on_second, "store_memory", content="Also after"))["conversation_id"] == anonymous
        assert db.rows("SELECT client, conversation_id FROM current_conversations") == [
            ("token:alice-laptop", anonymous)
        ]
        await call(on_first, "delete_conversation", conversation_id=anonymous)
        assert (await call(on_second, "get_conversation_id"))["current"] is None
    assert db.rows("SELECT client, conversation_id FROM current_conversations") == []


# -- tokens ------------------------------------------------------------------------------------


async def test_with_tokens_a_missing_malformed_wrong_or_revoked_token_gets_401_and_changes_nothing(
    settings: Settings,
) -> None:
    _, alice = await admin.create_token(settings, "alice-laptop", "alice")
    _, revoked = await admin.create_token(settings, "old-laptop", "alice")
    await admin.revoke_token(settings, "old-laptop")
    store = {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
             "params": {"name": "store_memory", "arguments": {"content": "must not be stored"}}}
    async with serving(settings) as url:
        for headers, told in (({}, MISSING), ({"Authorization": "Basic YWxpY2U6eA=="}, MISSING),
                              ({"Authorization": "Bearer"}, MISSING),
                              ({"Authorization": "Bearer not-a-token"}, NOT_OURS),
                              ({"Authorization": f"Bearer {alice[:-1]}x"}, NOT_OURS),
                              ({"Authorization": f"Bearer {revoked}"}, NOT_OURS)):
            for body in (INITIALIZE, store):
                answer = await post(url, body, **headers)
                assert answer.status_code == 401, (headers, answer.text)
                # What a client shows (Claude Code shows the body): which it was, and the fix.
                assert answer.json() == {"error": "invalid_token", "error_description": told}
                assert answer.headers["www-authenticate"] == (
                    f'Bearer realm="ollama-mcp", error="invalid_token", error_description="{told}"'
                )
        async with client(url, alice) as mcp:
            assert (await call(mcp, "list_conversations"))["conversations"] == []
            found = await call(mcp, "search_all_conversations", query="must not be stored")
            assert found["results"] == []


async def test_the_server_starts_and_stops_again_and_again_each_time_within_a_bound(settings: Settings) -> None:
    """Shutdown cannot hang: the apps' closes are bounded (``app.CLOSE_SECONDS``), on both backends."""
    for round_ in range(6):
        with anyio.fail_after(30):
            async with serving(settings) as url, client(url) as mcp:
                stored = await call(mcp, "store_memory", content=f"round {round_} of starting and stopping")
                found = await call(mcp, "search_memories", query=f"round {round_} starting stopping")
        assert found["results"][0]["memory_id"] == stored["memory_id"]


async def test_oauth_discovery_and_registration_are_told_the_server_takes_bearer_tokens_not_oauth(
    settings: Settings,
) -> None:
    """No OAuth metadata names this server an authorization server it is not; a client that tries
    OAuth after a forgotten header (Claude Code registers at /register) is told what to do."""
    await admin.create_token(settings, "alice", None)
    async with serving(settings) as url, httpx2.AsyncClient() as session:
        base = url.removesuffix("/mcp")
        for method, path in (("GET", "/.well-known/oauth-protected-resource/mcp"),
                             ("GET", "/.well-known/oauth-protected-resource"),
                             ("GET", "/.well-known/oauth-authorization-server"),
                             ("GET", "/.well-known/openid-configuration"), ("POST", "/register"),
                             ("GET", "/authorize"), ("POST", "/token")):
            answer = await session.request(method, base + path)
            assert answer.status_code == 404, path
            assert answer.json() == {"error": "invalid_request", "error_description": NO_OAUTH}, path
        assert NO_OAUTH.startswith("This ollama-mcp server does not use OAuth; it needs a bearer token: send the")
        assert "ollama-mcp token create NAME" in NO_OAUTH and "Authorization: Bearer <token>" in NO_OAUTH


async def test_a_token_revoked_while_the_server_runs_is_refused_at_its_next_request(settings: Settings) -> None:
    _, secret = await admin.create_token(settings, "alice", None)
    async with serving(settings) as url:
        async with client(url, secret) as mcp:
            await call(mcp, "store_memory", content="Before the revocation")
            await admin.revoke_token(settings, "alice")
            with pytest.raises(MCPError):  # the transport's 401 ends the call
                await mcp.call_tool("store_memory", {"content": "After the revocation"})
        assert (await post(url, INITIALIZE, Authorization=f"Bearer {secret}")).status_code == 401


# -- isolation -----------------------------------------------------------------------------------


def _attempts(conversation: str, memory: str) -> list[tuple[str, dict[str, Any]]]:
    """Every tool that takes an id, aimed at the other principal's conversation or memory."""
    return [
        ("store_memory", {"content": "slipped in", "conversation_id": conversation}),
        ("search_memories", {"query": "vault", "conversation_id": conversation}),
        ("update_memory", {"memory_id": memory, "content": "overwritten"}),
        ("delete_memory", {"memory_id": memory}),
        ("export_conversation", {"conversation_id": conversation}),
        ("end_conversation", {"conversation_id": conversation}),
        ("delete_conversation", {"conversation_id": conversation}),
        ("ask_agent", {"query": "what is the vault code?", "conversation_id": conversation}),
    ]


@pytest.mark.parametrize("mode", ERAS)
async def test_two_principals_never_see_or_change_each_others_memory(settings: Settings, mode: str) -> None:
    _, alice_token = await admin.create_token(settings, "alice-laptop", "alice")
    _, bob_token = await admin.create_token(settings, "bob", None)
    async with serving(settings) as url, client(url, alice_token, mode) as alice, client(url, bob_token, mode) as bob:
        mine: dict[str, tuple[str, str]] = {}
        for name, mcp, text in ((
            "alice", alice, "The vault code is 4711"), ("bob", bob, "The vault code is 1234")):
            conversation = (await call(mcp, "init_conversation", name=f"{name}'s chat"))["conversation_id"]
            memory = (await call(mcp, "store_memory", content=text))["memory_id"]
            mine[name] = (conversation, memory)
        for me, mcp, other in (("alice", alice, "bob"), ("bob", bob, "alice")):
            conversation, memory = mine[other]
            for tool, arguments in _attempts(conversation, memory):
                text = await error(mcp, tool, **arguments)
                assert f"no memory {memory} exists" in text or f"no conversation {conversation} exists" in text, \
                    (me, tool, text)
            for tool, arguments in (("search_all_conversations", {"query": "vault code"}),
                                    ("search_memories", {"query": "vault code"})):
                hits = (await call(mcp, tool, **arguments))["results"]
                assert {hit["memory_id"] for hit in hits} == {mine[me][1]}, (me, tool)
            listed = await call(mcp, "list_conversations")
            assert [c["conversation_id"] for c in listed["conversations"]] == [mine[me][0]]
            with pytest.raises(MCPError):
                await mcp.read_resource(f"memory://conversations/{conversation}")
            index = (await mcp.read_resource("memory://conversations")).contents[0].text
            assert conversation not in index and mine[me][0] in index
            with pytest.raises(MCPError):
                await mcp.get_prompt("build_context", {"conversation_id": conversation})
        # Nothing of either changed: each still finds its own memory, unaltered, where it was.
        for name, mcp, text in (("alice", alice, "4711"), ("bob", bob, "1234")):
            exported = await call(mcp, "export_conversation", conversation_id=mine[name][0])
            assert f"The vault code is {text}" in exported["markdown"] and "overwritten" not in exported["markdown"]
            assert "slipped in" not in exported["markdown"]


async def test_each_principals_memory_and_audit_live_in_a_store_of_its_own(
    settings: Settings, db: Database, backend: str
) -> None:
    _, secret = await admin.create_token(settings, "alice-laptop", "alice")
    async with serving(settings) as url, client(url, secret) as mcp:
        await call(mcp, "store_memory", content="Only in alice's store")
    assert db.count("SELECT count(*) FROM memories") == 0  # the local principal's store
    alice = Database(backend, str(settings.for_principal("alice").store_path) if backend == "sqlite"
                     else settings.for_principal("alice").store_url)
    assert alice.rows("SELECT content FROM memories") == [("Only in alice's store",)]
    assert alice.rows("SELECT door, principal, action FROM write_audit ORDER BY id") == [
        ("tool", "alice-laptop", "start_conversation"), ("tool", "alice-laptop", "store_memory")]
    if backend == "postgres":  # every table the store uses exists in alice's schema: no name falls through to public
        assert db.rows(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = 'public' EXCEPT "
            "SELECT table_name FROM information_schema.tables WHERE table_schema = 'ollama_mcp_alice'"
        ) == []


async def test_the_cli_acts_for_the_principal_ollama_mcp_principal_names(settings: Settings) -> None:
    _, secret = await admin.create_token(settings, "alice", None)
    async with serving(settings) as url, client(url, secret) as mcp:
        await call(mcp, "init_conversation", name="alice's")
    as_alice, _ = await admin.export_store(settings.for_principal("alice"), None, "json")
    as_local, _ = await admin.export_store(settings, None, "json")
    assert [c["name"] for c in json.loads(as_alice)["conversations"]] == ["alice's"]
    assert json.loads(as_local)["conversations"] == []


async def test_the_agent_over_http_acts_for_its_principal_and_asks_before_deleting(
    settings: Settings, fake_ollama: FakeOllama
) -> None:
    _, alice_token = await admin.create_token(settings, "alice", None)
    _, bob_token = await admin.create_token(settings, "bob", None)
    asked: list[str] = []

    async def accept(_context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params.message)
        return types.ElicitResult(action="accept", content={"confirm": True})

    async with serving(settings) as url, client(url, alice_token, elicitation_callback=accept) as alice, \
            client(url, bob_token) as bob:
        secret = (await call(alice, "store_memory", content="The vault code is 4711"))["memory_id"]
        await call(bob, "store_memory", content="Bob's vault code is 1234")
        fake_ollama.enqueue_chat(tool_call("search_all_conversations", query="vault code"), "It is 1234.")
        await call(bob, "ask_agent", query="what is the vault code?")
        seen_by_bobs_agent = fake_ollama.chat_requests()[-1].body["messages"][-1]["content"]
        assert "1234" in seen_by_bobs_agent and "4711" not in seen_by_bobs_agent
        fake_ollama.enqueue_chat(tool_call("delete_memory", memory_id=secret), "Deleted.")
        answer = await call(alice, "ask_agent", query="forget the vault code")
        assert asked == [f"The local agent wants to delete the memory {secret}. Allow it?"]
        assert answer["tools_used"] == ["search_all_conversations", "delete_memory"]  # (the first, made for the model)
        # The note is gone; the agent's exchanges are turns of alice's now, and none holds the code.
        alices = (await call(alice, "search_all_conversations", query="vault code"))["results"]
        assert secret not in {hit["memory_id"] for hit in alices} and not [h for h in alices if "4711" in h["content"]]
        bobs = (await call(bob, "search_all_conversations", query="vault code"))["results"]
        assert "Bob's vault code is 1234" in [hit["content"] for hit in bobs]


async def test_a_stateless_server_refuses_the_agents_deletions_rather_than_run_them_unasked(
    settings: Settings, fake_ollama: FakeOllama
) -> None:
    async def accept(_context: Any, _params: types.ElicitRequestParams) -> types.ElicitResult:
        return types.ElicitResult(action="accept", content={"confirm": True})

    async with serving(settings, stateless=True) as url, client(url, elicitation_callback=accept) as mcp:
        kept = (await call(mcp, "store_memory", content="Still here after the agent"))["memory_id"]
        fake_ollama.enqueue_chat(tool_call("delete_memory", memory_id=kept), "Not deleted.")
        answer = await call(mcp, "ask_agent", query="delete it")
        assert answer["tools_used"] == ["search_all_conversations"]  # (made for the model; its delete refused)
        assert "cannot ask for it" in fake_ollama.chat_requests()[-1].body["messages"][-1]["content"]
        found = await call(mcp, "search_all_conversations", query="still here", kind="note")
        assert [hit["memory_id"] for hit in found["results"]] == [kept]


async def test_concurrent_clients_of_several_principals_lose_nothing(settings: Settings) -> None:
    """bench/http_load.py in small: 12 clients at once, 3 principals, stores and searches."""
    principals = ("alice", "bob", "carol")
    secrets = [(await admin.create_token(settings, f"c{i}", principals[i % 3]))[1] for i in range(12)]
    acknowledged: dict[str, set[str]] = {p: set() for p in principals}

    async def work(i: int, url: str) -> None:
        async with client(url, secrets[i]) as mcp:
            for n in range(8):
                stored = await call(mcp, "store_memory", content=f"client {i} remembers item {n}")
                acknowledged[principals[i % 3]].add(stored["memory_id"])
                await call(mcp, "search_memories", query=f"item {n}")

    async with serving(settings) as url:
        async with anyio.create_task_group() as tasks:
            for i in range(12):
                tasks.start_soon(work, i, url)
    for principal in principals:
        text, _ = await admin.export_store(settings.for_principal(principal), None, "json")
        present = {m["id"] for c in json.loads(text)["conversations"] for m in c["memories"]}
        assert present == acknowledged[principal] and len(present) == 32


@pytest.mark.slow
async def test_fifty_clients_at_once_with_their_own_tokens_get_no_error_and_lose_no_store(
    database_url: str, fake_ollama: FakeOllama
) -> None:
    """bench/http_load.py as the issue sizes it, with 4 calls a client instead of 100: 50 clients of
    5 principals against the real ``serve --http`` process; p50/p99 of the full run in bench/README.md."""
    from bench.http_load import measure  # noqa: PLC0415 - the benchmark's own load, not a copy of it

    fake_ollama.models["all-minilm"] = FakeModel()
    report = await measure(database_url, fake_ollama.url, clients=50, calls=4, instances=1)
    assert (report["errors"], report["first_errors"]) == (0, [])
    assert report["calls"] == 200 and report["acknowledged_stores"] > 40 and report["missing_stores"] == 0


@pytest.mark.postgres_only
@pytest.mark.slow
async def test_two_stateless_instances_on_one_database_serve_fifty_clients_as_one_server(
    database_url: str, fake_ollama: FakeOllama
) -> None:
    """Each client alternates its calls between the two instances, on one conversation: what one
    acknowledged, the other finds and exports."""
    from bench.http_load import measure  # noqa: PLC0415

    fake_ollama.models["all-minilm"] = FakeModel()
    report = await measure(database_url, fake_ollama.url, clients=50, calls=4, instances=2)
    assert (report["errors"], report["first_errors"]) == (0, [])
    assert report["calls"] == 200 and report["acknowledged_stores"] > 40 and report["missing_stores"] == 0


# -- what the server accepts ----------------------------------------------------------------------


async def test_requests_from_another_origin_or_host_or_too_large_are_refused(settings: Settings) -> None:
    async with serving(settings) as url:
        own = url.removesuffix("/mcp")
        port = own.rsplit(":", 1)[1]
        assert (await post(url, INITIALIZE, Origin="http://evil.example")).status_code == 403
        assert (await post(url, INITIALIZE, Host="evil.example")).status_code == 421
        # A page on another local port is another program (#80 item 3): only this server's own
        # origin, under any of its loopback names, is accepted.
        assert (await post(url, INITIALIZE, Origin="http://localhost:3000")).status_code == 403
        assert (await post(url, INITIALIZE, Origin=f"https://127.0.0.1:{port}")).status_code == 403
        assert (await post(url, INITIALIZE, Origin=own)).status_code == 200
        assert (await post(url, INITIALIZE, Origin=f"http://localhost:{port}")).status_code == 200
        huge = {**INITIALIZE, "params": {**INITIALIZE["params"], "padding": "x" * (http.MAX_BODY_BYTES + 1)}}
        assert (await post(url, huge)).status_code == 413


async def test_an_origin_the_operator_lists_is_accepted_and_a_malformed_list_is_refused_naming_it(
    settings: Settings,
) -> None:
    listed = replace(settings, allowed_origins=("http://localhost:3000",))
    async with serving(listed) as url:
        assert (await post(url, INITIALIZE, Origin="http://localhost:3000")).status_code == 200
        assert (await post(url, INITIALIZE, Origin="http://localhost:3001")).status_code == 403
    assert Settings.from_env({"OLLAMA_MCP_ALLOWED_ORIGINS": "http://localhost:3000/, https://app.example"}
                             ).allowed_origins == ("http://localhost:3000", "https://app.example")
    with pytest.raises(ConfigError, match="OLLAMA_MCP_ALLOWED_ORIGINS: 'localhost:3000' is not an origin"):
        Settings.from_env({"OLLAMA_MCP_ALLOWED_ORIGINS": "localhost:3000"})


def test_serving_another_address_without_tokens_is_refused_with_the_fix() -> None:
    with pytest.raises(ConfigError, match="without tokens.*ollama-mcp token create NAME"):
        http.plan("192.168.1.20", 8765, None, tokens=0)
    with pytest.raises(ConfigError, match="--public-url"):
        http.plan("0.0.0.0", 8765, None, tokens=1)
    with pytest.raises(ConfigError, match="--public-url must be an http"):
        http.plan("0.0.0.0", 8765, "memory.example.com", tokens=1)
    served = http.plan("0.0.0.0", 8765, "https://memory.example.com/mcp", tokens=1)
    assert served.allowed_hosts == ("memory.example.com",)
    assert served.allowed_origins == ("https://memory.example.com",)
    assert http.plan("127.0.0.1", 8765, None, tokens=0).url == "http://127.0.0.1:8765/mcp"


async def test_token_names_and_principals_are_checked_before_anything_is_kept(settings: Settings) -> None:
    with pytest.raises(InvalidInputError, match="NAME: must be 1-64 letters"):
        await admin.create_token(settings, "alice laptop", None)
    with pytest.raises(InvalidInputError, match="--principal: is needed"):
        await admin.create_token(settings, "Alice-Laptop", None)
    with pytest.raises(ConfigError, match="--principal must be a principal's name"):
        await admin.create_token(settings, "alice-laptop", "Alice")
    await admin.create_token(settings, "alice", None)
    with pytest.raises(InvalidInputError, match="NAME: is taken.*ollama-mcp token revoke alice"):
        await admin.create_token(settings, "alice", None)
    with pytest.raises(InvalidInputError, match="NAME: names no active token"):
        await admin.revoke_token(settings, "nobody")
    assert [(t.name, t.principal, t.revoked_at) for t in await admin.list_tokens(settings)] == [
        ("alice", "alice", None)
    ]
    await admin.revoke_token(settings, "alice")
    _, again = await admin.create_token(settings, "alice", None)  # a revoked name may be given again
    listed = await admin.list_tokens(settings)
    assert [(t.name, t.revoked_at is None) for t in listed] == [("alice", True), ("alice", False)]


# -- the real command ------------------------------------------------------------------------------


async def test_the_serve_http_command_requires_its_tokens_and_stops_on_ctrl_c(settings: Settings) -> None:
    env = environment(settings)
    created = cli(env, "token", "create", "alice-laptop", "--principal", "alice")
    assert created.returncode == 0, created.stderr
    secret = created.stdout.strip()  # stdout carries the token alone, for scripts
    assert secret.startswith("omcp_") and "shown only this once" in created.stderr
    listed = cli(env, "token", "list")
    assert listed.stdout.split()[:3] == ["alice-laptop", "alice", "created"] and secret not in listed.stdout
    server = ServeProcess(env)
    try:
        assert "a token required (1 active)" in server.banner
        async with client(server.url, secret) as mcp:
            stored = await call(mcp, "store_memory", content="Stored through the real server process")
            assert stored["embedding_status"] == "embedded"
        assert (await post(server.url, INITIALIZE)).status_code == 401
        revoked = cli(env, "token", "revoke", "alice-laptop")
        assert revoked.returncode == 0 and "revoked token 'alice-laptop'" in revoked.stdout
        assert (await post(server.url, INITIALIZE, Authorization=f"Bearer {secret}")).status_code == 401
    finally:
        code, err = server.stop()
    assert code == 130, err  # the exit status of a command stopped with Ctrl-C
    assert "Traceback" not in err


def test_serve_refuses_another_address_without_tokens_and_http_options_without_http(settings: Settings) -> None:
    env = environment(settings)
    refused = cli(env, "serve", "--http", "--host", "0.0.0.0", "--public-url", "https://m.example.com/mcp")
    assert refused.returncode == 2
    assert "Refusing to serve on 0.0.0.0" in refused.stderr and "ollama-mcp token create NAME" in refused.stderr
    assert refused.stdout == ""
    misplaced = cli(env, "serve", "--port", "9000")
    assert misplaced.returncode == 2 and "--port only apply to --http" in misplaced.stderr
    unknown = cli(env, "token", "revoke", "nobody")
    assert unknown.returncode == 2 and "NAME: names no active token" in unknown.stderr


def test_the_inspector_cli_reaches_the_http_server_with_a_token(settings: Settings) -> None:
    if not INSPECTOR.exists():
        if os.environ.get("CI"):
            raise AssertionError(f"the MCP Inspector CLI is missing at {INSPECTOR}; .ci/run must install it")
        pytest.skip("MCP Inspector CLI not installed")
    env = environment(settings)
    secret = cli(env, "token", "create", "inspector", "--principal", "carol").stdout.strip()
    server = ServeProcess(env)
    try:
        def inspect(*args: str, token: str = secret) -> subprocess.CompletedProcess[str]:
            return subprocess.run(
                [str(INSPECTOR), "--cli", server.url, "--transport", "http", "--header",
                 f"Authorization: Bearer {token}", *args], capture_output=True, text=True, timeout=120, cwd="/",
            )
        stored = inspect("--method", "tools/call", "--tool-name", "store_memory", "--tool-arg",
                         "content=The inspector came over HTTP")
        assert stored.returncode == 0, (stored.stdout[-2000:], stored.stderr[-2000:])
        found = inspect("--method", "tools/call", "--tool-name", "search_all_conversations", "--tool-arg",
                        "query=inspector HTTP")
        assert found.returncode == 0 and "The inspector came over HTTP" in found.stdout
        assert inspect("--method", "tools/list", token="omcp_" + "x" * 43).returncode != 0
    finally:
        server.stop()


def _rows(url: str, query: str) -> list[tuple[Any, ...]]:
    """The rows of ``query``'s last statement (statements separated by "; ") on a connection to ``url``."""
    with psycopg.connect(url, autocommit=True) as conn:
        *first, last = query.split("; ")
        for statement in first:
            conn.execute(statement)
        return conn.execute(last).fetchall()


@pytest.mark.postgres_only
async def test_on_postgresql_the_database_itself_refuses_another_principals_rows_even_to_the_servers_role(
    settings: Settings, postgres_server: str
) -> None:
    # The server runs as a role that is no superuser (a superuser bypasses every privilege), as it should.
    server_role, name = f"memory_server_{uuid.uuid4().hex[:8]}", f"test_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(postgres_server, autocommit=True) as superuser:
        superuser.execute(sql.SQL("CREATE ROLE {} LOGIN CREATEROLE").format(sql.Identifier(server_role)))
        superuser.execute(
            sql.SQL("CREATE DATABASE {} OWNER {}").format(sql.Identifier(name), sql.Identifier(server_role))
        )
    with psycopg.connect(with_database(postgres_server, name), autocommit=True) as superuser:
        superuser.execute("CREATE EXTENSION vector")  # once per database, by a superuser: pgvector is not trusted
    url = make_conninfo(with_database(postgres_server, name), user=server_role)
    shared = replace(settings, postgres_url=url)
    try:
        _, alice_token = await admin.create_token(shared, "alice", None)
        _, bob_token = await admin.create_token(shared, "bob", None)
        async with serving(shared) as endpoint:
            for token, text in ((alice_token, "Alice's vault code is 4711"), (bob_token, "Bob's vault code is 1234")):
                async with client(endpoint, token) as mcp:
                    await call(mcp, "store_memory", content=text)
        async with open_app(shared) as local:  # the local principal's, as the stdio server and the CLI act
            await local.memories.store(new_note("The local user's vault code is 9999"))
        alice = shared.for_principal("alice").store_url
        assert _rows(alice, "SELECT content FROM memories") == [("Alice's vault code is 4711",)]
        assert _rows(url, "SELECT content FROM memories") == [("The local user's vault code is 9999",)]
        # A query on alice's connection that names another principal's rows, without any filter of ours.
        for query in ("SELECT content FROM ollama_mcp_bob.memories", "SELECT content FROM public.memories",
                      "SET search_path = ollama_mcp_bob, public; SELECT content FROM memories",
                      "RESET ROLE; SELECT content FROM ollama_mcp_bob.memories"):
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                _rows(alice, query)
        # The server's own role, which opens every principal's store, cannot read them either.
        for query in ("SELECT content FROM ollama_mcp_alice.memories", "SELECT content FROM ollama_mcp_bob.messages"):
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                _rows(url, query)
        # A search path naming bob's schema passes over it (no USAGE): the names reach the local store's.
        assert _rows(url, "SET search_path = ollama_mcp_bob, public; SELECT content FROM memories") == [
            ("The local user's vault code is 9999",)]
        assert _rows(url, f"SELECT rolsuper, rolcanlogin FROM pg_roles WHERE rolname = '{pg_db.role_of(alice)}'") == [
            (False, False)]
    finally:
        with psycopg.connect(postgres_server, autocommit=True) as superuser:
            superuser.execute(sql.SQL("DROP DATABASE {} WITH (FORCE)").format(sql.Identifier(name)))
            superuser.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(server_role)))

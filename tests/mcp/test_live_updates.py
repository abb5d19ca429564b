"""Live updates: a client subscribed to a conversation hears of each turn, memory, summary and
end, whoever writes it (this server, another process on the same store, another instance on the
same database), and the conversation list announces list_changed; through the real MCP client
in both protocol eras (2026 ``subscriptions/listen`` streams, 2025 ``resources/subscribe``)."""

from __future__ import annotations

import warnings
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import pytest
from mcp import Client, MCPError
from mcp.client.subscriptions import ResourcesListChanged, ResourceUpdated, Subscription
from mcp.types import ResourceListChangedNotification, ResourceUpdatedNotification, ServerNotification

from ollama_mcp.cli import admin
from ollama_mcp.config import Settings
from ollama_mcp.mcp.server import build_server
from tests.conftest import Database, connect
from tests.support.fake_ollama import FakeOllama
from tests.support.http import client, serving
from tests.support.live import next_event
from tests.support.mcp_client import call
from tests.support.stdio import stdio

pytestmark = pytest.mark.anyio

QUIET = 0.6  # seconds without a notification after which "nothing more came" is believed (3 ticks)


async def no_event(sub: Subscription) -> None:
    with anyio.move_on_after(QUIET) as waited:
        event = await sub.__anext__()
        raise AssertionError(f"unexpected {event!r}")
    assert waited.cancelled_caught


async def test_a_listener_hears_each_turn_memory_summary_and_end_of_its_conversation(
    settings: Settings, db: Database
) -> None:
    async with connect(settings) as watcher, connect(settings) as writer:
        conv = (await call(writer, "init_conversation", name="watched"))["conversation_id"]
        other = (await call(writer, "init_conversation", name="not watched"))["conversation_id"]
        uri = f"memory://conversations/{conv}"
        async with watcher.listen(resource_subscriptions=[uri, f"{uri}/history"]) as sub:
            assert sub.honored.resource_subscriptions == [uri, f"{uri}/history"]
            await call(writer, "add_messages", conversation_id=conv, messages=[{"role": "user", "content": "hi"}])
            assert {await next_event(sub), await next_event(sub)} == {
                ResourceUpdated(uri=uri), ResourceUpdated(uri=f"{uri}/history")}
            await call(writer, "store_memory", conversation_id=other, content="elsewhere")
            await no_event(sub)  # another conversation's write is not this one's news
            await call(writer, "store_memory", conversation_id=conv, content="a fact")
            assert (await next_event(sub)).uri in (uri, f"{uri}/history")
            await call(writer, "end_conversation", conversation_id=conv)  # the end, then the summary job
            seen: set[str] = set()
            while db.rows("SELECT summary_status FROM conversations WHERE id = ?", conv)[0][0] != "done":
                seen.add((await next_event(sub)).uri)
            assert seen == {uri, f"{uri}/history"}


async def test_the_conversation_list_announces_list_changed_on_create_end_and_delete(settings: Settings) -> None:
    async with connect(settings) as watcher, connect(settings) as writer:
        async with watcher.listen(resources_list_changed=True) as sub:
            conv = (await call(writer, "init_conversation", name="new"))["conversation_id"]
            assert await next_event(sub) == ResourcesListChanged()
            await call(writer, "store_memory", conversation_id=conv, content="memories do not change the list")
            await no_event(sub)
            await call(writer, "end_conversation", conversation_id=conv, summary="done")
            assert await next_event(sub) == ResourcesListChanged()
            await call(writer, "delete_conversation", conversation_id=conv)
            assert await next_event(sub) == ResourcesListChanged()


async def test_a_subscription_to_what_does_not_exist_is_refused_with_the_field_and_fix(settings: Settings) -> None:
    async with connect(settings) as client:
        missing = "memory://conversations/00000000-0000-4000-8000-000000000000"
        for uri, says in (
            (missing, "notifications.resourceSubscriptions[0]: names no conversation that exists"),
            ("memory://notes/1", "notifications.resourceSubscriptions[0]: is 'memory://notes/1', which this server"
                                 " does not serve; subscribe to memory://conversations"),
            ("memory://conversations/not-a-uuid", "notifications.resourceSubscriptions[0]"),
        ):
            with pytest.raises(MCPError, match="^" + says.replace("[", r"\[").replace("]", r"\]")) as raised:
                async with client.listen(resource_subscriptions=[uri]):
                    pass
            assert "Internal" not in str(raised.value)
        # Refused whole: a good URI beside a bad one is not watched either; the client still works.
        conv = (await call(client, "init_conversation"))["conversation_id"]
        with pytest.raises(MCPError, match=r"resourceSubscriptions\[1\]"):
            async with client.listen(resource_subscriptions=[f"memory://conversations/{conv}", missing]):
                pass
        assert (await call(client, "get_conversation_id"))["current"]["conversation_id"] == conv


@asynccontextmanager
async def legacy_client(settings: Settings, inbox: list[ServerNotification]) -> AsyncIterator[Client]:
    async def handler(message: Any) -> None:
        if isinstance(message, ServerNotification):
            inbox.append(message)

    async with Client(build_server(settings), mode="legacy", message_handler=handler) as client:
        yield client


async def wait_for(inbox: list[ServerNotification], count: int, timeout: float = 3.0) -> list[Any]:
    with anyio.fail_after(timeout):
        while len(inbox) < count:
            await anyio.sleep(0.02)
    await anyio.sleep(QUIET)  # and no more than that
    return [n.root if hasattr(n, "root") else n for n in inbox]


async def test_a_2025_client_subscribes_hears_updates_and_list_changes_and_unsubscribes(settings: Settings) -> None:
    inbox: list[ServerNotification] = []
    async with legacy_client(settings, inbox) as watcher, connect(settings, "legacy") as writer:
        conv = (await call(writer, "init_conversation", name="legacy"))["conversation_id"]
        uri = f"memory://conversations/{conv}"
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # resources/subscribe is deprecated in the 2026 protocol
            await watcher.subscribe_resource(uri)
            await watcher.subscribe_resource(uri)  # twice: still one subscription
            await watcher.subscribe_resource("memory://conversations")
            with pytest.raises(MCPError, match="^uri: names no conversation that exists"):
                await watcher.subscribe_resource("memory://conversations/00000000-0000-4000-8000-000000000000")
        await call(writer, "store_memory", conversation_id=conv, content="heard live")
        got = await wait_for(inbox, 1)
        assert [(type(n), n.params.uri) for n in got] == [(ResourceUpdatedNotification, uri)]
        inbox.clear()
        await call(writer, "init_conversation", name="another")
        got = await wait_for(inbox, 2)
        assert sorted(type(n).__name__ for n in got) == [
            "ResourceListChangedNotification",
            "ResourceUpdatedNotification",
        ]
        assert [n.params.uri for n in got if isinstance(n, ResourceUpdatedNotification)] == ["memory://conversations"]
        assert any(isinstance(n, ResourceListChangedNotification) for n in got)
        inbox.clear()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            await watcher.unsubscribe_resource(uri)
        await call(writer, "store_memory", conversation_id=conv, content="no longer heard")
        await anyio.sleep(QUIET)
        assert inbox == []


async def test_the_2025_handshake_announces_subscribe_and_list_changed(settings: Settings) -> None:
    async with connect(settings, "legacy") as client:
        caps = client.server_capabilities
        assert caps is not None and caps.resources is not None
        assert (caps.resources.subscribe, caps.resources.list_changed) == (True, True)


async def test_a_subscriber_over_stdio_hears_what_another_process_writes_to_the_same_store(
    db: Database, fake_ollama: FakeOllama
) -> None:
    async with Client(stdio(db.url, fake_ollama)) as writer:
        conv = (await call(writer, "init_conversation", name="two processes"))["conversation_id"]
        async with Client(stdio(db.url, fake_ollama)) as watcher:
            uri = f"memory://conversations/{conv}"
            async with watcher.listen(resource_subscriptions=[uri], resources_list_changed=True) as sub:
                await call(writer, "add_messages", conversation_id=conv, messages=[
                    {"role": "user", "content": "from the other process", "actor": "ann"}])
                assert await next_event(sub) == ResourceUpdated(uri=uri)
                await call(writer, "init_conversation", name="a second one")
                assert await next_event(sub) == ResourcesListChanged()
                page = (await watcher.read_resource(f"{uri}/history")).contents[0].text
                assert "from the other process" in page


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_over_http_a_principal_hears_only_its_own_conversations(settings: Settings, mode: str) -> None:

    _, alice_token = await admin.create_token(settings, "alice-laptop", "alice")
    _, bob_token = await admin.create_token(settings, "bob", None)
    inbox: list[ServerNotification] = []

    async def handler(message: Any) -> None:
        if isinstance(message, ServerNotification):
            inbox.append(message)

    async with serving(settings) as url, client(url, alice_token, mode, message_handler=handler) as alice, \
            client(url, bob_token, mode) as bob:
        conv = (await call(alice, "init_conversation", name="alice's"))["conversation_id"]
        uri = f"memory://conversations/{conv}"
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            if mode == "legacy":
                with pytest.raises(MCPError, match="^uri: names no conversation that exists"):
                    await bob.subscribe_resource(uri)  # alice's conversation is not bob's to watch
                await alice.subscribe_resource(uri)
                await alice.subscribe_resource("memory://conversations")
                await call(bob, "init_conversation", name="bob's")  # bob's list is not alice's
                await call(alice, "store_memory", content="heard over http")
                got = await wait_for(inbox, 1)
                assert [(type(n), n.params.uri) for n in got] == [(ResourceUpdatedNotification, uri)]
                return
        with pytest.raises(MCPError, match=r"^notifications.resourceSubscriptions\[0\]: names no conversation"):
            async with bob.listen(resource_subscriptions=[uri]):
                pass
        async with alice.listen(resource_subscriptions=[uri], resources_list_changed=True) as sub:
            await call(bob, "init_conversation", name="bob's")
            await no_event(sub)
            await call(alice, "store_memory", content="heard over http")
            assert await next_event(sub) == ResourceUpdated(uri=uri)

"""Sharing one conversation with named principals of the HTTP server (read, or read-write): the
real MCP client of each person against one server with tokens, on both storage backends. What a
grantee may do is proven by what lands in which store, and what they may not by the error and
by rows that did not change."""

from __future__ import annotations

import pytest
from mcp import Client, types
from mcp.shared.exceptions import MCPError

from ollama_mcp.cli import admin
from ollama_mcp.config import Settings
from tests.conftest import Database
from tests.support.http import client, serving
from tests.support.mcp_client import call, error
from tests.support.view import store_of

pytestmark = pytest.mark.anyio


async def _people(settings: Settings) -> dict[str, str]:
    """A token for each of alice, bob and carol (named after their laptops)."""
    return {who: (await admin.create_token(settings, f"{who}-laptop", who))[1] for who in ("alice", "bob", "carol")}


async def _alices_conversation(alice: Client) -> tuple[str, str]:
    conversation = (await call(alice, "init_conversation", name="release plan"))["conversation_id"]
    memory = (await call(alice, "store_memory", content="The release freeze starts on the 14th"))["memory_id"]
    return conversation, memory


def _text(result: types.ReadResourceResult) -> str:
    return result.contents[0].text


async def test_a_conversation_shared_to_read_is_readable_by_its_grantee_alone_and_stays_its_owners(
    settings: Settings, db: Database, backend: str
) -> None:
    tokens = await _people(settings)
    async with serving(settings) as url, client(url, tokens["alice"]) as alice, \
            client(url, tokens["bob"]) as bob, client(url, tokens["carol"]) as carol:
        conversation, memory = await _alices_conversation(alice)
        own = (await call(bob, "init_conversation", name="bob's own"))["conversation_id"]
        shared = await call(alice, "share_conversation", conversation_id=conversation, principal="bob")
        assert [(s["principal"], s["access"]) for s in shared["shared_with"]] == [("bob", "read")]

        listed = (await call(bob, "list_conversations"))["conversations"]
        assert {(c["conversation_id"], c.get("owner"), c.get("access")) for c in listed} == {
            (own, None, None), (conversation, "alice", "read")}
        found = await call(
            bob, "search_memories", query="when does the release freeze start", conversation_id=conversation
        )
        assert [hit["memory_id"] for hit in found["results"]] == [memory]
        assert (
            "freeze starts on the 14th"
            in (await call(bob, "export_conversation", conversation_id=conversation))["markdown"]
        )
        assert "freeze starts on the 14th" in _text(await bob.read_resource(f"memory://conversations/{conversation}"))
        read = await call(bob, "read_memory", memory_id=memory, conversation_id=conversation)
        assert read["content"] == "The release freeze starts on the 14th"
        for asked in (own, None):  # read through the share only: not as his own conversation's, nor his own
            arguments = {"conversation_id": asked} if asked else {}
            assert f"memory_id: no memory {memory} exists" in await error(bob, "read_memory", memory_id=memory,
                                                                          **arguments)
        prompt = await bob.get_prompt("build_context", {"conversation_id": conversation, "query": "release freeze"})
        assert any("freeze starts on the 14th" in m.content.text for m in prompt.messages)

        # Reading is all: writing into it, and what only its owner does, are refused naming the owner.
        refused = await error(bob, "store_memory", content="Freeze moved to the 20th", conversation_id=conversation)
        assert f"conversation_id: {conversation} is alice's, shared with you to read only" in refused
        for tool, doing in (("end_conversation", "end it"), ("delete_conversation", "delete it"),
                            ("share_conversation", "share it")):
            arguments = {"principal": "carol"} if tool == "share_conversation" else {}
            assert f"only its owner may {doing}; ask alice." in await error(
                bob, tool, conversation_id=conversation, **arguments), tool
        # Bob's search of everything finds it beside his own memory (each list ranked in its own store).
        bobs = await call(
            bob, "store_memory", content="My release freeze checklist is in the wiki", conversation_id=own
        )
        everywhere = await call(bob, "search_all_conversations", query="release freeze")
        assert [hit["memory_id"] for hit in everywhere["results"]] == [bobs["memory_id"], memory]
        assert memory not in {hit["memory_id"] for hit in
                              (await call(carol, "search_all_conversations", query="release freeze"))["results"]}

        # Carol, with whom nothing is shared, gets what she gets for a conversation that does not exist.
        for tool, arguments in (("search_memories", {"query": "freeze"}), ("export_conversation", {}),
                                ("store_memory", {"content": "slipped in"}), ("end_conversation", {})):
            assert f"no conversation {conversation} exists" in await error(
                carol, tool, conversation_id=conversation, **arguments), tool
        assert f"memory_id: no memory {memory} exists" in await error(
            carol, "read_memory", memory_id=memory, conversation_id=conversation)
        assert conversation not in {
            c["conversation_id"] for c in (await call(carol, "list_conversations"))["conversations"]
        }
        with pytest.raises(MCPError):
            await carol.read_resource(f"memory://conversations/{conversation}")

    alices = store_of(settings, backend, "alice")
    assert alices.rows("SELECT id, status FROM conversations") == [(conversation, "active")]
    assert alices.rows("SELECT content FROM memories") == [("The release freeze starts on the 14th",)]
    assert store_of(settings, backend, "bob").rows("SELECT conversation_id, content FROM memories") == [
        (own, "My release freeze checklist is in the wiki")]
    assert store_of(settings, backend, "carol").count("SELECT count(*) FROM memories") == 0
    # The share is kept beside the tokens, in the local principal's store; nothing in anyone else's.
    assert db.rows("SELECT conversation_id, grantee, owner, access FROM conversation_shares") == [
        (conversation, "bob", "alice", "read")]
    assert alices.count("SELECT count(*) FROM conversation_shares") == 0


async def test_a_grantee_with_write_access_stores_into_the_owners_conversation_under_their_own_name(
    settings: Settings, backend: str
) -> None:
    tokens = await _people(settings)
    async with serving(settings) as url, client(url, tokens["alice"]) as alice, client(url, tokens["bob"]) as bob:
        conversation, _ = await _alices_conversation(alice)
        await call(alice, "share_conversation", conversation_id=conversation, principal="bob", access="write")
        added = await call(bob, "store_memory", content="QA signs off on the 13th", conversation_id=conversation)
        assert added["conversation_id"] == conversation
        # Alice finds it in her own conversation, as if she had stored it.
        found = await call(alice, "search_memories", query="when does QA sign off", conversation_id=conversation)
        assert found["results"][0]["memory_id"] == added["memory_id"]
        # Bob's current conversation did not become hers: a note without an id stays in his own memory.
        mine = await call(bob, "store_memory", content="Bob's own note")
        assert mine["conversation_id"] != conversation

        # Access none stops it at once: bob then gets what anyone gets for a conversation he cannot see.
        stopped = await call(alice, "share_conversation", conversation_id=conversation, principal="bob", access="none")
        assert stopped["shared_with"] == []
        assert f"no conversation {conversation} exists" in await error(
            bob, "store_memory", content="one more", conversation_id=conversation)
        assert conversation not in {
            c["conversation_id"] for c in (await call(bob, "list_conversations"))["conversations"]
        }
        everywhere = await call(bob, "search_all_conversations", query="own note, QA, release freeze")
        assert [hit["conversation_id"] for hit in everywhere["results"]] == [mine["conversation_id"]]

    alices = store_of(settings, backend, "alice")
    assert sorted(alices.rows("SELECT content FROM memories")) == [
        ("QA signs off on the 13th",), ("The release freeze starts on the 14th",)]
    # The write audit in alice's store names bob's token as the writer.
    assert alices.rows("SELECT door, principal, action, conversation_id FROM write_audit WHERE action = 'store_memory'"
                       " ORDER BY id") == [("tool", "alice-laptop", "store_memory", conversation),
                                           ("tool", "bob-laptop", "store_memory", conversation)]
    assert store_of(settings, backend, "bob").rows("SELECT content FROM memories") == [("Bob's own note",)]


async def test_shares_are_listed_with_each_owners_filters_and_order_and_a_deleted_one_leads_nowhere(
    settings: Settings, db: Database
) -> None:
    tokens = await _people(settings)
    async with serving(settings) as url, client(url, tokens["alice"]) as alice, \
            client(url, tokens["bob"]) as bob, client(url, tokens["carol"]) as carol:
        plan, _ = await _alices_conversation(alice)
        notes = (await call(carol, "init_conversation", name="carol's notes", metadata={"project": "apollo"}))
        await call(carol, "store_memory", content="Carol's newest note", conversation_id=notes["conversation_id"])
        own = (await call(bob, "init_conversation", name="bob's own"))["conversation_id"]
        await call(alice, "share_conversation", conversation_id=plan, principal="bob", access="write")
        await call(carol, "share_conversation", conversation_id=notes["conversation_id"], principal="bob")
        await call(alice, "end_conversation", conversation_id=plan, summary="Freeze on the 14th.")

        everything = (await call(bob, "list_conversations", order="created"))["conversations"]
        assert [c["conversation_id"] for c in everything] == [own, notes["conversation_id"], plan]
        latest = (await call(bob, "list_conversations", limit=2))["conversations"]
        assert [c["conversation_id"] for c in latest] == [plan, own]  # alice's end is the latest activity
        completed = (await call(bob, "list_conversations", status="completed"))["conversations"]
        assert [(c["conversation_id"], c["owner"]) for c in completed] == [(plan, "alice")]
        apollo = (await call(bob, "list_conversations", metadata={"project": "apollo"}))["conversations"]
        assert [(c["conversation_id"], c["owner"], c["access"]) for c in apollo] == [
            (notes["conversation_id"], "carol", "read")]
        # An ended conversation shared to write takes no more memories, as for its owner.
        assert "has ended" in await error(bob, "store_memory", content="late", conversation_id=plan)

        found = await call(bob, "search_all_conversations", query="release freeze")
        assert {hit["conversation_id"] for hit in found["results"]} == {plan}  # the note and alice's summary

        await call(alice, "delete_conversation", conversation_id=plan)
        assert plan not in {c["conversation_id"] for c in (await call(bob, "list_conversations"))["conversations"]}
        assert f"no conversation {plan} exists" in await error(bob, "export_conversation", conversation_id=plan)
        assert (await call(bob, "search_all_conversations", query="release freeze"))["results"] == []
        # Its shares went with it; carol's stays.
        assert db.rows("SELECT conversation_id, grantee FROM conversation_shares") == [
            (notes["conversation_id"], "bob")
        ]


async def test_sharing_checks_whom_what_and_how_before_anything_is_kept(settings: Settings, db: Database) -> None:
    tokens = await _people(settings)
    async with serving(settings) as url, client(url, tokens["alice"]) as alice, client(url, tokens["bob"]) as bob:
        conversation, _ = await _alices_conversation(alice)
        bobs = (await call(bob, "init_conversation", name="bob's"))["conversation_id"]
        for arguments, expected in (
            ({"principal": "Bob Smith"}, "principal: must be a principal's name"),
            ({"principal": "alice"}, "principal: names you"),
            ({"principal": "bob", "conversation_id": "not-an-id"}, "conversation_id: "),
            ({"principal": "bob", "conversation_id": bobs}, f"no conversation {bobs} exists"),
            ({"principal": "bob", "access": "admin"}, "access"),
        ):
            text = await error(alice, "share_conversation", **{"conversation_id": conversation, **arguments})
            assert expected in text, (arguments, text)
        assert db.count("SELECT count(*) FROM conversation_shares") == 0
        # Sharing again changes the access; the list says whom it is shared with now.
        await call(alice, "share_conversation", conversation_id=conversation, principal="bob")
        again = await call(alice, "share_conversation", conversation_id=conversation, principal="carol", access="write")
        assert [(s["principal"], s["access"]) for s in again["shared_with"]] == [("bob", "read"), ("carol", "write")]
        upgraded = await call(
            alice, "share_conversation", conversation_id=conversation, principal="bob", access="write"
        )
        assert [(s["principal"], s["access"]) for s in upgraded["shared_with"]] == [
            ("bob", "write"),
            ("carol", "write"),
        ]
    assert db.count("SELECT count(*) FROM conversation_shares") == 2


async def test_sharing_with_an_unknown_principal_is_refused_naming_the_known_ones_and_keeps_nothing(
    settings: Settings, db: Database
) -> None:
    tokens = await _people(settings)
    async with serving(settings) as url, client(url, tokens["alice"]) as alice:
        conversation, _ = await _alices_conversation(alice)
        text = await error(alice, "share_conversation", conversation_id=conversation, principal="bobb")
        assert "principal: no active token of this server opens 'bobb'" in text, text
        assert "bob, carol" in text and "did you mean 'bob'" in text, text
        assert db.count("SELECT count(*) FROM conversation_shares") == 0
        # Stopping a share with someone unknown is no error: there is nothing to stop.
        stopped = await call(alice, "share_conversation", conversation_id=conversation, principal="bobb", access="none")
        assert stopped["shared_with"] == []


async def test_servers_of_one_principal_do_not_offer_sharing(settings: Settings) -> None:
    async with serving(settings) as url, client(url) as mcp:  # tokenless loopback: the local principal only
        assert "share_conversation" not in {tool.name for tool in (await mcp.list_tools()).tools}


async def test_a_grantee_searching_related_to_a_shared_conversation_sees_only_what_is_shared_with_it(
    settings: Settings, db: Database
) -> None:
    tokens = await _people(settings)
    async with serving(settings) as url, client(url, tokens["alice"]) as alice, client(url, tokens["bob"]) as bob:
        shared, memory = await _alices_conversation(alice)
        private = (await call(alice, "init_conversation", name="release plan, private part", follows=shared))
        secret = await call(
            alice,
            "store_memory",
            content="The release freeze bonus is secret",
            conversation_id=private["conversation_id"],
        )
        await call(alice, "share_conversation", conversation_id=shared, principal="bob")

        mine = await call(alice, "search_all_conversations", query="release freeze", top_k=10, related_to=shared)
        theirs = await call(bob, "search_all_conversations", query="release freeze", top_k=10, related_to=shared)
        listed = _text(await bob.read_resource(f"memory://conversations/{shared}/relations"))
        owners = _text(await alice.read_resource(f"memory://conversations/{shared}/relations"))
    assert {hit["memory_id"] for hit in mine["results"]} == {memory, secret["memory_id"]}
    assert [hit["memory_id"] for hit in theirs["results"]] == [memory]
    assert private["conversation_id"] not in listed and "None yet" in listed
    assert f"followed up by [release plan, private part](memory://conversations/{private['conversation_id']})" in owners

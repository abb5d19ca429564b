"""Searches and listings narrowed to a project, and every hit saying its project, through the real
MCP client on both backends. A project is what a conversation's ``metadata.project`` names: the
repository path hooks and Claude Code imports file it under, or what a client passed."""

from __future__ import annotations

from typing import Any

import pytest
from mcp import Client

from ollama_mcp.config import Settings
from tests.conftest import connect
from tests.support.mcp_client import call, error

pytestmark = pytest.mark.anyio

FILED = {
    "shop backend": "/work/shop",
    "shop frontend": "/work/shop",
    "workshop": "/work/workshop",  # ends in "shop" but is not the folder "shop"
    "my_app": "/work/my_app",
    "myXapp": "/work/myXapp",  # "_" is not a LIKE wildcard here
    "blog": "C:\\Users\\ann\\blog",  # a Windows path: the folder name still finds it
}


async def filed(client: Client) -> dict[str, str]:
    """One conversation per FILED entry and one with no project, each with a memory about the
    deploy; the last one created ("unfiled") is current. Returns their ids by name."""
    ids: dict[str, str] = {}
    for name, project in [*FILED.items(), ("unfiled", None)]:
        metadata = {"project": project} if project else None
        created = await call(client, "init_conversation", name=name, metadata=metadata)
        ids[name] = created["conversation_id"]
        await call(client, "store_memory", content=f"The {name} deploy runs on Fridays after the tests")
    return ids


def names_of(found: dict[str, Any], ids: dict[str, str]) -> list[str]:
    by_id = {v: k for k, v in ids.items()}
    return sorted(by_id[hit["conversation_id"]] for hit in found["results"])


async def test_a_search_by_folder_name_or_path_finds_exactly_that_projects_conversations_and_says_so(
    settings: Settings,
) -> None:
    async with connect(settings) as client:
        ids = await filed(client)
        for project in ("shop", "/work/shop", "/work/shop/", " shop "):
            found = await call(client, "search_all_conversations", query="when does the deploy run", top_k=20,
                               project=project)
            assert names_of(found, ids) == ["shop backend", "shop frontend"], project
            assert {hit["project"] for hit in found["results"]} == {"/work/shop"}
            assert "Searched the 2 conversations of project" in found["notice"]

        assert names_of(await call(client, "search_all_conversations", query="deploy", project="my_app"), ids) == [
            "my_app"
        ]
        assert names_of(await call(client, "search_all_conversations", query="deploy", project="blog"), ids) == [
            "blog"
        ]


async def test_search_memories_with_a_project_covers_all_of_its_conversations_not_only_the_current_one(
    settings: Settings,
) -> None:
    async with connect(settings) as client:
        ids = await filed(client)  # "unfiled" is current
        found = await call(client, "search_memories", query="deploy", project="shop", top_k=20)
        assert names_of(found, ids) == ["shop backend", "shop frontend"]
        listed = await call(client, "search_memories", query="*", project="workshop", top_k=20)
        assert names_of(listed, ids) == ["workshop"] and listed["mode"] == "list"
        assert listed["results"][0]["project"] == "/work/workshop"

        narrowed = await call(
            client, "search_memories", query="deploy", project="shop", conversation_id=ids["shop frontend"]
        )
        assert names_of(narrowed, ids) == ["shop frontend"]
        elsewhere = await call(client, "search_memories", query="deploy", project="shop", conversation_id=ids["blog"])
        assert elsewhere["results"] == []


async def test_every_hit_says_its_project_and_a_hit_of_an_unfiled_conversation_says_none(settings: Settings) -> None:
    async with connect(settings) as client:
        ids = await filed(client)
        found = await call(client, "search_all_conversations", query="deploy Fridays", top_k=20)
        by_id = {v: k for k, v in ids.items()}
        said = {by_id[hit["conversation_id"]]: hit.get("project") for hit in found["results"]}
        assert said == {**FILED, "unfiled": None}


async def test_a_search_of_one_conversation_names_its_project_on_every_hit_as_all_do(
    settings: Settings,
) -> None:
    async with connect(settings) as client:
        ids = await filed(client)
        numbered = await call(client, "init_conversation", name="numbered", metadata={"project": 7})
        ids["numbered"] = numbered["conversation_id"]
        await call(client, "store_memory", content="The numbered deploy runs on Fridays after the tests")
        everywhere = await call(client, "search_all_conversations", query="deploy Fridays", top_k=20)
        by_id = {v: k for k, v in ids.items()}
        said_everywhere = {by_id[hit["conversation_id"]]: hit.get("project") for hit in everywhere["results"]}
        for name in ("shop backend", "blog", "unfiled", "numbered"):
            found = await call(client, "search_memories", query="deploy Fridays", conversation_id=ids[name])
            assert names_of(found, ids) == [name]
            assert [hit.get("project") for hit in found["results"]] == [said_everywhere[name]], name
            listed = await call(client, "search_memories", query="*", conversation_id=ids[name])
            assert [hit.get("project") for hit in listed["results"]] == [said_everywhere[name]], name
    assert said_everywhere["shop backend"] == "/work/shop" and said_everywhere["blog"] == "C:\\Users\\ann\\blog"
    assert said_everywhere["unfiled"] is None and said_everywhere["numbered"] == "7"


async def test_list_conversations_by_project_lists_only_that_projects_conversations(settings: Settings) -> None:
    async with connect(settings) as client:
        await filed(client)
        listed = await call(client, "list_conversations", project="shop")
        assert sorted(c["name"] for c in listed["conversations"]) == ["shop backend", "shop frontend"]
        assert {c["metadata"]["project"] for c in listed["conversations"]} == {"/work/shop"}
        ended = await call(client, "list_conversations", project="shop", status="completed")
        assert ended["conversations"] == []


async def test_a_project_nothing_is_filed_under_finds_nothing_and_says_how_to_see_the_projects(
    settings: Settings,
) -> None:
    async with connect(settings) as client:
        await filed(client)
        found = await call(client, "search_all_conversations", query="deploy", project="garden")
        assert found["results"] == []
        assert "No conversation is filed under project 'garden'" in found["notice"]
        assert "list_conversations" in found["notice"]


@pytest.mark.parametrize("bad", ["", "   ", 7, "x" * 4097])
async def test_a_project_that_is_not_a_name_or_path_is_refused_naming_the_field(settings: Settings, bad: Any) -> None:
    async with connect(settings) as client:
        for tool, args in [
            ("search_memories", {"query": "deploy"}),
            ("search_all_conversations", {"query": "deploy"}),
            ("list_conversations", {}),
        ]:
            said = await error(client, tool, **args, project=bad)
            assert "project" in said, (tool, said)  # a number: the SDK's type check names the field
            if isinstance(bad, str):
                assert "must be a non-empty text" in said and "folder name" in said, (tool, said)

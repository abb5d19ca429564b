"""Relations between conversations through the real MCP client, on both backends: a follow-up
started with ``follows``, related and duplicate conversations found from their end summaries
(the fake Ollama's bag-of-words vectors make the similarities exact), the relations resource,
search_all_conversations ``related_to``, and what deleting or Ollama being down does to them."""

from __future__ import annotations

import uuid
from dataclasses import replace
from typing import Any

import anyio
import pytest
from mcp.client import Client
from mcp.client.subscriptions import ResourceUpdated

from ollama_mcp.config import Settings
from ollama_mcp.domain import Relation
from ollama_mcp.storage.relation_rules import merge_relations
from tests.conftest import Database, connect, eventually
from tests.support.fake_ollama import FakeOllama
from tests.support.mcp_client import call, error

pytestmark = pytest.mark.anyio

GARDEN = "garden tomatoes basil compost watering schedule"  # six words: bag-of-words vectors
GARDEN_PLAN = "garden tomatoes basil compost watering plan"  # five of them shared: cosine 5/6
CAR = "car engine oil brakes tyres service"


def text(result: Any) -> str:
    return result.contents[0].text


async def ended(mcp: Client, name: str, summary: str | None, *notes: str, **init: Any) -> str:
    conversation = (await call(mcp, "init_conversation", name=name, **init))["conversation_id"]
    for note in (f"{name}: {summary or 'notes'}", *notes):
        await call(mcp, "store_memory", content=note, conversation_id=conversation)
    await call(mcp, "end_conversation", conversation_id=conversation, **({"summary": summary} if summary else {}))
    return conversation


def relations(db: Database) -> set[tuple[str, str, str, float | None]]:
    return {
        (a, b, kind, None if score is None else round(score, 3))
        for a, b, kind, score in db.rows("SELECT conversation_id, related_id, kind, score FROM conversation_relations")
    }


def relate_jobs_done(db: Database) -> int:
    return db.count("SELECT count(*) FROM jobs WHERE kind = 'relate' AND state = 'done'")


async def test_a_follow_up_names_the_conversation_it_continues_and_both_list_the_link(
    settings: Settings, db: Database
) -> None:
    async with connect(settings) as mcp:
        first = (await call(mcp, "init_conversation", name="kitchen plans"))["conversation_id"]
        created = await call(mcp, "init_conversation", name="kitchen plans, part 2", follows=first.upper())
        second = created["conversation_id"]
        assert created["follows"] == first  # as the id is written everywhere else
        later = text(await mcp.read_resource(f"memory://conversations/{second}/relations"))
        earlier = text(await mcp.read_resource(f"memory://conversations/{first}/relations"))
    assert relations(db) == {(second, first, "follow_up", None)}
    assert f"- follows [kitchen plans](memory://conversations/{first}) · active" in later
    assert f"- followed up by [kitchen plans, part 2](memory://conversations/{second}) · active" in earlier


async def test_follows_naming_no_conversation_is_refused_and_creates_nothing(settings: Settings, db: Database) -> None:
    async with connect(settings) as mcp:
        missing = str(uuid.uuid4())
        unknown = await error(mcp, "init_conversation", name="orphan", follows=missing)
        malformed = await error(mcp, "init_conversation", name="orphan", follows="yesterday's chat")
    assert unknown.endswith(f"follows: names no conversation ({missing}); pass the id of the conversation this one "
                            "continues (list_conversations shows them), or leave it out.")
    assert ": follows:" in malformed and "conversation_id returned by init_conversation" in malformed
    assert db.count("SELECT count(*) FROM conversations") == 0
    assert db.count("SELECT count(*) FROM conversation_relations") == 0


async def test_an_ended_conversation_links_to_those_its_summary_resembles_with_the_score(
    settings: Settings, db: Database
) -> None:
    async with connect(settings) as mcp:
        garden = await ended(mcp, "garden", GARDEN)
        car = await ended(mcp, "car", CAR)
        await eventually(lambda: _true(relate_jobs_done(db) == 2))
        plan = await ended(mcp, "garden plan", GARDEN_PLAN)
        again = await ended(mcp, "garden again", GARDEN)
        await eventually(lambda: _true(relate_jobs_done(db) == 4))
        listed = text(await mcp.read_resource(f"memory://conversations/{garden}/relations"))
        alone = text(await mcp.read_resource(f"memory://conversations/{car}/relations"))
        from_again = text(await mcp.read_resource(f"memory://conversations/{again}/relations"))
    assert relations(db) == {
        (plan, garden, "related", 0.833),  # 5 of 6 words shared
        (again, garden, "duplicate", 1.0),
        (again, plan, "related", 0.833),
    }
    lines = listed.splitlines()
    assert lines[2] == f"- duplicated by [garden again](memory://conversations/{again}) · completed · similarity 1.00"
    assert lines[3] == f"- related to [garden plan](memory://conversations/{plan}) · completed · similarity 0.83"
    assert "None yet" in alone and car not in relations_ids(db)
    assert from_again.splitlines()[2:4] == [
        f"- duplicate of [garden](memory://conversations/{garden}) · completed · similarity 1.00",
        f"- related to [garden plan](memory://conversations/{plan}) · completed · similarity 0.83",
    ]


def test_relations_read_both_ways_list_follow_ups_first_then_the_best_match() -> None:
    def link(other: str, kind: Any, score: float | None, follows: bool) -> Relation:
        return Relation(other, other, "completed", kind, score, follows, "2026-11-24T00:00:00.000000Z")

    merged = merge_relations([
        link("mine", "related", 0.7, True),  # recorded by this conversation
        link("theirs", "related", 0.9, False),  # recorded by the other one
        link("both", "related", 0.8, True), link("both", "related", 0.8, False),
        link("earlier", "related", 0.75, True), link("earlier", "follow_up", None, True),
        link("later", "follow_up", None, False),
    ])
    assert [(r.conversation_id, r.kind, r.score, r.follows) for r in merged] == [
        ("earlier", "follow_up", 0.75, True), ("later", "follow_up", None, False),
        ("theirs", "related", 0.9, False), ("both", "related", 0.8, True), ("mine", "related", 0.7, True),
    ]


def relations_ids(db: Database) -> set[str]:
    return {c for a, b, _, _ in relations(db) for c in (a, b)}


async def _true(value: bool) -> bool:
    return value


async def test_a_follow_up_that_also_resembles_keeps_its_kind_and_gains_the_score(
    settings: Settings, db: Database
) -> None:
    async with connect(settings) as mcp:
        first = await ended(mcp, "garden", GARDEN)
        await eventually(lambda: _true(relate_jobs_done(db) == 1))
        second = await ended(mcp, "garden plan", GARDEN_PLAN, follows=first)
        await eventually(lambda: _true(relate_jobs_done(db) == 2))
        listed = text(await mcp.read_resource(f"memory://conversations/{second}/relations"))
    assert relations(db) == {(second, first, "follow_up", 0.833)}
    assert listed.splitlines()[2] == (
        f"- follows [garden](memory://conversations/{first}) · completed · similarity 0.83"
    )


async def test_a_summary_the_chat_model_writes_links_the_conversation_too(settings: Settings, db: Database) -> None:
    async with connect(replace(settings, related_threshold=0.3)) as mcp:
        garden = await ended(mcp, "garden", GARDEN)
        written = (await call(mcp, "init_conversation", name="more garden"))["conversation_id"]
        await call(mcp, "store_memory", content=f"we talked about the {GARDEN}", conversation_id=written)
        await call(mcp, "end_conversation", conversation_id=written)  # the chat model writes its summary
        await eventually(lambda: _true(relate_jobs_done(db) == 2))
    [(source, other, kind, score)] = relations(db)
    assert (source, other, kind) == (written, garden, "related") and score is not None and score >= 0.3


async def test_while_ollama_is_down_linking_waits_and_catches_up_when_it_answers(
    settings: Settings, db: Database, fake_ollama: FakeOllama
) -> None:
    async with connect(settings) as mcp:
        garden = await ended(mcp, "garden", GARDEN)
        await eventually(lambda: _true(relate_jobs_done(db) == 1))
        fake_ollama.stop()
        plan = await ended(mcp, "garden plan", GARDEN_PLAN)
        waiting = await eventually(lambda: _true(bool(db.rows(
            "SELECT last_error FROM jobs WHERE kind = 'relate' AND state = 'queued' AND last_error IS NOT NULL"
        ))))
        assert waiting and relations(db) == set()
        fake_ollama.start()
        await eventually(lambda: _true(relate_jobs_done(db) == 2))
    assert relations(db) == {(plan, garden, "related", 0.833)}
    assert db.count("SELECT count(*) FROM jobs WHERE kind = 'relate' AND attempts > 0 AND state = 'failed'") == 0


async def test_search_related_to_covers_the_conversation_its_follow_ups_and_related_ones_only(
    settings: Settings, db: Database
) -> None:
    async with connect(settings) as mcp:
        zucchini = "the zucchini harvest was huge"
        garden = await ended(mcp, "garden", GARDEN, zucchini)
        await eventually(lambda: _true(relate_jobs_done(db) == 1))
        plan = await ended(mcp, "garden plan", GARDEN_PLAN)
        await eventually(lambda: _true(relate_jobs_done(db) == 2))
        follow = (await call(mcp, "init_conversation", name="garden follow-up", follows=plan))["conversation_id"]
        car = (await call(mcp, "init_conversation", name="car"))["conversation_id"]
        for conversation in (follow, car):
            await call(mcp, "store_memory", content=zucchini, conversation_id=conversation)
        scoped = await call(mcp, "search_all_conversations", query="zucchini harvest", top_k=10, related_to=garden)
        everywhere = await call(mcp, "search_all_conversations", query="zucchini harvest", top_k=10)
        missing = str(uuid.uuid4())
        unknown = await error(mcp, "search_all_conversations", query="zucchini", related_to=missing)
    def places(hit: dict[str, Any]) -> set[str]:  # a hit and the places its words were said again
        return {hit["conversation_id"]} | {p["conversation_id"] for p in hit.get("also_in") or []}

    found = {c for hit in scoped["results"] if "zucchini" in hit["content"] for c in places(hit)}
    assert found == {garden, follow}  # plan is related to garden, follow continues plan; car is neither
    assert {c for hit in scoped["results"] for c in places(hit)} <= {garden, plan, follow}
    assert scoped["searched"] == "related"
    assert "Searched 3 conversations" in scoped["notice"]
    assert car in {c for hit in everywhere["results"] for c in places(hit)}
    assert f": related_to: names no conversation ({missing}); pass the id" in unknown


async def test_deleting_a_conversation_deletes_its_links_both_ways(settings: Settings, db: Database) -> None:
    async with connect(settings) as mcp:
        first = (await call(mcp, "init_conversation", name="one"))["conversation_id"]
        second = (await call(mcp, "init_conversation", name="two", follows=first))["conversation_id"]
        third = (await call(mcp, "init_conversation", name="three", follows=second))["conversation_id"]
        await call(mcp, "delete_conversation", conversation_id=second)
        listed = text(await mcp.read_resource(f"memory://conversations/{first}/relations"))
    assert relations(db) == set()
    assert "None yet" in listed and third not in listed


async def test_a_listener_to_a_conversation_hears_when_another_is_linked_to_it(
    settings: Settings, db: Database
) -> None:
    async with connect(settings) as watcher, connect(settings) as writer:
        garden = await ended(writer, "garden", GARDEN)
        car = await ended(writer, "car", CAR)
        await eventually(lambda: _true(relate_jobs_done(db) == 2))
        uri = f"memory://conversations/{garden}/relations"
        async with watcher.listen(resource_subscriptions=[uri]) as sub:
            plan = await ended(writer, "garden plan", GARDEN_PLAN)  # its own writes are not garden's news
            with anyio.fail_after(5):
                event = await sub.__anext__()
            assert event == ResourceUpdated(uri=uri)
    assert relations(db) == {(plan, garden, "related", 0.833)} and car not in relations_ids(db)

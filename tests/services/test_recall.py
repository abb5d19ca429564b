"""What was captured is what is recalled (#79): recorded and imported turns are found by every
door's default search, one hit per fact with every place it was said, no hit that stands only on
its neighbours' words, a plain word when nothing is there; history at its own time, and what the
user deleted stays deleted. Both backends, real stores, the fake Ollama over HTTP."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest

from ollama_mcp.app import App, open_app
from ollama_mcp.config import Settings
from ollama_mcp.inputs.context import context_request
from ollama_mcp.inputs.conversations import conversation_query, new_conversation
from ollama_mcp.inputs.memories import note as new_note
from ollama_mcp.inputs.memories import notes_to_import
from ollama_mcp.inputs.search import search_request
from ollama_mcp.inputs.turns import parse_turns
from ollama_mcp.rest.models import PREFIX
from tests.conftest import Database, backfill, connect
from tests.support.chats import chatgpt_conversation
from tests.support.cli import rows, run
from tests.support.fake_ollama import FakeOllama
from tests.support.http import serving
from tests.support.mcp_client import call
from tests.support.view import view

pytestmark = pytest.mark.anyio


def _settings(db: Database, fake: FakeOllama) -> Settings:
    return Settings.from_env({"OLLAMA_MCP_DB": db.url, "OLLAMA_HOST": fake.url, "HOME": "/nonexistent"})


def _import(tmp_path: Path, db: Database, fake: FakeOllama, *chats: dict[str, Any], flags: tuple[str, ...] = ()) -> str:
    export = tmp_path / "conversations.json"
    export.write_text(json.dumps(list(chats)))
    done = run(db, fake, "import", str(export), *flags)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_an_imported_chat_is_found_by_the_default_search_of_every_door(
    tmp_path: Path, db: Database, fake_ollama: FakeOllama
) -> None:
    _import(tmp_path, db, fake_ollama, chatgpt_conversation())
    settings = _settings(db, fake_ollama)
    wanted = "The Alfama hotel, three nights."

    async def doors() -> None:
        async with connect(settings) as client:
            everywhere = await call(client, "search_all_conversations", query="Alfama hotel nights")
            assert [r["content"] for r in everywhere["results"]][:1] == [wanted]
            assert everywhere["results"][0]["kind"] == "message"
            mine = await call(client, "search_memories", query="Alfama hotel nights")
            assert [r["content"] for r in mine["results"]][:1] == [wanted]
            notes = await call(client, "search_all_conversations", query="Alfama hotel nights", kind="note")
            assert notes["results"] == []
            assert notes["notice"] == (
                "Memory holds nothing on this: there is nothing to search here yet of kind note; leave kinds out to"
                " search every kind."
            )
        fake_ollama.enqueue_chat(_tool_call("search_all_conversations", query="Alfama hotel nights"), "Alfama.")
        async with connect(settings) as client:
            await call(client, "ask_agent", query="where did we stay?")
        searched = fake_ollama.chat_requests()[-1].body["messages"][-1]
        assert searched["role"] == "tool" and wanted in searched["content"]
        async with open_app(settings, background=False) as app, view(app) as browser:
            page = await browser.get("/search", params={"q": "Alfama hotel nights"})
            assert page.status_code == 200 and wanted in page.text and "Nothing found" not in page.text

    anyio.run(doors)


def _tool_call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"role": "assistant", "content": "", "tool_calls": [{"function": {"name": name, "arguments": arguments}}]}


async def test_one_fact_told_in_two_conversations_is_one_hit_naming_both(app: App) -> None:
    first = await app.conversations.start(new_conversation("monday"))
    (said,), _ = await app.transcript.add_messages(
        first.id, parse_turns("messages", [{"role": "user", "content": "We deploy on Fridays only."}])
    )
    second = await app.conversations.start(new_conversation("thursday"))
    note = await app.memories.store(new_note("we deploy on fridays only", second.id))
    await app.memories.store(new_note("Lunch is at noon in the canteen", second.id))
    await backfill(app)

    found = (await app.recall.search(search_request("deploy Fridays", everywhere=True, top_k=5))).hits
    deploys = [h for h in found if "deploy" in h.memory.content.lower()]
    assert len(deploys) == 1
    places = {deploys[0].memory.id, *(m.id for m in deploys[0].also)}
    assert places == {said.id, note.memory.id}
    assert {m.conversation_id for m in (deploys[0].memory, *deploys[0].also)} == {first.id, second.id}


async def test_a_note_and_the_turn_it_repeats_are_one_hit_showing_the_longer(app: App) -> None:
    conversation = await app.conversations.start(new_conversation("standup"))
    (turn,), _ = await app.transcript.add_messages(
        conversation.id,
        parse_turns("messages", [{"role": "user", "content": "The staging proxy listens on port 8443 now"}]),
    )
    note = await app.memories.store(
        new_note("[3 March] Sam: The staging proxy listens on port 8443 now", conversation.id)
    )
    await backfill(app)
    found = (await app.recall.search(search_request("staging proxy port", conversation.id))).hits
    assert len(found) == 1
    assert found[0].memory.id == note.memory.id and [m.id for m in found[0].also] == [turn.id]


async def test_look_alikes_that_differ_in_one_number_or_name_stay_two_hits(app: App) -> None:
    conversation = await app.conversations.start(new_conversation("facts"))
    nine = await app.memories.store(new_note("The weekly standup starts at 9 in room Orion", conversation.id))
    ten = await app.memories.store(new_note("The weekly standup starts at 10 in room Orion", conversation.id))
    vega = await app.memories.store(new_note("The weekly standup starts at 9 in room Vega", conversation.id))
    await backfill(app)
    found = (await app.recall.search(search_request("weekly standup starts", conversation.id))).hits
    assert {h.memory.id for h in found} == {nine.memory.id, ten.memory.id, vega.memory.id}
    assert all(not h.also for h in found)


async def test_deleting_one_copy_of_a_folded_fact_deletes_that_copy_only(app: App) -> None:
    one = await app.conversations.start(new_conversation("one"))
    two = await app.conversations.start(new_conversation("two"))
    first = await app.memories.store(new_note("The VPN password rotates every 30 days", one.id))
    second = await app.memories.store(new_note("The VPN password rotates every 30 days", two.id))
    await backfill(app)
    await app.memories.delete(first.memory.id)
    found = (await app.recall.search(search_request("VPN password rotates", everywhere=True))).hits
    assert [(h.memory.id, h.also) for h in found] == [(second.memory.id, ())]


async def test_a_note_found_only_through_the_note_before_it_is_not_a_hit(app: App) -> None:
    conversation = await app.conversations.start(new_conversation("notes"))
    allergy = await app.memories.store(new_note("Dana has a peanut allergy", conversation.id))
    await app.memories.store(new_note("Budget for Q3 marketing is 40k", conversation.id))
    await app.memories.store(new_note("Use ruff for linting", conversation.id))
    await backfill(app)
    found = (await app.recall.search(search_request("peanut allergy", conversation.id, top_k=5))).hits
    assert [h.memory.id for h in found] == [allergy.memory.id]


async def test_a_turn_found_through_the_turn_before_it_quotes_that_turn(app: App) -> None:
    conversation = await app.conversations.start(new_conversation("trip"))
    added, _ = await app.transcript.add_messages(conversation.id, parse_turns("messages", [
        {"role": "user", "actor": "ann", "content": "Did you finally go to Paris in June?"},
        {"role": "user", "actor": "ben", "content": "Yes, we did! It was lovely."},
    ]))
    await backfill(app)
    found = (await app.recall.search(search_request("Paris June", conversation.id, top_k=5))).hits
    reply = next(h for h in found if h.memory.id == added[1].id)
    assert reply.via == "ann: Did you finally go to Paris in June?"
    assert next(h for h in found if h.memory.id == added[0].id).via is None


async def test_a_search_that_finds_nothing_says_what_it_searched(app: App) -> None:
    conversation = await app.conversations.start(new_conversation("trip"))
    await app.transcript.add_messages(
        conversation.id, parse_turns("messages", [{"role": "user", "content": "Book the Lisbon flight"}])
    )
    await app.memories.store(new_note("The hotel is in Alfama", conversation.id))
    await backfill(app)
    outcome = await app.recall.search(search_request("xylophone quartet", everywhere=True))
    assert outcome.hits == []
    assert outcome.notice == (
        "Memory holds nothing on this: searched 1 conversation (1 recorded turn, 1 note, 0 summaries, 0 facts)."
    )


def test_an_imported_chat_keeps_its_own_time_in_lists_and_forget_older_than(
    tmp_path: Path, db: Database, fake_ollama: FakeOllama
) -> None:
    _import(tmp_path, db, fake_ollama, chatgpt_conversation())
    settings = _settings(db, fake_ollama)

    async def today() -> str:
        async with open_app(settings, background=False) as app:
            conversation = await app.conversations.start(new_conversation("today"))
            await app.memories.store(new_note("a note of today", conversation.id))
            listed = await app.conversations.listed(conversation_query(None, 10))
            assert [c.name for c in listed] == ["today", "Lisbon trip"]  # by activity, the import's is 2023
            assert listed[1].last_activity == "2023-11-14T22:14:10.000000Z"
            return conversation.id

    kept = anyio.run(today)
    dry = run(db, fake_ollama, "forget", "--older-than", "90d", "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert "would delete 1 conversation(s) with 4 memories" in dry.stdout and "Lisbon trip" in dry.stdout
    assert "would delete 0 older memories" in dry.stdout
    assert rows(db, "SELECT count(*) FROM conversations")[0][0] == 2
    gone = run(db, fake_ollama, "forget", "--older-than", "90d")
    assert "deleted 1 conversation(s) with 4 memories" in gone.stdout
    assert [r[0] for r in rows(db, "SELECT id FROM conversations")] == [kept]


def test_a_deleted_imported_conversation_and_turn_stay_deleted_when_the_export_is_imported_again(
    tmp_path: Path, db: Database, fake_ollama: FakeOllama
) -> None:
    _import(tmp_path, db, fake_ollama, chatgpt_conversation("c-1", "Lisbon trip"),
            chatgpt_conversation("c-2", "Porto trip"))
    lisbon, porto = (rows(db, "SELECT id FROM conversations WHERE name = ?", name)[0][0]
                     for name in ("Lisbon trip", "Porto trip"))
    secret = rows(db, "SELECT id FROM memories WHERE conversation_id = ? AND content = ?",
                  porto, "And the hotel?")[0][0]

    async def delete() -> None:
        async with open_app(_settings(db, fake_ollama), background=False) as app:
            await app.conversations.delete(lisbon)
            await app.memories.delete(secret)

    anyio.run(delete)
    again = _import(tmp_path, db, fake_ollama, chatgpt_conversation("c-1", "Lisbon trip"),
                    chatgpt_conversation("c-2", "Porto trip"))
    assert "imported 0 new conversation(s) and 0 new turns" in again
    assert "(3 of 3 were already present)" in again
    assert "left out 1 conversation and 5 turns you deleted since an earlier import" in again
    assert rows(db, "SELECT count(*) FROM conversations WHERE id = ?", lisbon)[0][0] == 0
    assert rows(db, "SELECT count(*) FROM memories WHERE id = ?", secret)[0][0] == 0

    restored = _import(tmp_path, db, fake_ollama, chatgpt_conversation("c-1", "Lisbon trip"),
                       chatgpt_conversation("c-2", "Porto trip"), flags=("--restore-deleted",))
    assert "imported 1 new conversation(s) and 5 new turns" in restored
    assert "brought back 2 conversations and turns you had deleted" in restored
    assert rows(db, "SELECT count(*) FROM memories WHERE id = ?", secret)[0][0] == 1


def test_forget_conversation_deletes_an_ended_conversation_and_a_dry_run_says_what_would_go(
    tmp_path: Path, db: Database, fake_ollama: FakeOllama
) -> None:
    _import(tmp_path, db, fake_ollama, chatgpt_conversation())
    (conversation, status), = rows(db, "SELECT id, status FROM conversations")
    assert status == "completed"
    dry = run(db, fake_ollama, "forget", "--conversation", conversation, "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert "would delete 1 conversation(s) with 4 memories" in dry.stdout and conversation in dry.stdout
    assert rows(db, "SELECT count(*) FROM memories")[0][0] == 4
    done = run(db, fake_ollama, "forget", "--conversation", conversation)
    assert done.returncode == 0, done.stderr
    assert "deleted 1 conversation(s) with 4 memories" in done.stdout
    assert rows(db, "SELECT count(*) FROM conversations")[0][0] == 0


async def test_a_long_memory_found_by_a_words_stem_is_shown_by_the_passage_holding_it(settings: Settings) -> None:
    filler = " ".join(f"paragraph {i} talks about gardening, tomatoes and the weather." for i in range(600))
    async with connect(settings) as client:
        await call(client, "store_memory", content=f"{filler} In the end: our deployments happen on Fridays.")
        found = await call(client, "search_all_conversations", query="deployment", top_k=1)
    (hit,) = found["results"]
    assert hit["length"] > 30_000 and len(hit["content"]) < hit["length"]
    assert hit["content"].startswith("[…]") and "our deployments happen on Fridays." in hit["content"]


async def test_a_long_memory_found_by_meaning_alone_is_shown_by_its_passage_closest_in_meaning(
    settings: Settings, fake_ollama: FakeOllama
) -> None:
    fake_ollama.concepts.update({"car": "vehicle", "automobile": "vehicle"})
    before = " ".join(f"paragraph {i} talks about gardening, tomatoes and the weather." for i in range(300))
    after = " ".join(f"section {i} lists the rainfall of each month and the soil." for i in range(300))
    wanted = "Our automobile is blue."  # a passage of its own, longer than the answer shows of it
    async with connect(settings) as client:
        await call(client, "store_memory", content=" ".join([before, *[wanted] * 250, after]))
        found = await call(client, "search_all_conversations", query="car", top_k=1)
        starts = await call(client, "search_all_conversations", query="car", top_k=1, kind="message")
    (hit,) = found["results"]
    assert hit["length"] > 30_000 and len(hit["content"]) < hit["length"]
    assert "meaning" in hit["matched"] and "words" not in hit["matched"]
    assert hit["content"].startswith("[…]") and wanted in hit["content"] and "paragraph 0 " not in hit["content"]
    assert starts["results"] == []


async def test_a_long_memory_whose_one_vector_names_no_passage_shows_its_start(
    settings: Settings, fake_ollama: FakeOllama
) -> None:
    fake_ollama.concepts["climate"] = "weather"
    text = " ".join(f"paragraph {i} talks about gardening, tomatoes and the weather." for i in range(600))
    async with connect(settings) as client:  # one vector the caller gave for the whole text
        await call(client, "store_memory", content=text, embedding=fake_ollama.vector("nomic-embed-text", "weather"))
        found = await call(client, "search_all_conversations", query="climate", top_k=1)
    (hit,) = found["results"]
    assert hit["content"].startswith("paragraph 0 talks") and hit["content"].endswith("[…]")


async def test_build_context_recalls_an_earlier_chats_turn_and_not_the_turns_it_already_holds(app: App) -> None:
    earlier = await app.conversations.start(new_conversation("monday"))
    (said,), _ = await app.transcript.add_messages(
        earlier.id,
        parse_turns("messages", [{"role": "user", "content": "The staging database password rotates on Mondays"}]),
    )
    await app.conversations.end(earlier.id)
    now = await app.conversations.start(new_conversation("tuesday"))
    recent, _ = await app.transcript.add_messages(
        now.id,
        parse_turns(
            "messages",
            [
                {"role": "user", "content": "When does the staging database password rotate?"},
            ],
        ),
    )
    await backfill(app)
    built = await app.context.build(
        context_request(now.id, 2000, 10, query="staging database password rotate", recall_everywhere=True)
    )
    assert [m.id for m in built.recalled] == [said.id]
    assert [m.id for m in built.recent] == [recent[0].id]


async def test_recent_turns_ranked_best_leave_recall_k_slots_to_other_memories(app: App) -> None:
    earlier = await app.conversations.start(new_conversation("monday"))
    (said,), _ = await app.transcript.add_messages(
        earlier.id, parse_turns("messages", [{"role": "user", "content": "The staging password rotates on Mondays"}])
    )
    await app.conversations.end(earlier.id)
    now = await app.conversations.start(new_conversation("tuesday"))
    asked = [f"Staging password rotation question {i}: when does the staging password rotate?" for i in range(4)]
    await app.transcript.add_messages(now.id, parse_turns("messages", [{"role": "user", "content": t} for t in asked]))
    await backfill(app)
    built = await app.context.build(context_request(now.id, 4000, 10, 1, query="staging password rotate"))
    assert len(built.recent) == 4 and [m.id for m in built.recalled] == [said.id]


@pytest.mark.slow
async def test_ten_thousand_look_alike_notes_stay_apart_and_a_repeated_fact_lists_a_few_places(
    settings: Settings,
) -> None:
    async with open_app(settings, background=False) as app:
        lookalikes = await app.conversations.start(new_conversation("builds"))
        await app.memories.import_notes(
            notes_to_import(
                lookalikes.id, [f"The release build number is {n} for the ferret project" for n in range(10_000)]
            )
        )
        for day in range(12):
            chat = await app.conversations.start(new_conversation(f"chat {day}"))
            said = [{"role": "user", "content": "Our wifi password is on the fridge"}]
            await app.transcript.add_messages(chat.id, parse_turns("messages", said))
        await backfill(app)
    async with connect(settings) as client:
        builds = await call(client, "search_all_conversations", query="ferret release build number", top_k=10)
        wifi = await call(client, "search_all_conversations", query="wifi password fridge", top_k=3)
    shown = [r["content"] for r in builds["results"]]
    assert len(shown) == 10 and len(set(shown)) == 10 and all("ferret project" in c for c in shown)
    assert all(r.get("also_in") is None for r in builds["results"])
    assert len(json.dumps(builds)) < 8_000
    (fridge,) = [r for r in wifi["results"] if "fridge" in r["content"]]
    assert len(fridge["also_in"]) == 5 and fridge["also_more"] == 6


async def test_rest_recall_finds_an_imported_turn_by_default_and_narrows_by_kind(
    tmp_path: Path, db: Database, fake_ollama: FakeOllama
) -> None:
    await anyio.to_thread.run_sync(lambda: _import(tmp_path, db, fake_ollama, chatgpt_conversation()))
    settings = _settings(db, fake_ollama)
    async with open_app(settings, background=False) as app:
        chat = await app.conversations.start(new_conversation("today"))
    async with serving(settings) as url, httpx2.AsyncClient(timeout=30) as http:
        base = url.removesuffix("/mcp") + PREFIX + f"/conversations/{chat.id}/recall"
        found = (await http.post(base, json={"query": "Alfama hotel nights", "scope": "all"})).json()
        notes = (await http.post(base, json={"query": "Alfama hotel nights", "scope": "all", "kinds": ["note"]})).json()
    assert found["hits"][0]["content"] == "The Alfama hotel, three nights." and found["hits"][0]["kind"] == "message"
    assert notes["hits"] == [] and notes["notice"].startswith("Memory holds nothing on this")


async def test_a_text_holding_a_fact_among_much_else_is_not_folded_into_it(app: App) -> None:
    conversation = await app.conversations.start(new_conversation("notes"))
    short = await app.memories.store(new_note("The backup job runs at 2 am nightly", conversation.id))
    long = await app.memories.store(
        new_note(
            "Ops notes for the quarter: the backup job runs at 2 am nightly, the database moved to the new cluster"
            " in March, and the on-call rota changes every second Monday",
            conversation.id,
        )
    )
    await backfill(app)
    found = (await app.recall.search(search_request("backup job nightly", conversation.id))).hits
    assert {h.memory.id for h in found} == {short.memory.id, long.memory.id}
    assert all(not h.also for h in found)


async def test_the_agents_record_of_its_own_searches_is_not_recalled(
    settings: Settings, fake_ollama: FakeOllama
) -> None:
    fake_ollama.enqueue_chat(_tool_call("search_all_conversations", query="vault code"), "It is 1234.")
    async with connect(settings) as client:
        note = await call(client, "store_memory", content="The vault code is 1234")
        await call(client, "ask_agent", query="what is the vault code?")
        found = await call(client, "search_all_conversations", query="vault code 1234", top_k=10)
    assert found["results"][0]["memory_id"] == note["memory_id"]
    assert [r for r in found["results"] if "<memory" in r["content"]] == []  # the wrapped copy of the note


async def test_a_tag_filtered_search_that_finds_nothing_offers_the_listing_of_those_tags(app: App) -> None:
    conversation = await app.conversations.start(new_conversation("decisions"))
    await app.memories.store(new_note("We picked PostgreSQL", conversation.id, ["decision"]))
    await backfill(app)
    outcome = await app.recall.search(search_request("xylophone", everywhere=True, tags=["decision"]))
    assert outcome.hits == [] and outcome.notice == (
        "Memory holds nothing on this: searched 1 conversation (0 recorded turns, 1 note, 0 summaries, 0 facts)."
        ' Query "*" lists every memory that carries these tags, newest first.'
    )
    listed = await app.recall.search(search_request("*", everywhere=True, tags=["decision"]))
    assert [h.memory.content for h in listed.hits] == ["We picked PostgreSQL"]

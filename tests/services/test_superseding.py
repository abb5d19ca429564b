"""Memory that stays true (#82): a changed fact supersedes the old one without a chat model, by
the time each statement is about; the old one stays, marked, and a question about the past finds
it; look-alikes, paraphrases, values that can both hold and other people's values are no change;
every supersession is in the audit and can be undone or confirmed. Through MCP and the CLI, on
both backends, with the fake Ollama (no chat model)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from mcp import Client

from ollama_mcp.app import open_app
from ollama_mcp.config import Settings
from ollama_mcp.inputs.context import context_request
from ollama_mcp.inputs.conversations import new_conversation
from ollama_mcp.inputs.memories import note, notes_to_import
from ollama_mcp.inputs.search import search_request
from ollama_mcp.rest.models import PREFIX
from tests.conftest import Database, connect, eventually
from tests.support.chats import chatgpt_conversation
from tests.support.cli import run
from tests.support.fake_ollama import FakeOllama
from tests.support.http import serving
from tests.support.mcp_client import call

pytestmark = pytest.mark.anyio


async def _note(client: Client, text: str, at: str) -> str:
    stored = await call(client, "store_memory", content=text, occurred_at=at)
    return str(stored["memory_id"])


async def _search(client: Client, query: str, top_k: int = 10, **more: Any) -> list[dict[str, Any]]:
    found = await call(client, "search_all_conversations", query=query, top_k=top_k, **more)
    return list(found["results"])


def _by_text(results: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {r["content"]: r for r in results}


async def test_a_move_puts_the_new_city_first_and_marks_the_old_statement_with_it(
    settings: Settings,
) -> None:
    async with connect(settings) as client:
        berlin = await _note(client, "Maren lives in Berlin.", "2024-01-10T09:00:00Z")
        lisbon = await _note(client, "Maren moved to Lisbon.", "2025-03-02T09:00:00Z")
        results = await _search(client, "Where does Maren live?")
        assert [r["memory_id"] for r in results[:2]] == [lisbon, berlin]
        old = results[1]
        assert old["superseded_by"] == lisbon
        assert "residence" in old["superseded_because"] and "'lisbon'" in old["superseded_because"]
        assert old["current"] == {"memory_id": lisbon, "content": "Maren moved to Lisbon.",
                                  "occurred_at": "2025-03-02T09:00:00.000000Z"}
        assert "superseded_by" not in results[0] or results[0]["superseded_by"] is None


async def test_an_old_chat_recorded_today_never_supersedes_a_newer_fact(settings: Settings) -> None:
    async with connect(settings) as client:
        lisbon = await _note(client, "Maren moved to Lisbon.", "2025-03-02T09:00:00Z")
        conversation = await call(client, "init_conversation", name="an old chat")
        added = await call(client, "add_messages", conversation_id=conversation["conversation_id"], messages=[
            {"role": "user", "content": "Maren lives in Berlin.", "occurred_at": "2023-05-01T10:00:00Z"}])
        berlin = added["message_ids"][0] if "message_ids" in added else None
        results = _by_text(await _search(client, "Where does Maren live?"))
        assert results["Maren lives in Berlin."]["superseded_by"] == lisbon
        assert results["Maren moved to Lisbon."].get("superseded_by") is None
        assert berlin is None or results["Maren lives in Berlin."]["memory_id"] == berlin


@pytest.mark.parametrize(("first", "second"), [
    ("Maren moved to Lisbon.", "Maren still loves living in Lisbon."),  # the same value in other words
    ("Maren works at Fernwood Labs.", "Maren also works at Quillon Games on weekends."),  # both can hold
    ("Bob moved to Paris.", "Carol moved to Paris."),  # another subject's value
    ("Bob lives in Rome.", "Carol moved to Paris."),
    ("Maren was born in Lisbon.", "Maren moved to Porto."),  # a look-alike that never changes
    ("Maren lives in Berlin.", "We might move Maren's team to Porto next year."),  # a plan states nothing
])
async def test_statements_that_are_no_change_are_never_marked(settings: Settings, first: str, second: str) -> None:
    async with connect(settings) as client:
        await _note(client, first, "2024-01-10T09:00:00Z")
        await _note(client, second, "2025-03-02T09:00:00Z")
        for query in (first, second, "Maren Bob Carol"):
            assert not [r for r in await _search(client, query) if r.get("superseded_by")]


async def test_a_stable_fact_is_asked_first_and_unmarked_beside_a_changing_look_alike(settings: Settings) -> None:
    async with connect(settings) as client:
        born = await _note(client, "Maren grew up in Seville, where the family still lives.", "2024-01-10T09:00:00Z")
        await _note(client, "Maren lives in Oslo.", "2024-06-10T09:00:00Z")
        await _note(client, "Maren moved to Bergen.", "2025-06-10T09:00:00Z")
        first = (await _search(client, "Where was Maren born?"))[0]
        assert first["memory_id"] == born and first.get("superseded_by") is None


async def test_a_negation_ends_a_value_without_a_successor(settings: Settings) -> None:
    async with connect(settings) as client:
        mysql = await _note(client, "Our team uses MySQL for billing.", "2024-01-10T09:00:00Z")
        ended = await _note(client, "We no longer use MySQL.", "2025-01-10T09:00:00Z")
        results = _by_text(await _search(client, "MySQL database"))
        assert results["Our team uses MySQL for billing."]["superseded_by"] == ended
        assert "ended" in results["Our team uses MySQL for billing."]["superseded_because"]
        assert results["We no longer use MySQL."].get("superseded_by") is None
        assert mysql in {r["memory_id"] for r in results.values()}


async def test_a_correction_supersedes_the_value_it_names(settings: Settings) -> None:
    async with connect(settings) as client:
        await _note(client, "Our standup is on Monday.", "2024-01-10T09:00:00Z")
        fixed = await _note(client, "Correction: our standup is on Tuesday, not Monday.", "2024-01-11T09:00:00Z")
        results = await _search(client, "what day is our standup")
        assert results[0]["memory_id"] == fixed
        assert _by_text(results)["Our standup is on Monday."]["superseded_by"] == fixed


async def test_a_question_about_the_past_finds_the_value_before_and_top_k_keeps_rank_1(
    settings: Settings,
) -> None:
    async with connect(settings) as client:
        berlin = await _note(client, "Maren lives in Berlin.", "2023-01-10T09:00:00Z")
        porto = await _note(client, "Maren moved to Porto.", "2024-01-10T09:00:00Z")
        lisbon = await _note(client, "Maren moved to Lisbon.", "2025-01-10T09:00:00Z")
        for i in range(12):
            await _note(client, f"Maren said something unrelated number {i} about lunch.", "2024-06-01T09:00:00Z")
        before = await _search(client, "Where did Maren live before Lisbon?", top_k=3)
        assert porto in [r["memory_id"] for r in before[:2]]
        firsts = {(await _search(client, "Where does Maren live?", top_k=k))[0]["memory_id"] for k in (1, 2, 5, 20)}
        assert firsts == {lisbon}
        history = _by_text(await _search(client, "Maren live", include_superseded=True, top_k=20))
        assert history["Maren lives in Berlin."]["superseded_by"] == porto
        assert history["Maren lives in Berlin."]["current"]["memory_id"] == lisbon
        assert history["Maren moved to Porto."]["superseded_by"] == lisbon
        assert berlin in {r["memory_id"] for r in history.values()}


async def test_a_memory_deleted_from_the_middle_of_a_chain_mends_it_and_nothing_resurrects(
    settings: Settings,
) -> None:
    async with connect(settings) as client:
        await _note(client, "Maren lives in Berlin.", "2023-01-10T09:00:00Z")
        porto = await _note(client, "Maren moved to Porto.", "2024-01-10T09:00:00Z")
        lisbon = await _note(client, "Maren moved to Lisbon.", "2025-01-10T09:00:00Z")
        await call(client, "delete_memory", memory_id=porto)
        results = await _search(client, "Where does Maren live?")
        assert results[0]["memory_id"] == lisbon
        assert _by_text(results)["Maren lives in Berlin."]["superseded_by"] == lisbon
        assert porto not in {r["memory_id"] for r in results}


async def test_two_values_at_the_same_moment_are_both_kept_and_listed_as_a_conflict(
    settings: Settings, db: Database, fake_ollama: FakeOllama,
) -> None:
    async with connect(settings) as first, connect(settings) as second:
        ids: list[str] = []

        async def store(client: Client, text: str) -> None:
            ids.append(await _note(client, text, "2025-05-05T12:00:00Z"))

        async with anyio.create_task_group() as tasks:  # two clients storing conflicting values at once
            tasks.start_soon(store, first, "Maren lives in Oslo.")
            tasks.start_soon(store, second, "Maren lives in Bergen.")
        assert len(set(ids)) == 2
        results = await _search(first, "Where does Maren live?")
        assert {r["content"] for r in results[:2]} == {"Maren lives in Oslo.", "Maren lives in Bergen."}
        marked = [r for r in results if r.get("superseded_by")]
        assert len(marked) == 1 and "conflict to review" in marked[0]["superseded_because"]
    listed = run(db, fake_ollama, "conflicts")
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.startswith("to review: 1\n")
    assert "Maren lives in Oslo." in listed.stdout and "Maren lives in Bergen." in listed.stdout


async def test_undo_from_the_terminal_keeps_the_older_statement_and_the_audit_names_each_door(
    settings: Settings, db: Database, fake_ollama: FakeOllama,
) -> None:
    async with connect(settings) as client:
        older = await _note(client, "Maren works at Fernwood Labs.", "2024-01-10T09:00:00Z")
        newer = await _note(client, "Maren got a Quillon Games badge today.", "2025-01-10T09:00:00Z")
        assert _by_text(await _search(client, "Maren works"))["Maren works at Fernwood Labs."]["superseded_by"] == newer
        refused = run(db, fake_ollama, "conflicts", "--undo", newer, older)
        assert refused.returncode != 0 and "does not supersede" in refused.stderr
        undone = run(db, fake_ollama, "conflicts", "--undo", older, newer)
        assert undone.returncode == 0, undone.stderr
        assert undone.stdout.startswith("undone: maren's work is 'quillon games'")
        assert not [r for r in await _search(client, "Maren works") if r.get("superseded_by")]
    audit = run(db, fake_ollama, "audit").stdout
    assert [line.split()[1:3] for line in audit.splitlines() if "supersede" in line or "supersession" in line] == [
        ["cli", "undo_supersession"], ["background", "supersede"]]


async def test_ten_thousand_versions_of_one_attribute_answer_with_the_newest(settings: Settings) -> None:
    async with open_app(settings, background=False) as app:
        conversation = await app.conversations.start(new_conversation("standups"))
        texts = [f"Maren's standup is on {day}." for day in ("Monday", "Tuesday", "Wednesday", "Thursday") * 2500]
        added = await app.memories.import_notes(notes_to_import(conversation.id, texts, None))
        assert added == 4  # the same note twice in one conversation is stored once
        newest = f"Maren's standup is on Friday now, {len(texts)} versions later."
        for i in range(10_000 // 500):
            batch = [f"Maren's standup moved to {day} in round {i}-{j}." for j, day in
                     enumerate(("Monday", "Tuesday", "Wednesday", "Thursday") * 125)]
            await app.memories.import_notes(notes_to_import(conversation.id, batch, None))
        await app.memories.import_notes(notes_to_import(conversation.id, [newest], None))
        # Every Monday version is superseded; the newest statement takes the first one's place.
        found = await app.recall.search(search_request("Maren standup Monday", None, 10, everywhere=True))
        assert found.hits[0].memory.content == newest
        assert len(found.hits) == 10
        assert {h.superseded.current.content for h in found.hits[1:] if h.superseded} == {newest}
        assert all(h.superseded is not None for h in found.hits[1:])


async def test_a_store_from_before_reads_what_its_memories_state_in_the_background(
    settings: Settings, db: Database,
) -> None:
    async with connect(settings) as client:
        await _note(client, "Maren lives in Berlin.", "2024-01-10T09:00:00Z")
        lisbon = await _note(client, "Maren moved to Lisbon.", "2025-03-02T09:00:00Z")
    db.rows("UPDATE memories SET claims = NULL")  # as a store made before claims were kept
    assert db.count("SELECT count(*) FROM memory_claims") == 0
    async with open_app(settings) as app:
        async def marked() -> bool:
            found = await app.recall.search(search_request("Where does Maren live?", None, 5, everywhere=True))
            return [h.memory.id for h in found.hits][:1] == [lisbon] and any(h.superseded for h in found.hits)

        await eventually(marked)
    assert db.count("SELECT count(*) FROM memories WHERE claims IS NULL") == 0


async def test_rest_recall_marks_the_stale_statement_and_build_context_leaves_it_out(settings: Settings) -> None:
    async with open_app(settings, background=False) as app:
        await app.memories.store(note("Our team uses MySQL for billing.", occurred_at="2024-01-10T09:00:00Z"))
        switched = await app.memories.store(
            note("We migrated our database to PostgreSQL.", occurred_at="2025-01-10T09:00:00Z"))
        chat = await app.conversations.start(new_conversation("today"))
        built = await app.context.build(context_request(chat.id, 2000, 10, 5, query="which database does our team use"))
        recalled = [m.content for m in built.recalled]
        assert "We migrated our database to PostgreSQL." in recalled
        assert "Our team uses MySQL for billing." not in recalled
    async with serving(settings) as url, httpx2.AsyncClient(timeout=30) as http:
        base = url.removesuffix("/mcp") + PREFIX + f"/conversations/{chat.id}/recall"
        found = (await http.post(base, json={"query": "database MySQL PostgreSQL", "scope": "all", "k": 5})).json()
    hits = {h["content"]: h for h in found["hits"]}
    assert found["hits"][0]["memory_id"] == switched.memory.id
    stale = hits["Our team uses MySQL for billing."]
    assert stale["superseded_by"] == switched.memory.id == stale["current_memory_id"]
    assert "database" in stale["superseded_because"]


async def test_the_markdown_export_shows_each_superseded_statement_with_its_successor_and_time(
    settings: Settings, db: Database, fake_ollama: FakeOllama,
) -> None:
    async with connect(settings) as client:
        await _note(client, "Maren lives in Berlin.", "2024-01-10T09:00:00Z")
        lisbon = await _note(client, "Maren moved to Lisbon.", "2025-03-02T09:00:00Z")
        page = await call(client, "export_conversation", conversation_id=(await call(
            client, "list_conversations"))["conversations"][0]["conversation_id"], format="markdown")
    exported = run(db, fake_ollama, "export", "--format", "markdown")
    assert exported.returncode == 0, exported.stderr
    for text in (exported.stdout, page["markdown"]):
        line = next(x for x in text.splitlines() if "Maren lives in Berlin." in x)
        assert f"superseded on 2025-03-02 09:00 by `{lisbon}`: maren's residence is 'lisbon'" in line, line
        assert "superseded" not in next(x for x in text.splitlines() if "Maren moved to Lisbon." in x)


async def test_an_old_chat_imported_after_a_newer_fact_never_supersedes_it(
    tmp_path: Path, settings: Settings, db: Database, fake_ollama: FakeOllama,
) -> None:
    async with connect(settings) as client:
        lisbon = await _note(client, "Maren moved to Lisbon.", "2025-06-01T09:00:00Z")
    chat = chatgpt_conversation()
    chat["mapping"]["q2"]["message"]["content"]["parts"] = ["By the way, Maren lives in Berlin."]  # said in 2023
    export = tmp_path / "conversations.json"
    export.write_text(json.dumps([chat]))
    imported = run(db, fake_ollama, "import", str(export))
    assert imported.returncode == 0, imported.stderr
    async with connect(settings) as client:
        results = await _search(client, "Where does Maren live?")
        assert results[0]["memory_id"] == lisbon and results[0].get("superseded_by") is None
        old = _by_text(results)["By the way, Maren lives in Berlin."]
        assert old["kind"] == "message" and old["superseded_by"] == lisbon


@pytest.mark.parametrize(("before", "after", "question", "current"), [
    ("I live in Berlin.", "We moved to Lisbon.", "Where do I live?", "We moved to Lisbon."),
    ("Our database is MySQL.", "We migrated to PostgreSQL.", "Which database do we use?", "We migrated to PostgreSQL."),
    ("Standup is Monday.", "Actually it's Tuesday now.", "What day is standup?", "Actually it's Tuesday now."),
])
async def test_the_users_own_changes_told_in_the_first_person_supersede_the_old_note(
    settings: Settings, before: str, after: str, question: str, current: str,
) -> None:
    async with connect(settings) as client:
        await _note(client, "Remind me to water the plants on Friday.", "2024-01-01T09:00:00Z")
        old = await _note(client, before, "2024-01-10T09:00:00Z")
        new = await _note(client, after, "2025-01-10T09:00:00Z")
        results = await _search(client, question)
        assert results[0]["content"] == current
        assert _by_text(results)[before]["superseded_by"] == new
        assert old != new


async def test_an_end_told_with_a_contraction_or_a_layoff_leaves_the_attribute_with_no_value(
    settings: Settings,
) -> None:
    async with connect(settings) as client:
        await _note(client, "Maren lives in Oslo.", "2024-01-10T09:00:00Z")
        moved_out = await _note(client, "Maren doesn't live in Oslo anymore.", "2025-01-10T09:00:00Z")
        await _note(client, "Maren works at Halcyon Freight.", "2024-01-10T09:00:00Z")
        laid_off = await _note(client, "Maren was laid off from Halcyon Freight.", "2025-02-10T09:00:00Z")
        born = await _note(client, "Maren is originally from Porto.", "2023-01-10T09:00:00Z")
        results = _by_text(await _search(client, "Maren Oslo Halcyon Freight"))
        assert results["Maren lives in Oslo."]["superseded_by"] == moved_out
        assert results["Maren works at Halcyon Freight."]["superseded_by"] == laid_off
        first = (await _search(client, "Where is Maren from?"))[0]
        assert first["memory_id"] == born and first.get("superseded_by") is None

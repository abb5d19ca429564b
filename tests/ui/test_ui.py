"""The browser view through an HTTP client, on each backend: every route, the session token, the
Host/Origin/CSRF checks, and what a write changes in the store (asserted in the database and by
the service's own search, the one the assistant uses)."""

from __future__ import annotations

import io
import json
import re
import socket
import zipfile
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest

from ollama_mcp.app import App, open_app
from ollama_mcp.cli import admin
from ollama_mcp.config import Settings
from ollama_mcp.domain import SearchRequest
from ollama_mcp.inputs.conversations import new_conversation
from ollama_mcp.inputs.memories import note as new_note
from ollama_mcp.inputs.memories import note_change
from ollama_mcp.inputs.turns import parse_turns
from ollama_mcp.ui.guard import MAX_BODY_BYTES
from ollama_mcp.ui.run import bind
from tests.conftest import Database
from tests.support.chats import chatgpt_conversation
from tests.support.fake_ollama import FakeOllama
from tests.support.http import VIEW_TOKEN, client, serving
from tests.support.mcp_client import call
from tests.support.view import BASE, csrf_of, store_of, view

pytestmark = pytest.mark.anyio


async def post(client: httpx.AsyncClient, path: str, form: dict[str, Any], page: str = "/import") -> httpx.Response:
    """A form submitted from one of the view's pages, as a browser does: same Origin, its CSRF token."""
    token = csrf_of(await client.get(page))
    return await client.post(path, data={"csrf": token, **form}, headers={"origin": BASE})


async def search_ids(app: App, query: str) -> list[str]:
    outcome = await app.recall.search(SearchRequest(query=query, top_k=10, everywhere=True))
    return [hit.memory.id for hit in outcome.hits]


async def test_the_printed_link_sets_a_session_cookie_and_the_pages_then_need_nothing_else(app: App) -> None:
    await app.conversations.start(new_conversation("Trip planning"))
    async with view(app) as client:
        page = await client.get("/")
        assert page.status_code == 200 and "Trip planning" in page.text
        assert page.headers["x-frame-options"] == "DENY" and page.headers["referrer-policy"] == "same-origin"
        assert "default-src 'none'" in page.headers["content-security-policy"]
        assert page.headers["cache-control"] == "no-store"


@pytest.mark.parametrize("path", ["/", "/search?q=seats", "/health", "/export?format=json", "/import"])
async def test_without_the_token_or_with_a_wrong_one_every_page_is_refused(app: App, path: str) -> None:
    await app.memories.store(new_note("Sam prefers aisle seats"))
    async with view(app, enter=False) as client:
        bare = await client.get(path)
        guessed = await client.get(path.split("?")[0] + "?token=wrong")
        client.cookies.set("ollama_mcp_ui", "not-the-token")
        wrong = await client.get(path)
    for refused in (bare, wrong, guessed):
        assert refused.status_code == 403
        assert "aisle" not in refused.text and "link that `ollama-mcp ui` printed" in refused.text


async def test_writes_without_the_token_change_nothing(app: App, db: Database) -> None:
    stored = await app.memories.store(new_note("Sam prefers aisle seats"))
    async with view(app, enter=False) as client:
        for path in (f"/memories/{stored.memory.id}/delete", f"/conversations/{stored.memory.conversation_id}/delete"):
            refused = await client.post(path, data={"csrf": "x"}, headers={"origin": BASE})
            assert refused.status_code == 403
    assert db.count("SELECT count(*) FROM memories") == 1


async def test_a_request_for_another_host_name_is_refused_against_dns_rebinding(app: App) -> None:
    async with view(app) as client:
        rebound = await client.get("/", headers={"host": "attacker.example:8766"})
        assert rebound.status_code == 403 and "DNS rebinding" in rebound.text
        assert (await client.get("/", headers={"host": "localhost:8766"})).status_code == 200


async def test_a_cross_site_post_is_refused_and_changes_nothing(app: App, db: Database) -> None:
    stored = await app.memories.store(new_note("Sam prefers aisle seats"))
    path = f"/memories/{stored.memory.id}/delete"
    async with view(app) as client:
        token = csrf_of(await client.get(path))
        other_site = await client.post(path, data={"csrf": token}, headers={"origin": "http://attacker.example"})
        no_origin = await client.post(path, data={"csrf": token})
        no_csrf = await client.post(path, data={}, headers={"origin": BASE})
        stale_csrf = await client.post(path, data={"csrf": "0" * 64}, headers={"origin": BASE})
    assert [r.status_code for r in (other_site, no_origin, no_csrf, stale_csrf)] == [403, 403, 403, 403]
    assert "cross-site" in other_site.text and "cross-site" in no_origin.text
    assert "out of date or came from another site" in no_csrf.text
    assert db.count("SELECT count(*) FROM memories WHERE id = ?", stored.memory.id) == 1


async def test_the_conversation_list_filters_by_status_and_name(app: App) -> None:
    trip = await app.conversations.start(new_conversation("Trip planning"))
    await app.memories.store(new_note("Sam prefers aisle seats"))
    garden = await app.conversations.start(new_conversation("Garden"))
    await app.conversations.end(garden.id, "Watering every second day")
    async with view(app) as client:
        everything = (await client.get("/")).text
        active = (await client.get("/?status=active")).text
        named = (await client.get("/?q=gard")).text
        bad = await client.get("/?status=archived")
    assert trip.id in everything and garden.id in everything
    assert trip.id in active and garden.id not in active
    assert garden.id in named and trip.id not in named
    assert bad.status_code == 400 and "status" in bad.text


async def test_conversations_the_server_started_are_listed_and_headed_by_their_first_memory(app: App) -> None:
    first = await app.memories.store(new_note("Renew the TLS certificate before the 14th"))  # no init: the server's own
    await app.conversations.end(first.memory.conversation_id)
    second = await app.memories.store(new_note("Book the dentist for Tuesday"))
    async with view(app) as client:
        listed = (await client.get("/")).text
        page = (await client.get(f"/conversations/{second.memory.conversation_id}")).text
    names = re.findall(r'<a href="[^"]*/conversations/[^"]+">([^<]*)</a>', listed)
    assert names == ["Book the dentist for Tuesday", "Renew the TLS certificate before the 14th"]
    assert "<h1>Book the dentist for Tuesday " in page


async def test_a_conversation_page_shows_summary_memories_with_history_tags_state_and_transcript(
    app: App, fake_ollama: FakeOllama
) -> None:
    conversation = await app.conversations.start(new_conversation("Trip planning"))
    first = await app.memories.store(new_note("Sam prefers window seats", tags=["travel"]))
    await app.memories.update(note_change(first.memory.id, "Sam prefers aisle seats"))
    await app.transcript.add_message(conversation.id, "user", "Where are we staying in Lisbon?", actor="sam")
    fake_ollama.stop()
    await app.memories.store(new_note("The hotel in Lisbon is booked"))  # stored while Ollama is down: pending
    async with view(app) as client:
        page = await client.get(f"/conversations/{conversation.id}")
    text = page.text
    assert page.status_code == 200
    assert text.index("The hotel in Lisbon is booked") < text.index("Sam prefers aisle seats")  # newest first
    assert "<del>Sam prefers window seats</del>" in text and "1 earlier version" in text
    assert '<span class="tag">travel</span>' in text
    assert text.count("embedding pending") == 1 and "embedded</span>" in text
    assert "Where are we staying in Lisbon?" in text and "user · sam" in text
    assert "· 2 memories · 1 messages" in text  # the current notes, not the replaced version


async def test_memory_text_is_shown_as_text_never_as_markup(app: App) -> None:
    await app.conversations.start(new_conversation("<b>bold</b> name"))
    await app.memories.store(new_note('<script>alert("x")</script> and <img src=x onerror=alert(1)>'))
    async with view(app) as client:
        listed = (await client.get("/")).text
        found = (await client.get("/search?q=script+alert")).text
    assert "<b>bold</b>" not in listed and "&lt;b&gt;bold&lt;/b&gt;" in listed
    assert "<script>alert" not in found and "&lt;script&gt;alert" in found and "<img src=x" not in found


async def test_an_unknown_conversation_or_memory_is_a_404_naming_it(app: App) -> None:
    async with view(app) as client:
        missing = await client.get("/conversations/00000000-0000-0000-0000-000000000000")
        gone = await client.get("/memories/00000000-0000-0000-0000-000000000000/delete")
    assert missing.status_code == 404 and "00000000-0000-0000-0000-000000000000" in missing.text
    assert gone.status_code == 404 and "Nothing was changed" in gone.text


async def test_search_shows_mode_and_why_each_hit_matched_with_the_tools_filters(app: App) -> None:
    await app.conversations.start(new_conversation("Trip planning"))
    await app.memories.store(new_note("Sam prefers aisle seats on long flights", tags=["travel"]))
    await app.memories.store(new_note("The hotel in Lisbon is booked", tags=["hotel"]))
    async with view(app) as client:
        found = (await client.get("/search?q=aisle+seats")).text
        tagged = (await client.get("/search?q=Lisbon+seats&tags=hotel")).text
        bad = await client.get("/search?q=seats&since=yesterday-ish")
        today = datetime.now(UTC).date().isoformat()
        through_today = (await client.get(f"/search?q=aisle&since={today}&until={today}")).text
        before_today = (await client.get(f"/search?q=aisle&until={datetime.now(UTC).date() - timedelta(days=1)}")).text
    assert "hybrid search" in found and "keywords: aisle, seats" in found and "similarity" in found
    assert re.findall(r'<span class="why">(.*?)</span>', found)[0].startswith("matched by exact, words")
    assert re.findall(r'<p class="content">(.*?)</p>', found)[0] == "Sam prefers aisle seats on long flights"
    assert "hotel in Lisbon" in tagged and "aisle seats" not in tagged
    assert bad.status_code == 400 and "since" in bad.text
    assert "Sam prefers aisle seats" in through_today and "Sam prefers aisle seats" not in before_today


async def test_search_while_ollama_is_down_finds_by_keywords_and_says_so(app: App, fake_ollama: FakeOllama) -> None:
    await app.memories.store(new_note("Sam prefers aisle seats on long flights"))
    fake_ollama.stop()
    async with view(app) as client:
        found = (await client.get("/search?q=aisle")).text
    assert "keyword search" in found and "Sam prefers aisle seats" in found
    assert 'class="notice"' in found and "Ollama" in found


async def test_editing_a_memory_saves_a_new_version_that_the_next_search_finds(app: App, db: Database) -> None:
    conversation = await app.conversations.start(new_conversation("Trip planning"))
    stored = await app.memories.store(new_note("Sam prefers window seats", tags=["travel"]))
    async with view(app) as client:
        saved = await post(
            client,
            f"/memories/{stored.memory.id}/update",
            {"content": "Sam prefers aisle seats", "tags": "travel, sam"},
            f"/conversations/{conversation.id}",
        )
        assert saved.status_code == 303 and saved.headers["location"].startswith(
            f"/conversations/{conversation.id}?done=updated"
        )
        page = (await client.get(saved.headers["location"])).text
    assert "Saved as a new version" in page and "<del>Sam prefers window seats</del>" in page
    current = db.rows("SELECT id, content FROM memories WHERE superseded_by IS NULL AND kind = 'note'")
    assert [row[1] for row in current] == ["Sam prefers aisle seats"]
    assert sorted(db.tags()) == ["sam", "travel", "travel"]  # the old version keeps its tags
    assert await search_ids(app, "aisle seats") == [current[0][0]]
    assert db.rows("SELECT door, action FROM write_audit ORDER BY at DESC LIMIT 1") == [("ui", "update_memory")]


async def test_saving_an_unchanged_or_empty_memory_changes_nothing(app: App, db: Database) -> None:
    stored = await app.memories.store(new_note("Sam prefers window seats", tags=["travel"]))
    path = f"/memories/{stored.memory.id}/update"
    async with view(app) as client:
        same = await post(client, path, {"content": "Sam prefers window seats", "tags": "travel"})
        empty = await post(client, path, {"content": "   ", "tags": ""})
    assert same.status_code == 303 and "done=unchanged" in same.headers["location"]
    assert empty.status_code == 400 and "content" in empty.text
    assert db.count("SELECT count(*) FROM memories") == 1


async def test_deleting_a_memory_asks_first_and_then_the_search_no_longer_finds_it(app: App, db: Database) -> None:
    stored = await app.memories.store(new_note("The door code is 4711"))
    path = f"/memories/{stored.memory.id}/delete"
    async with view(app) as client:
        asked = await client.get(path)
        assert (
            asked.status_code == 200 and "Delete this memory?" in asked.text and "The door code is 4711" in asked.text
        )
        assert db.count("SELECT count(*) FROM memories") == 1  # asking deletes nothing
        deleted = await post(client, path, {}, path)
    assert deleted.status_code == 303 and "done=memory-deleted" in deleted.headers["location"]
    assert db.count("SELECT count(*) FROM memories") == 0
    assert await search_ids(app, "door code") == []


async def test_the_delete_page_of_a_revised_memory_says_every_version_goes_and_every_version_goes(
    app: App, db: Database
) -> None:
    stored = await app.memories.store(new_note("The door code is 4711"))
    _, revised = await app.memories.update(note_change(stored.memory.id, content="The door code is 0815"))
    path = f"/memories/{revised.memory.id}/delete"
    async with view(app) as client:
        asked = await client.get(path)
        assert "earlier versions stay" not in asked.text
        assert "with every earlier version of it" in asked.text and "nothing of it stays" in asked.text
        await post(client, path, {}, path)
    assert db.count("SELECT count(*) FROM memories") == 0  # as the page said: no version stays


async def test_one_turn_of_a_transcript_is_deleted_from_its_page_and_the_rest_stays(app: App, db: Database) -> None:
    conversation = await app.conversations.start(new_conversation("Garden"))
    said, _ = await app.transcript.add_messages(conversation.id, parse_turns("messages", [
        {"role": "user", "content": "My card number is 4111 1111 1111 1111"},
        {"role": "assistant", "content": "Noted."},
    ]))
    page = f"/conversations/{conversation.id}"
    async with view(app) as client:
        shown = await client.get(page)
        path = f"/memories/{said[0].id}/delete"
        assert f'href="{path}">Delete this turn…</a>' in shown.text
        await post(client, path, {}, path)
        after = await client.get(page)
    assert "4111" not in after.text and "Noted." in after.text
    assert db.rows("SELECT content FROM memories") == [("Noted.",)]


async def test_ending_and_deleting_a_conversation_go_through_the_service(app: App, db: Database) -> None:
    conversation = await app.conversations.start(new_conversation("Garden"))
    await app.memories.store(new_note("Tomatoes need water every second day"))
    await app.transcript.add_message(conversation.id, "user", "When do the tomatoes need water?")
    page = f"/conversations/{conversation.id}"
    async with view(app) as client:
        ended = await post(client, f"{page}/end", {}, page)
        assert ended.status_code == 303
        assert db.rows("SELECT status FROM conversations") == [("completed",)]
        asked = await client.get(f"{page}/delete")
        assert "Its 2 memories, earlier versions, messages and summaries" in asked.text  # the note and the message
        assert db.count("SELECT count(*) FROM conversations") == 1
        deleted = await post(client, f"{page}/delete", {}, f"{page}/delete")
        assert deleted.status_code == 303 and deleted.headers["location"] == "/?done=conversation-deleted"
        assert "deleted with everything in it" in (await client.get(deleted.headers["location"])).text
    assert db.count("SELECT count(*) FROM conversations") == 0 and db.count("SELECT count(*) FROM memories") == 0


async def test_ending_an_ended_conversation_is_a_409_with_the_reason(app: App) -> None:
    conversation = await app.conversations.start(new_conversation("Garden"))
    await app.conversations.end(conversation.id, "done")
    async with view(app) as client:
        again = await post(client, f"/conversations/{conversation.id}/end", {})
    assert again.status_code == 409 and conversation.id in again.text


async def test_export_downloads_markdown_and_json_that_import_reads_back(
    app: App, db: Database, another_database: Callable[[], Database], settings: Settings
) -> None:
    conversation = await app.conversations.start(new_conversation("Trip planning"))
    await app.memories.store(new_note("Sam prefers aisle seats", tags=["travel"]))
    async with view(app) as client:
        markdown = await client.get(f"/conversations/{conversation.id}/export?format=markdown")
        document = await client.get(f"/conversations/{conversation.id}/export?format=json")
        everything = await client.get("/export?format=json")
        bad = await client.get("/export?format=xml")
    assert markdown.headers["content-disposition"] == f'attachment; filename="conversation-{conversation.id}.md"'
    assert "Sam prefers aisle seats" in markdown.text and "# Trip planning" in markdown.text
    assert json.loads(document.text)["conversations"][0]["id"] == conversation.id
    assert len(json.loads(everything.text)["conversations"]) == 1
    assert bad.status_code == 400 and "format" in bad.text

    other = another_database()
    async with open_app(other.settings(settings), background=False) as fresh, view(fresh) as client:
        token = csrf_of(await client.get("/import"))
        files = {"file": ("export.json", document.content, "application/json")}
        imported = await client.post("/import", data={"csrf": token}, files=files, headers={"origin": BASE})
        again = await client.post("/import", data={"csrf": token}, files=files, headers={"origin": BASE})
        assert "Imported 1 new conversation(s) and 1 new memories from an ollama-mcp export." in imported.text
        assert "Imported 0 new conversation(s) and 0 new memories from an ollama-mcp export." in again.text
    assert other.rows("SELECT content FROM memories") == [("Sam prefers aisle seats",)]


async def test_importing_a_file_that_is_no_export_is_a_400_naming_it_changing_nothing(
    app: App, db: Database
) -> None:
    async with view(app) as client:
        token = csrf_of(await client.get("/import"))
        not_json = await client.post("/import", data={"csrf": token}, headers={"origin": BASE},
                                     files={"file": ("notes.txt", b"just some notes", "text/plain")})
        wrong_shape = await client.post(
            "/import",
            data={"csrf": token},
            headers={"origin": BASE},
            files={"file": ("x.json", b'{"conversations": [{"id": 3}]}', "application/json")},
        )
        too_big = await client.post("/import", data={"csrf": token}, headers={"origin": BASE},
                                    files={"file": ("big.json", b" " * (MAX_BODY_BYTES + 1), "application/json")})

        async def unannounced() -> AsyncIterator[bytes]:  # chunked: no Content-Length to refuse it by
            yield b'--x\r\nContent-Disposition: form-data; name="file"; filename="big.json"\r\n\r\n'
            for _ in range(MAX_BODY_BYTES // 2**20 + 1):
                yield b" " * 2**20

        chunked = await client.post("/import", content=unannounced(), headers={
            "origin": BASE, "content-type": "multipart/form-data; boundary=x"})
    assert not_json.status_code == 400 and "file" in not_json.text and "not JSON" in not_json.text
    assert wrong_shape.status_code == 400
    assert too_big.status_code == 413 and chunked.status_code == 413 and "larger than 64 MiB" in chunked.text
    assert db.count("SELECT count(*) FROM conversations") == 0


async def test_the_health_page_shows_checks_holdings_and_memories_over_time(app: App, fake_ollama: FakeOllama) -> None:
    await app.conversations.start(new_conversation("Trip planning"))
    await app.memories.store(new_note("Sam prefers aisle seats"))
    await app.memories.store(new_note("The hotel in Lisbon is booked"))
    async with view(app) as client:
        healthy = (await client.get("/health")).text
        fake_ollama.stop()
        down = (await client.get("/health")).text
    assert "<td>ok</td><td>ollama</td>" in healthy and "<td>ok</td><td>database</td>" in healthy
    assert "2 notes" in healthy and "<polyline" in healthy and "Trip planning (2)" in healthy
    today = datetime.now(UTC).date().isoformat()
    assert f'font-size="11">{today}</text>' in healthy  # one day: the axis starts on it, not the day before
    assert "<td>FAIL</td><td>ollama</td>" in down


async def test_the_health_plot_counts_recorded_turns_on_the_day_they_were_said(app: App) -> None:
    chat = await app.conversations.start(new_conversation("Recorded chat"))
    await app.transcript.add_messages(chat.id, parse_turns("messages", [
        {"role": "user", "content": "Hello", "occurred_at": "2026-03-01T10:00:00Z"},
        {"role": "assistant", "content": "Hi", "occurred_at": "2026-03-03T10:00:00Z"},
    ]))
    async with view(app) as client:
        health = (await client.get("/health")).text
    assert "Recorded chat (2)" in health
    assert 'font-size="11">2026-03-01</text>' in health and 'font-size="11">2026-03-03</text>' in health


async def test_the_health_page_names_a_background_job_that_gave_up_with_its_reason(app: App, db: Database) -> None:
    conversation = await app.conversations.start(new_conversation("Garden"))
    await app.memories.store(new_note("Tomatoes need water every second day"))
    await app.conversations.end(conversation.id)  # queues the chat model's summary
    reason = "Gave up after 5 attempts: Chat model 'qwen2.5:3b' replied without a summary."
    db.rows("UPDATE jobs SET state = 'failed', last_error = ?", reason)
    async with view(app) as client:
        page = (await client.get("/health")).text
    assert "1 background job(s) gave up" in page
    assert (
        "summarize (failed): Gave up after 5 attempts: Chat model &#39;qwen2.5:3b&#39; replied without a summary."
        in page
    )


async def test_the_health_page_shows_the_chat_model_budget_and_the_jobs_waiting_for_it(app: App, db: Database) -> None:
    conversation = await app.conversations.start(new_conversation("Garden"))
    await app.memories.store(new_note("Tomatoes need water every second day"))
    await app.conversations.end(conversation.id)  # queues the chat model's summary
    async with view(app) as client:
        page = (await client.get("/health")).text
    line = "0 of 60 chat-model calls used in the last hour; 1 job (summaries, compaction, facts) waiting"
    assert f"<tr><th>chat budget</th><td>{line}</td></tr>" in page
    assert f"<td>ok</td><td>budget</td><td>{line}</td>" in page


async def test_a_long_conversation_pages_its_memories_and_shows_the_end_of_its_transcript(
    app: App, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("ollama_mcp.ui.web.NOTES_SHOWN", 2)
    monkeypatch.setattr("ollama_mcp.ui.web.MESSAGES_SHOWN", 2)
    conversation = await app.conversations.start(new_conversation("Long"))
    for text in ("first note", "second note", "third note"):
        await app.memories.store(new_note(text))
        await app.transcript.add_message(conversation.id, "user", f"said {text}")
    page = f"/conversations/{conversation.id}"
    async with view(app) as client:
        newest = (await client.get(page)).text
        oldest = (await client.get(f"{page}?page=2")).text
        past_the_end = await client.get(f"{page}?page=3")
        not_a_number = await client.get(f"{page}?page=two")
    shown = re.compile(r'<p class="content">(.*?)</p>')
    assert shown.findall(newest) == ["third note", "second note"] and "memories 1–2 of 3 (page 1 of 2)" in newest
    assert shown.findall(oldest) == ["first note"] and "← newer" in oldest and "older →" not in oldest
    assert past_the_end.status_code == 400 and "page" in past_the_end.text and "1 to 2" in past_the_end.text
    assert not_a_number.status_code == 400 and "whole number" in not_a_number.text
    assert "said second note" in newest and "said third note" in newest and "said first note" not in newest
    assert "The 1 earlier messages are in the conversation's export." in newest


def test_the_listening_socket_sends_small_responses_at_once() -> None:
    # Without TCP_NODELAY every page waited 40 ms for the client's delayed ACK (bench figure in the note).
    sock = bind(0)
    try:
        assert sock.getsockname()[0] == "127.0.0.1"
        assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) != 0
    finally:
        sock.close()


# -- the same pages under the shared HTTP server's /ui ------------------------------------------


@asynccontextmanager
async def browser_of(url: str) -> AsyncIterator[httpx.AsyncClient]:
    """A cookie-keeping HTTP client of the server whose MCP endpoint is ``url``."""
    async with httpx.AsyncClient(base_url=url.removesuffix("/mcp"), timeout=30) as browser:
        yield browser


def origin_of(browser: httpx.AsyncClient) -> dict[str, str]:
    return {"origin": str(browser.base_url).rstrip("/")}


async def sign_in(browser: httpx.AsyncClient, token: str) -> httpx.Response:
    return await browser.post("/ui/sign-in", data={"token": token}, headers=origin_of(browser))


async def stored_over_mcp(url: str, token: str, name: str, text: str) -> tuple[str, str]:
    async with client(url, token) as mcp:
        conversation = (await call(mcp, "init_conversation", name=name))["conversation_id"]
        return conversation, (await call(mcp, "store_memory", content=text))["memory_id"]


async def test_on_a_shared_server_each_person_signs_in_by_token_and_sees_only_their_memory(
    settings: Settings, backend: str
) -> None:
    _, alice_token = await admin.create_token(settings, "alice-laptop", "alice")
    _, bob_token = await admin.create_token(settings, "bob", None)
    async with serving(settings) as url:
        alice_chat, alice_note = await stored_over_mcp(url, alice_token, "Alice chat", "The vault code is 4711")
        bob_chat, bob_note = await stored_over_mcp(url, bob_token, "Bob chat", "The vault code is 1234")
        async with browser_of(url) as browser:
            entered = await sign_in(browser, alice_token)
            assert entered.status_code == 303 and entered.headers["location"] == "/ui/"
            cookie = entered.headers["set-cookie"]
            assert "HttpOnly" in cookie and "SameSite=Strict" in cookie and "Path=/ui" in cookie
            listing = await browser.get("/ui/")
            assert listing.status_code == 200 and "Alice chat" in listing.text and "Bob chat" not in listing.text
            assert f'href="/ui/conversations/{alice_chat}"' in listing.text  # every link stays under /ui
            found = await browser.get("/ui/search", params={"q": "vault code"})
            assert "4711" in found.text and "1234" not in found.text
            csrf = csrf_of(await browser.get("/ui/import"))
            # Bob's conversation and memory do not exist for alice: 404 on every route, nothing changes.
            reads = [f"/ui/conversations/{bob_chat}", f"/ui/conversations/{bob_chat}/export?format=json",
                     f"/ui/memories/{bob_note}/delete", f"/ui/conversations/{bob_chat}/delete"]
            writes = [(f"/ui/memories/{bob_note}/update", {"content": "overwritten", "tags": ""}),
                      (f"/ui/memories/{bob_note}/delete", {}), (f"/ui/conversations/{bob_chat}/end", {}),
                      (f"/ui/conversations/{bob_chat}/delete", {})]
            for path in reads:
                refused = await browser.get(path)
                assert refused.status_code == 404 and "1234" not in refused.text, path
            for path, form in writes:
                refused = await browser.post(path, data={"csrf": csrf, **form}, headers=origin_of(browser))
                assert refused.status_code == 404, path
            exported = await browser.get("/ui/export?format=json")
            assert "4711" in exported.text and "1234" not in exported.text
            health = await browser.get("/ui/health")
            assert health.status_code == 200 and "Alice chat" in health.text and "Bob chat" not in health.text
            # Alice's own edit is a new version in her store, audited under her token's name.
            edited = await browser.post(f"/ui/memories/{alice_note}/update", headers=origin_of(browser),
                                        data={"csrf": csrf, "content": "The vault code is 4712", "tags": ""})
            assert edited.status_code == 303 and edited.headers["location"].startswith(
                f"/ui/conversations/{alice_chat}?"
            )
    alice, bob = store_of(settings, backend, "alice"), store_of(settings, backend, "bob")
    assert alice.count("SELECT count(*) FROM memories WHERE content = 'The vault code is 4712'") == 1
    assert alice.rows("SELECT door, principal, action FROM write_audit WHERE door = 'ui'") == [
        ("ui", "alice-laptop", "update_memory")]
    assert bob.rows("SELECT content, superseded_by FROM memories WHERE id = ?", bob_note) == [
        ("The vault code is 1234", None)]
    assert bob.rows("SELECT status FROM conversations WHERE id = ?", bob_chat) == [("active",)]
    assert bob.count("SELECT count(*) FROM write_audit WHERE door = 'ui'") == 0


async def test_on_a_shared_server_no_valid_token_shows_the_sign_in_form_and_nothing_else(
    settings: Settings, backend: str
) -> None:
    _, alice_token = await admin.create_token(settings, "alice-laptop", "alice")
    async with serving(settings) as url:
        _, note = await stored_over_mcp(url, alice_token, "Alice chat", "The vault code is 4711")
        async with browser_of(url) as browser:
            bare = await browser.get("/ui/")
            assert bare.status_code == 403 and 'action="/ui/sign-in"' in bare.text and "4711" not in bare.text
            wrong = await sign_in(browser, "omcp_" + "x" * 43)
            assert wrong.status_code == 403 and "not valid" in wrong.text and "set-cookie" not in wrong.headers
            cross_site = await browser.post("/ui/sign-in", data={"token": alice_token},
                                            headers={"origin": "http://attacker.example"})
            assert cross_site.status_code == 403 and "set-cookie" not in cross_site.headers
            in_the_address = await browser.get(f"/ui/?token={alice_token}")  # only the form signs in
            assert in_the_address.status_code == 403 and "set-cookie" not in in_the_address.headers
            assert (await sign_in(browser, alice_token)).status_code == 303
            rebound = await browser.get("/ui/", headers={"host": "attacker.example"})
            assert rebound.status_code == 403 and "DNS rebinding" in rebound.text
            csrf = csrf_of(await browser.get("/ui/import"))
            other_site = await browser.post(f"/ui/memories/{note}/delete", data={"csrf": csrf},
                                            headers={"origin": "http://attacker.example"})
            assert other_site.status_code == 403 and "cross-site" in other_site.text
            await admin.revoke_token(settings, "alice-laptop")  # ends the browser session at its next request
            after = await browser.get("/ui/")
            deleted = await browser.post(f"/ui/memories/{note}/delete", data={"csrf": csrf}, headers=origin_of(browser))
            assert (after.status_code, deleted.status_code) == (403, 403) and "4711" not in after.text
    assert store_of(settings, backend, "alice").count("SELECT count(*) FROM memories") == 1


async def test_a_tokenless_loopback_server_opens_its_view_with_the_link_it_printed(
    settings: Settings, db: Database
) -> None:
    async with serving(settings) as url:
        async with client(url) as mcp:
            stored = await call(mcp, "store_memory", content="Sam prefers aisle seats")
        async with browser_of(url) as browser:
            assert (await browser.get("/ui/?token=wrong")).status_code == 403
            entered = await browser.get(f"/ui/?token={VIEW_TOKEN}")
            assert entered.status_code == 303 and entered.headers["location"] == "/ui/"
            page = await browser.get(f"/ui/conversations/{stored['conversation_id']}")
            assert "aisle seats" in page.text and 'href="/ui/static/ui.css"' in page.text
            assert (await browser.get("/ui/static/ui.css")).status_code == 200
            csrf = csrf_of(page)
            deleted = await browser.post(f"/ui/memories/{stored['memory_id']}/delete", data={"csrf": csrf},
                                         headers=origin_of(browser))
            assert deleted.status_code == 303 and deleted.headers["location"].startswith("/ui/conversations/")
    assert db.count("SELECT count(*) FROM memories") == 0


async def test_the_import_page_takes_a_chatgpt_export_zip_as_the_command_does(app: App, db: Database) -> None:
    archive = io.BytesIO()
    with zipfile.ZipFile(archive, "w") as packed:
        packed.writestr("conversations.json", json.dumps([chatgpt_conversation()]))
    async with view(app) as client:
        token = csrf_of(await client.get("/import"))
        files = {"file": ("chatgpt-export.zip", archive.getvalue(), "application/zip")}
        imported = await client.post("/import", data={"csrf": token}, files=files, headers={"origin": BASE})
        mislabelled = await client.post("/import", data={"csrf": token}, headers={"origin": BASE},
                                        files={"file": ("export.zip", b"[]", "application/zip")})
    assert "Imported 1 new conversation(s) and 4 new memories from a ChatGPT export." in imported.text
    assert db.rows("SELECT name FROM conversations") == [("Lisbon trip",)]
    assert mislabelled.status_code == 400
    assert "file: export.zip ends in .zip but is not a zip archive" in mislabelled.text


async def test_a_long_memory_shows_its_start_with_the_rest_folded_and_long_lists_page(
    app: App,
) -> None:
    from ollama_mcp.ui import web  # noqa: PLC0415

    conversation = await app.conversations.start(new_conversation("long"))
    long = "word " * 12_000 + "THE END"
    await app.memories.store(new_note(long, conversation.id))
    async with view(app) as client:
        page = await client.get(f"/conversations/{conversation.id}")
        listed = await client.get("/")
    assert page.status_code == 200
    start = page.text.index('<li id="m-')
    shown = page.text[start:page.text.index("</li>", start)]
    assert f"Show all {len(long)} characters" in shown
    assert shown.index("THE END") > shown.index("<details")  # the end is behind "show all", not above Delete
    assert "Pages of conversations" not in listed.text and '<div class="scroll">' in listed.text
    for n in range(web.LISTED):
        await app.conversations.start(new_conversation(f"chat {n}"))
    async with view(app) as client:
        first = await client.get("/")
        second = await client.get("/", params={"page": "2"})
        named = await client.get("/", params={"page": "2", "q": "chat"})
        past = await client.get("/", params={"page": "3"})
    assert f"conversations 1–{web.LISTED}, more on the next page (page 1)" in first.text
    assert 'href="?page=2&amp;q=&amp;status="' in first.text and "chat 499" in first.text
    assert f"conversations {web.LISTED + 1}–{web.LISTED + 1} (page 2)" in second.text  # the first one made: "long"
    assert ">long</a>" in second.text and ">chat 0</a>" not in second.text and "← later activity" in second.text
    assert "No conversation on page 2" in named.text  # 500 chats, all on page 1
    assert past.status_code == 200 and "No conversation on page 3" in past.text

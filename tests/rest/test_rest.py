"""The REST API through real HTTP: the server as ``serve --http`` builds it, real tokens, both
backends. Every answer is also checked against the schema the OpenAPI document gives for it."""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import replace
from typing import Any

import httpx2
import jsonschema
import pytest
from openapi_spec_validator import validate

from ollama_mcp.cli import admin
from ollama_mcp.config import Settings
from ollama_mcp.rest.api import ENDPOINTS
from ollama_mcp.rest.models import PREFIX
from tests.conftest import Database, eventually
from tests.support.fake_ollama import FakeOllama
from tests.support.http import serving
from tests.support.view import store_of

pytestmark = pytest.mark.anyio


class Api:
    """One person's client of the API, checking every answer against the document's schema."""

    def __init__(self, http: httpx2.AsyncClient, base: str, document: dict[str, Any] | None = None) -> None:
        self.http, self.base, self.document = http, base, document

    async def call(self, method: str, path: str, body: Any = None, expect: int = 200, **options: Any) -> Any:
        if body is not None:
            options["content"] = body if isinstance(body, bytes | str) else json.dumps(body)
            options.setdefault("headers", {})["content-type"] = "application/json"
        response = await self.http.request(method, self.base + path, **options)
        assert response.status_code == expect, (response.status_code, response.text)
        data = response.json()
        if self.document is not None:
            self._conforms(method, path, response.status_code, data)
        return data

    def _conforms(self, method: str, path: str, status: int, data: Any) -> None:
        template = next(
            p for p in self.document["paths"]  # type: ignore[index]
            if _same_route(p.removeprefix(PREFIX), path.split("?")[0])
        )
        responses = self.document["paths"][template][method.lower()]["responses"]  # type: ignore[index]
        schema = responses.get(str(status), responses.get("400"))["content"]["application/json"]["schema"]
        jsonschema.validate(data, {**schema, "components": self.document["components"]})  # type: ignore[index]


def _same_route(template: str, path: str) -> bool:
    left, right = template.strip("/").split("/"), path.strip("/").split("/")
    return len(left) == len(right) and all(a == b or a.startswith("{") for a, b in zip(left, right, strict=True))


@asynccontextmanager
async def people(settings: Settings) -> AsyncIterator[tuple[Api, Api, Api]]:
    """Alice's and Bob's clients (a token each) and an anonymous one, on one server."""
    _, alice = await admin.create_token(settings, "alice-laptop", "alice")
    _, bob = await admin.create_token(settings, "bob-phone", "bob")
    async with serving(settings) as url, httpx2.AsyncClient(timeout=30) as plain:
        base = url.removesuffix("/mcp") + PREFIX
        document = (await plain.get(base + "/openapi.json")).json()
        async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {alice}"}, timeout=30) as a, \
                httpx2.AsyncClient(headers={"Authorization": f"Bearer {bob}"}, timeout=30) as b:
            yield Api(a, base, document), Api(b, base, document), Api(plain, base, document)


async def test_a_chat_app_creates_a_conversation_records_turns_recalls_builds_context_and_ends_it(
    settings: Settings, db: Database
) -> None:
    async with people(settings) as (alice, _, _):
        minted = str(uuid.uuid4())
        created = await alice.call(
            "POST", "/conversations", {"id": minted, "name": "Trip", "metadata": {"app": "x"}}, expect=201
        )
        assert (created["id"], created["name"], created["status"], created["created"]) == (
            minted, "Trip", "active", True)
        again = await alice.call("POST", "/conversations", {"id": minted, "name": "Other"}, expect=200)
        assert (again["id"], again["name"], again["created"]) == (minted, "Trip", False)  # the same one, unchanged

        conv = f"/conversations/{minted}"
        asked = await alice.call(
            "POST", conv + "/turns", {"role": "user", "content": "Book the Lisbon flight for May 4"}, expect=201
        )
        answered = await alice.call("POST", conv + "/turns", {
            "role": "assistant", "content": "Booked: TAP 1345 to Lisbon on May 4, seat 12A.",
            "tokens": {"prompt": 812, "completion": 95}, "model": "qwen2.5:7b", "adapter": "openai-chat",
        }, expect=201)
        assert (answered["tokens"], answered["model"], answered["adapter"]) == (
            {"prompt": 812, "completion": 95}, "qwen2.5:7b", "openai-chat")
        retried = await alice.call("POST", conv + "/turns", {
            "role": "assistant", "content": "Booked: TAP 1345 to Lisbon on May 4, seat 12A.",
            "tokens": {"prompt": 812, "completion": 95}, "model": "qwen2.5:7b", "adapter": "openai-chat",
        }, expect=200)
        assert retried["duplicate"] is True and retried["id"] == answered["id"]

        page = await alice.call("GET", conv + "/turns?limit=1")
        assert [t["id"] for t in page["turns"]] == [answered["id"]] and page["earlier"] is True
        older = await alice.call("GET", conv + f"/turns?before={answered['id']}")
        assert [t["content"] for t in older["turns"]] == ["Book the Lisbon flight for May 4"]
        assert older["earlier"] is False and asked["id"] == older["turns"][0]["id"]

        found = await alice.call("POST", conv + "/recall", {"query": "seat 12A", "k": 3})
        assert found["hits"][0]["memory_id"] == answered["id"] and found["hits"][0]["kind"] == "message"

        context = await alice.call("POST", conv + "/context", {"token_budget": 500, "recent_turns": 10})
        assert [m["role"] for m in context["messages"]][-2:] == ["user", "assistant"]
        assert context["messages"][-1]["content"] == "Booked: TAP 1345 to Lisbon on May 4, seat 12A."
        assert 0 < context["tokens"] <= 500

        ended = await alice.call("POST", conv + "/end", {"summary": "Flight to Lisbon booked, seat 12A."})
        assert ended["status"] == "completed" and ended["summary_status"] == "given"
        listed = await alice.call("GET", "/conversations?status=completed")
        assert [c["id"] for c in listed["conversations"]] == [minted]
        # Every write came through the REST door, under the token's name, into Alice's store only.
        log = await admin.write_log(settings.for_principal("alice"), None, 100)
        assert sorted({(r.door, r.principal, r.action) for r in log if r.door != "background"}) == [
            ("rest", "alice-laptop", "add_messages"), ("rest", "alice-laptop", "end_conversation"),
            ("rest", "alice-laptop", "init_conversation")]
        assert {r.action for r in log if r.door == "background"} <= {"relate"}  # the server's own work after it
        assert db.count("SELECT count(*) FROM memories") == 0  # the local user's store is untouched

        gone = await alice.call("DELETE", conv)
        assert gone == {"id": minted, "memories_deleted": 3}
        missing = await alice.call("GET", conv, expect=404)
        assert minted in missing["error"]
        assert (await alice.call("GET", "/conversations"))["conversations"] == []


async def test_one_persons_conversations_are_a_404_to_another_the_same_as_a_random_id(settings: Settings) -> None:
    async with people(settings) as (alice, bob, _):
        mine = (await alice.call("POST", "/conversations", {"name": "Private"}, expect=201))["id"]
        await alice.call("POST", f"/conversations/{mine}/turns", {"role": "user", "content": "My PIN is 4821"},
                         expect=201)
        random = str(uuid.uuid4())
        for method, tail, body in [
            ("GET", "", None), ("DELETE", "", None), ("POST", "/end", {}), ("GET", "/turns", None),
            ("POST", "/turns", {"role": "user", "content": "hello"}), ("POST", "/recall", {"query": "PIN"}),
            ("POST", "/context", {"token_budget": 500}),
        ]:
            theirs = await bob.call(method, f"/conversations/{mine}{tail}", body, expect=404)
            unknown = await bob.call(method, f"/conversations/{random}{tail}", body, expect=404)
            assert theirs["error"].replace(mine, "ID") == unknown["error"].replace(random, "ID"), (method, tail)
        assert (await bob.call("GET", "/conversations"))["conversations"] == []
        own = (await bob.call("POST", "/conversations", {}, expect=201))["id"]
        everywhere = await bob.call("POST", f"/conversations/{own}/recall", {"query": "PIN", "scope": "all"})
        assert everywhere["hits"] == []
        assert len((await alice.call("GET", f"/conversations/{mine}/turns"))["turns"]) == 1


async def test_without_a_valid_token_every_endpoint_answers_401_saying_how_to_get_one(settings: Settings) -> None:
    async with people(settings) as (_, _, anonymous):
        said = await anonymous.call("GET", "/conversations", expect=401)
        assert "Authorization: Bearer" in said["error"] and "ollama-mcp token create" in said["error"]
        wrong = await anonymous.call("GET", "/conversations", expect=401, headers={"Authorization": "Bearer nope"})
        assert wrong == said
        response = await anonymous.http.get(anonymous.base + "/conversations")
        assert response.headers["www-authenticate"] == 'Bearer realm="ollama-mcp"'


@pytest.mark.parametrize(("body", "status", "field", "said"), [
    ("{not json", 400, None, "the body is not JSON"),
    ("[1, 2]", 400, None, "the body must be a JSON object"),
    ({"role": "user", "content": "hi", "colour": "red"}, 400, "colour", "is not a field of this request"),
    ({"role": "user", "content": 5}, 400, "content", "input should be a valid string"),
    ({"role": "boss", "content": "hi"}, 400, "role", "input should be 'user', 'assistant', 'system' or 'tool'"),
    ({"role": "user", "content": "hi", "tokens": {"prompt": "5"}}, 400, "tokens.prompt",
     "input should be a valid integer"),
    ({"role": "user", "content": "hi", "tokens": {"prompt": -1}}, 400, "tokens.prompt", "must be a whole number"),
    ({"role": "user", "content": "hi", "model": ""}, 400, "model", "must be a text of 1-200 characters"),
    ({"role": "user", "content": "   "}, 400, "content", "message text"),
])
async def test_a_bad_turn_is_refused_naming_the_field_and_nothing_is_recorded(
    settings: Settings, body: Any, status: int, field: str | None, said: str
) -> None:
    async with people(settings) as (alice, _, _):
        conv = (await alice.call("POST", "/conversations", {}, expect=201))["id"]
        refused = await alice.call("POST", f"/conversations/{conv}/turns", body, expect=status)
        assert said in refused["error"].lower() or said in refused["error"], refused
        assert refused.get("field") == field
        assert (await alice.call("GET", f"/conversations/{conv}/turns"))["turns"] == []


async def test_a_body_too_big_not_json_mistyped_or_for_an_ended_conversation_changes_nothing(
    settings: Settings,
) -> None:
    async with people(settings) as (alice, _, _):
        conv = (await alice.call("POST", "/conversations", {}, expect=201))["id"]
        turns = f"/conversations/{conv}/turns"
        big = json.dumps({"role": "user", "content": "x" * (5 * 2**20)})
        assert "larger than 4 MiB" in (await alice.call("POST", turns, big, expect=413))["error"]
        typed = await alice.http.post(alice.base + turns, content='{"role": "user", "content": "hi"}',
                                      headers={"content-type": "text/plain"})
        assert typed.status_code == 415 and "Content-Type: application/json" in typed.json()["error"]
        await alice.call("POST", f"/conversations/{conv}/end", {"summary": "done"})
        closed = await alice.call("POST", turns, {"role": "user", "content": "late"}, expect=409)
        assert conv in closed["error"]
        assert (await alice.call("GET", "/conversations/not-an-id", expect=404))["field"] == "conversation_id"
        limit = await alice.call("GET", "/conversations?limit=0", expect=400)
        assert limit["field"] == "limit"
        assert (await alice.call("GET", turns))["turns"] == []


async def test_a_page_from_another_origin_or_a_rebound_host_is_refused_before_anything_is_read(
    settings: Settings,
) -> None:
    async with people(settings) as (alice, _, _):
        cross = await alice.call("GET", "/conversations", expect=403, headers={"Origin": "https://evil.example"})
        assert "https://evil.example" in cross["error"]
        rebound = await alice.call("GET", "/conversations", expect=421, headers={"Host": "evil.example"})
        assert "Host" in rebound["error"]


async def test_the_openapi_document_is_valid_and_lists_exactly_the_routes_served(settings: Settings) -> None:
    async with people(settings) as (alice, _, _):
        document = alice.document
        assert document is not None
        validate(document)  # the OpenAPI 3.1 specification's own schema
        served = {(e.method.lower(), PREFIX + e.path) for e in ENDPOINTS}
        listed = {(method, path) for path, operations in document["paths"].items() for method in operations}
        assert listed == served
        assert document["security"] == [{"bearer": []}]
        schema = document["components"]["schemas"]["TurnIn"]
        # content may be null or empty for an assistant turn that only calls tools (#80 item 6)
        assert schema["additionalProperties"] is False and set(schema["required"]) == {"role"}


async def test_an_unknown_path_or_method_is_a_json_error_pointing_at_the_document(
    settings: Settings
) -> None:
    async with people(settings) as (alice, _, anonymous):
        for client in (alice, anonymous):
            missing = await client.http.post(client.base + "/recall", json={"query": "x"})
            assert missing.status_code == 404 and missing.headers["content-type"] == "application/json"
            assert missing.json() == {
                "error": f"there is no POST {PREFIX}/recall; see GET {PREFIX}/openapi.json for the endpoints"}
        wrong = await alice.http.delete(alice.base + "/conversations")
        assert wrong.status_code == 405 and wrong.headers["allow"] == "GET, HEAD, POST"
        assert wrong.json() == {"error": f"DELETE is not accepted on {PREFIX}/conversations; it takes GET, HEAD, POST"
                                         f" (see GET {PREFIX}/openapi.json for the endpoints)"}
        assert (await alice.call("GET", "/conversations"))["conversations"] == []


async def test_a_server_without_tokens_serves_the_local_user_on_loopback(settings: Settings, db: Database) -> None:
    async with serving(settings) as url, httpx2.AsyncClient(timeout=30) as plain:
        local = Api(plain, url.removesuffix("/mcp") + PREFIX)
        conv = (await local.call("POST", "/conversations", {"name": "Mine"}, expect=201))["id"]
        await local.call("POST", f"/conversations/{conv}/turns", {"role": "user", "content": "hello"}, expect=201)
    assert db.rows("SELECT name FROM conversations") == [("Mine",)]
    assert db.rows("SELECT door, action FROM write_audit ORDER BY id") == [
        ("rest", "init_conversation"), ("rest", "add_messages")]


async def test_a_summary_compaction_or_facts_asked_for_now_is_queued_once_and_followed_to_done(
    settings: Settings,
) -> None:
    async with people(settings) as (alice, bob, _):
        conv = (await alice.call("POST", "/conversations", {"name": "Plan", "metadata": {"facts": True}},
                                 expect=201))["id"]
        for text in ("We move to Boston in May", "The movers come on the 3rd"):
            await alice.call("POST", f"/conversations/{conv}/turns", {"role": "user", "content": text}, expect=201)
        job = await alice.call("POST", f"/conversations/{conv}/summarize", {}, expect=202)
        assert (job["kind"], job["state"], job["conversation_id"], job["attempts"]) == ("summarize", "queued", conv, 0)
        again = await alice.call("POST", f"/conversations/{conv}/summarize", {}, expect=202)
        assert again["id"] == job["id"]  # asked twice while queued: one job
        facts = await alice.call("POST", f"/conversations/{conv}/facts", {}, expect=202)
        compacting = await alice.call("POST", f"/conversations/{conv}/compact", {}, expect=202)
        assert len({job["id"], facts["id"], compacting["id"]}) == 3
        await _finished(alice, job)
        listed = await alice.call("POST", f"/conversations/{conv}/recall", {"query": "*", "k": 20})
        assert "summary" in [hit["kind"] for hit in listed["hits"]]  # what the job wrote
        assert (await bob.call("GET", f"/jobs/{job['id']}", expect=404))["error"].startswith("job_id: no job")
        assert (await alice.call("GET", "/jobs/999999", expect=404))["error"].startswith("job_id: no job")
        assert (await alice.call("GET", "/jobs/abc", expect=404))["error"].startswith("job_id: no job")

        plain = (await alice.call("POST", "/conversations", {}, expect=201))["id"]
        refused = await alice.call("POST", f"/conversations/{plain}/facts", {}, expect=400)
        assert refused["field"] == "facts" and '{"facts": true}' in refused["error"]
        nowhere = await alice.call("POST", f"/conversations/{conv}/summarize", {"through": "x"}, expect=400)
        assert nowhere["field"] == "through" and nowhere["error"].startswith("through: is not a valid id")


LONG_TURNS = [  # long enough that a summary of them passes compact_summary_tokens (50)
    " ".join(f"{word}{i}" for i in range(40)) for word in ("alpha", "bravo", "charlie", "delta")
]


async def _turns(api: Api, conv: str) -> list[str]:
    return [
        (await api.call("POST", f"/conversations/{conv}/turns", {"role": "user", "content": text}, expect=201))["id"]
        for text in LONG_TURNS
    ]


async def _finished(api: Api, job: dict[str, Any]) -> dict[str, Any]:
    state: dict[str, Any] = {}

    async def done() -> bool:
        state.update(await api.call("GET", f"/jobs/{job['id']}"))
        return state["state"] in ("done", "failed")

    await eventually(done)
    assert state["state"] == "done", state
    return state


async def test_work_asked_through_a_turn_reads_up_to_it_and_a_strategy_applies_once(
    settings: Settings, fake_ollama: FakeOllama, backend: str
) -> None:
    async with people(settings) as (alice, bob, _):
        db = store_of(settings, backend, "alice")
        conv = (await alice.call("POST", "/conversations", {"metadata": {"facts": True, "compact_summary_tokens": 50}},
                                 expect=201))["id"]
        ids = await _turns(alice, conv)
        seqs = [db.count("SELECT seq FROM memories WHERE id = ?", turn) for turn in ids]

        before = len(fake_ollama.chat_requests())
        job = await alice.call("POST", f"/conversations/{conv}/facts", {"through": ids[0]}, expect=202)
        assert job["options"] == {"through": ids[0]}
        await _finished(alice, job)
        read = [r.body["messages"][-1]["content"] for r in fake_ollama.chat_requests()[before:]]
        assert len(read) == 2  # (the fake lists no fact, so the segment is asked once more)
        assert all("alpha0" in text and "bravo0" not in text for text in read)
        assert db.count("SELECT facts_through FROM conversations WHERE id = ?", conv) == seqs[0]

        before = len(fake_ollama.chat_requests())
        job = await alice.call("POST", f"/conversations/{conv}/summarize", {"through": ids[1]}, expect=202)
        await _finished(alice, job)
        read = [r.body["messages"][-1]["content"] for r in fake_ollama.chat_requests()[before:]]
        assert len(read) == 1 and "bravo0" in read[0] and "charlie0" not in read[0]

        # Compacted through the third turn, hierarchically this once (the conversation's own
        # strategy is rolling): a long summary kept and a condensed rolling one, two model calls.
        summaries = db.count("SELECT count(*) FROM memories WHERE kind = 'summary'")
        before = len(fake_ollama.chat_requests())
        asked = {"through": ids[2], "strategy": "hierarchical"}
        job = await alice.call("POST", f"/conversations/{conv}/compact", asked, expect=202)
        assert job["options"] == {"through": ids[2], "strategy": "hierarchical"}
        await _finished(alice, job)
        read = [r.body["messages"][-1]["content"] for r in fake_ollama.chat_requests()[before:]]
        assert "charlie0" in read[0] and "delta0" not in read[0] and len(read) >= 2  # then condensed
        assert db.count("SELECT summarized_through FROM conversations WHERE id = ?", conv) == seqs[2]
        assert db.count("SELECT count(*) FROM memories WHERE kind = 'summary'") == summaries + 2

        done = await alice.call("POST", f"/conversations/{conv}/compact", {"through": ids[1]}, expect=400)
        assert done["field"] == "through" and "its rolling summary covers it" in done["error"]
        other = (await bob.call("POST", "/conversations", {}, expect=201))["id"]
        theirs = await _turns(bob, other)
        for through in (theirs[0], str(uuid.uuid4())):  # someone else's turn reads as no turn at all
            refused = await alice.call("POST", f"/conversations/{conv}/summarize", {"through": through}, expect=400)
            assert refused["field"] == "through" and "is not a turn of this conversation" in refused["error"]
        never = await alice.call("POST", f"/conversations/{conv}/compact", {"strategy": "never"}, expect=400)
        assert never["field"] == "strategy"
        assert db.count("SELECT count(*) FROM jobs WHERE state = 'queued'") == 0  # the refusals queued nothing


async def test_a_queued_job_takes_the_latest_options(settings: Settings) -> None:
    async with people(replace(settings, chat_calls_per_hour=0)) as (alice, _, _):  # nothing is claimed
        conv = (await alice.call("POST", "/conversations", {}, expect=201))["id"]
        ids = await _turns(alice, conv)
        first = await alice.call("POST", f"/conversations/{conv}/summarize", {"through": ids[1]}, expect=202)
        second = await alice.call("POST", f"/conversations/{conv}/summarize", {"through": ids[2]}, expect=202)
        assert (second["id"], second["state"], second["options"]) == (first["id"], "queued", {"through": ids[2]})
        assert (await alice.call("GET", f"/jobs/{first['id']}"))["options"] == {"through": ids[2]}


async def test_a_running_job_refuses_other_options_and_is_the_answer_to_the_same_ones(
    settings: Settings, fake_ollama: FakeOllama
) -> None:
    fake_ollama.chat_delay = 3
    async with people(settings) as (alice, _, _):
        conv = (await alice.call("POST", "/conversations", {}, expect=201))["id"]
        ids = await _turns(alice, conv)
        job = await alice.call("POST", f"/conversations/{conv}/summarize", {"through": ids[1]}, expect=202)

        async def running() -> bool:
            return (await alice.call("GET", f"/jobs/{job['id']}"))["state"] == "running"

        await eventually(running)
        busy = await alice.call("POST", f"/conversations/{conv}/summarize", {"through": ids[3]}, expect=409)
        assert f"job {job['id']} (summarize) is running" in busy["error"]
        same = await alice.call("POST", f"/conversations/{conv}/summarize", {"through": ids[1]}, expect=202)
        assert same["id"] == job["id"]  # the same request again is that job
        fake_ollama.chat_delay = 0
        await _finished(alice, job)


async def test_a_streamed_turn_grows_chunk_by_chunk_and_commits_into_a_message_of_its_id(settings: Settings) -> None:
    async with people(settings) as (alice, bob, _):
        conv = (await alice.call("POST", "/conversations", {}, expect=201))["id"]
        await alice.call("POST", f"/conversations/{conv}/turns", {"role": "user", "content": "Plan my Porto day"},
                         expect=201)
        opened = await alice.call("POST", f"/conversations/{conv}/turns",
                                  {"role": "assistant", "content": "", "status": "open", "model": "qwen2.5:7b"},
                                  expect=201)
        assert (opened["status"], opened["content"], opened["role"]) == ("open", "", "assistant")
        turn = f"/turns/{opened['id']}"
        for chunk in ("Morning: ", "the Livraria Lello; ", "afternoon: a port cellar."):
            grown = await alice.call("PATCH", turn, {"append": chunk})
        assert grown["content"] == "Morning: the Livraria Lello; afternoon: a port cellar."
        listed = await alice.call("GET", f"/conversations/{conv}/turns")
        assert [t["role"] for t in listed["turns"]] == ["user"]  # an open turn is not a message yet
        stolen = await bob.call("PATCH", turn, {"append": "mine now"}, expect=404)
        assert stolen["error"].startswith("turn_id: no turn")

        committed = await alice.call("POST", turn + "/commit", {"tokens": {"prompt": 40, "completion": 12}})
        assert committed["id"] == opened["id"] and committed["content"] == grown["content"]
        assert (committed["model"], committed["tokens"]) == ("qwen2.5:7b", {"prompt": 40, "completion": 12})
        assert (await alice.call("POST", turn + "/commit", {}))["id"] == opened["id"]  # a retried commit
        late = await alice.call("PATCH", turn, {"append": "more"}, expect=409)
        assert "was committed already" in late["error"]
        assert "was committed already" in (await alice.call("POST", turn + "/abort", expect=409))["error"]
        listed = await alice.call("GET", f"/conversations/{conv}/turns")
        assert [t["id"] for t in listed["turns"]][-1] == opened["id"]
        found = await alice.call("POST", f"/conversations/{conv}/recall", {"query": "Livraria Lello"})
        assert found["hits"][0]["memory_id"] == opened["id"]


async def test_an_aborted_turn_is_kept_marked_never_becomes_a_message_and_takes_nothing_more(
    settings: Settings,
) -> None:
    async with people(settings) as (alice, _, _):
        conv = (await alice.call("POST", "/conversations", {}, expect=201))["id"]
        opened = await alice.call("POST", f"/conversations/{conv}/turns",
                                  {"role": "assistant", "content": "", "status": "open"}, expect=201)
        turn = f"/turns/{opened['id']}"
        await alice.call("PATCH", turn, {"append": "Half a tho"})
        aborted = await alice.call("POST", turn + "/abort")
        assert (aborted["status"], aborted["content"]) == ("aborted", "Half a tho")
        for method, path, body in (("PATCH", turn, {"append": "ught"}), ("POST", turn + "/commit", {}),
                                   ("POST", turn + "/abort", None)):
            said = await alice.call(method, path, body, expect=409)
            assert "was aborted already" in said["error"], said
        assert (await alice.call("GET", f"/conversations/{conv}/turns"))["turns"] == []
        missing = await alice.call("PATCH", f"/turns/{uuid.uuid4()}", {"append": "x"}, expect=404)
        assert missing["error"].startswith("turn_id: no turn")
        refused = await alice.call("POST", f"/conversations/{conv}/turns",
                                   {"role": "assistant", "content": "already", "status": "open"}, expect=400)
        assert refused["field"] == "content"
        empty = await alice.call("PATCH", f"/turns/{uuid.uuid4()}", {"append": ""}, expect=400)
        assert empty["field"] == "append"
        await alice.call("POST", f"/conversations/{conv}/end", {"summary": "done"})
        closed = await alice.call("POST", f"/conversations/{conv}/turns", {"role": "assistant", "content": "",
                                                                           "status": "open"}, expect=409)
        assert conv in closed["error"]


async def test_an_mcp_subscriber_sees_a_streamed_turn_grow_in_the_transcript(settings: Settings) -> None:
    from mcp.client.subscriptions import ResourceUpdated  # noqa: PLC0415

    from tests.support.http import client  # noqa: PLC0415
    from tests.support.live import next_event  # noqa: PLC0415

    async with serving(settings) as url, httpx2.AsyncClient(timeout=30) as plain:
        api = Api(plain, url.removesuffix("/mcp") + PREFIX)
        conv = (await api.call("POST", "/conversations", {"name": "live"}, expect=201))["id"]
        history = f"memory://conversations/{conv}/history"
        async with client(url, mode="auto") as watcher, watcher.listen(resource_subscriptions=[history]) as sub:
            opened = await api.call("POST", f"/conversations/{conv}/turns",
                                    {"role": "assistant", "content": "", "status": "open"}, expect=201)
            for chunk in ("The ferry ", "leaves at 9."):
                await api.call("PATCH", f"/turns/{opened['id']}", {"append": chunk})
                while (await next_event(sub)) != ResourceUpdated(uri=history):
                    pass
                page = (await watcher.read_resource(history)).contents[0].text
                line = next(line for line in page.splitlines() if opened["id"] in line)
                assert line.endswith("(being written): " + ("The ferry " if chunk == "The ferry " else
                                                            "The ferry leaves at 9."))
            await api.call("POST", f"/turns/{opened['id']}/commit", {})
            while (await next_event(sub)) != ResourceUpdated(uri=history):
                pass
            page = (await watcher.read_resource(history)).contents[0].text
            assert "(being written)" not in page and f"{opened['id']}: The ferry leaves at 9." in page


async def test_two_agents_in_one_conversation_each_get_their_own_view_of_it(settings: Settings) -> None:
    async with people(settings) as (alice, _, _):
        conv = f"/conversations/{(await alice.call('POST', '/conversations', {'name': 'Offsite'}, expect=201))['id']}"
        for turn in (
            {"role": "user", "actor": "dana", "content": "Find a venue in Lisbon for 20 people"},
            {"role": "assistant", "actor": "planner", "to": ["researcher"], "content": "Shortlist three venues"},
            {"role": "assistant", "actor": "researcher", "content": "LX Factory, Village Underground"},
        ):
            await alice.call("POST", conv + "/turns", turn, expect=201)

        async def view(who: str) -> list[str]:
            built = await alice.call("POST", conv + "/context", {"token_budget": 2000, "participants": [who]})
            return [m["content"] for m in built["messages"] if m["role"] != "system"]

        assert "Shortlist three venues" in " ".join(await view("researcher"))
        assert "Shortlist three venues" not in " ".join(await view("dana"))
        assert "LX Factory, Village Underground" in " ".join(await view("dana"))
        unknown = await alice.call("POST", conv + "/context", {"token_budget": 2000, "participants": ["zed"]},
                                   expect=400)
        assert unknown["field"] == "participants"


async def test_an_edited_or_regenerated_turn_keeps_its_id_place_and_earlier_text(
    settings: Settings,
) -> None:
    async with people(settings) as (alice, bob, _):
        conv = (await alice.call("POST", "/conversations", {}, expect=201))["id"]
        turns = f"/conversations/{conv}/turns"
        asked = await alice.call("POST", turns, {"role": "user", "content": "Book a table for four at eight"},
                                 expect=201)
        answer = await alice.call("POST", turns, {"role": "assistant", "content": "Booked Taberna da Rua for 8pm.",
                                                  "model": "qwen2.5:3b"}, expect=201)
        after = await alice.call("POST", turns, {"role": "user", "content": "Thanks"}, expect=201)

        edited = await alice.call("PUT", f"/turns/{asked['id']}", {"content": "Book a table for six at nine"})
        assert (edited["id"], edited["content"], edited["revised"]) == (
            asked["id"], "Book a table for six at nine", "edited")
        assert [v["content"] for v in edited["earlier_versions"]] == ["Book a table for four at eight"]
        again = await alice.call("POST", f"/turns/{answer['id']}/regenerate",
                                 {"content": "Booked Cervejaria Ramiro for 9pm, six people.", "model": "qwen2.5:7b"})
        assert (again["revised"], again["model"]) == ("regenerated", "qwen2.5:7b")
        assert again["earlier_versions"] == [{"content": "Booked Taberna da Rua for 8pm.", "model": "qwen2.5:3b",
                                              "written_at": answer["created_at"]}]

        history = await alice.call("GET", f"{turns}?limit=10")
        assert [t["id"] for t in history["turns"]] == [asked["id"], answer["id"], after["id"]]  # in place
        assert [t["content"] for t in history["turns"]][:2] == [
            "Book a table for six at nine", "Booked Cervejaria Ramiro for 9pm, six people."]
        found = await alice.call("POST", f"/conversations/{conv}/recall", {"query": "Taberna"})
        # The old text is found nowhere (the turn may still come up by its new text's meaning).
        assert not [h for h in found["hits"] if "Taberna" in h["content"]]
        found = await alice.call("POST", f"/conversations/{conv}/recall", {"query": "Cervejaria Ramiro"})
        assert found["hits"][0]["memory_id"] == answer["id"]

        exported = await admin.export_store(settings.for_principal("alice"), conv, "json")
        [record] = json.loads(exported[0])["conversations"]
        chain = {m["id"]: m["metadata"].get("earlier_versions") for m in record["memories"]}
        assert chain[asked["id"]] == [{"content": "Book a table for four at eight", "written_at": asked["created_at"]}]
        assert chain[after["id"]] is None
        refused = await alice.call("POST", f"/turns/{asked['id']}/regenerate", {"content": "x"}, expect=400)
        assert refused["field"] == "turn_id" and "not the assistant's" in refused["error"]
        assert (await bob.call("PUT", f"/turns/{asked['id']}", {"content": "mine"}, expect=404))["error"]
        blank = await alice.call("PUT", f"/turns/{asked['id']}", {"content": "  "}, expect=400)
        assert blank["field"] == "content"
        await alice.call("POST", f"/conversations/{conv}/end", {"summary": "booked"})
        closed = await alice.call("PUT", f"/turns/{asked['id']}", {"content": "too late"}, expect=409)
        assert conv in closed["error"]


async def test_rest_errors_speak_of_rest_not_of_mcp_tools_and_the_document_lists_every_status(
    settings: Settings,
) -> None:
    async with people(settings) as (alice, _, _):
        missing = str(uuid.uuid4())
        unknown = await alice.call("POST", f"/conversations/{missing}/turns", {"role": "user", "content": "hi"},
                                   expect=404)
        assert unknown == {"error": f"conversation_id: no conversation {missing} exists; GET {PREFIX}/conversations "
                                    f"lists the ids, and POST {PREFIX}/conversations starts one.",
                           "field": "conversation_id"}
        created = await alice.call("POST", "/conversations", {"name": "done"}, expect=201)
        await alice.call("POST", f"/conversations/{created['id']}/end", {"summary": "over"})
        closed = await alice.call("POST", f"/conversations/{created['id']}/turns", {"role": "user", "content": "hi"},
                                  expect=409)
        assert "init_conversation" not in closed["error"] and f"POST {PREFIX}/conversations" in closed["error"]
        assert closed["field"] == "conversation_id"
        job = await alice.call("GET", "/jobs/999999", expect=404)
        assert job["field"] == "job_id"
        for path in alice.document["paths"].values():  # type: ignore[index]
            for operation in path.values():
                assert {"403", "405", "409", "413", "415"} <= set(operation["responses"])


async def test_a_streamed_turn_reads_whatever_became_of_it_and_ending_its_conversation_aborts_it(
    settings: Settings,
) -> None:
    async with people(settings) as (alice, _, _):
        conv = (await alice.call("POST", "/conversations", {"name": "stream"}, expect=201))["id"]
        first = (await alice.call("POST", f"/conversations/{conv}/turns", {"role": "assistant", "status": "open"},
                                  expect=201))["id"]
        await alice.call("PATCH", f"/turns/{first}", {"append": "Half a rep"})
        assert (await alice.call("GET", f"/turns/{first}"))["status"] == "open"
        await alice.call("POST", f"/turns/{first}/abort")
        aborted = await alice.call("GET", f"/turns/{first}")
        assert (aborted["status"], aborted["content"]) == ("aborted", "Half a rep")

        second = (await alice.call("POST", f"/conversations/{conv}/turns", {"role": "assistant", "status": "open"},
                                   expect=201))["id"]
        await alice.call("PATCH", f"/turns/{second}", {"append": "The whole reply."})
        await alice.call("POST", f"/turns/{second}/commit", {})
        committed = await alice.call("GET", f"/turns/{second}")
        assert (committed["id"], committed["content"], committed["role"]) == (second, "The whole reply.", "assistant")

        third = (await alice.call("POST", f"/conversations/{conv}/turns", {"role": "assistant", "status": "open"},
                                  expect=201))["id"]
        await alice.call("PATCH", f"/turns/{third}", {"append": "Cut off by the"})
        await alice.call("POST", f"/conversations/{conv}/end", {"summary": "done"})
        settled = await alice.call("GET", f"/turns/{third}")
        assert (settled["status"], settled["content"]) == ("aborted", "Cut off by the")
        late = await alice.call("PATCH", f"/turns/{third}", {"append": " end"}, expect=409)
        assert "was aborted already" in late["error"]
        assert (await alice.call("GET", f"/turns/{uuid.uuid4()}", expect=404))["field"] == "turn_id"

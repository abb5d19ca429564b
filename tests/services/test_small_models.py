"""What a real small model (Qwen2.5-Coder 1.5B and 0.5B behind Ollama's API, bench/README.md #84)
does that the scripted fake never did, answered: replies that run on, cut by their token cap;
tool calls written as text; the same search asked again; turns whose speaker the model could not
see; answers that ramble, or that memory does not hold. Each reply below is one a small model
gives, scripted through the fake Ollama; both backends."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import pytest

from ollama_mcp.app import App
from ollama_mcp.config import Settings
from ollama_mcp.inputs.conversations import new_conversation
from ollama_mcp.inputs.turns import parse_turns
from tests.conftest import Database
from tests.support.agent import human, tool_call
from tests.support.facts import ended_with_facts, fact, fact_rows, facts_jobs, reply, run_jobs
from tests.support.fake_ollama import FakeOllama
from tests.support.mcp_client import call

pytestmark = pytest.mark.anyio


def options(fake_ollama: FakeOllama) -> list[dict[str, Any]]:
    return [r.body.get("options") or {} for r in fake_ollama.chat_requests()]


async def test_every_chat_call_caps_its_reply_and_only_the_facts_list_is_penalized_for_repeats(
    app: App, settings: Settings, fake_ollama: FakeOllama
) -> None:
    await ended_with_facts(app, fake_ollama, reply(fact("Caroline", "moved to", "Boston", 1)), "I moved to Boston")
    conv = await app.conversations.start(new_conversation("trip"))
    await app.transcript.add_messages(conv.id, parse_turns("messages", [{"role": "user", "content": "Lisbon in May"}]))
    await app.conversations.end(conv.id)
    await run_jobs(app)
    async with human(settings, None) as (client, _):
        await call(client, "ask_agent", query="where did I go?")
    facts, summary, agent = options(fake_ollama)
    assert facts["num_predict"] == 1000 and summary["num_predict"] == 600 and agent["num_predict"] == 300
    assert all(o["temperature"] == 0.0 for o in (facts, summary, agent))
    assert (facts["repeat_penalty"], summary["repeat_penalty"], agent["repeat_penalty"]) == (1.1, 1.0, 1.0)


async def test_a_fact_the_model_repeats_in_one_reply_is_stored_once(
    app: App, db: Database, fake_ollama: FakeOllama
) -> None:
    looped = [fact("Melanie", "ran", "a charity race", 1)] * 9 + [fact("melanie", "Ran", "a  charity race", 1)]
    await ended_with_facts(app, fake_ollama, json.dumps({"facts": [*looped, fact("Melanie", "has", "two kids", 2)]}),
                           "I ran a charity race", "my two kids cheered")
    assert [content for content, _, _, _ in fact_rows(db)] == ["Melanie ran a charity race", "Melanie has two kids"]


async def test_the_facts_request_shows_the_model_no_value_it_could_copy(
    app: App, fake_ollama: FakeOllama
) -> None:
    await ended_with_facts(app, fake_ollama, json.dumps({"facts": []}), "I moved to Boston")
    system = fake_ollama.chat_requests()[0].body["messages"][0]["content"]
    assert "such as" not in system and "{" not in system and "lives in" not in system


async def test_a_facts_reply_cut_at_its_cap_keeps_the_facts_it_finished(
    app: App, db: Database, fake_ollama: FakeOllama
) -> None:
    whole = json.dumps({"facts": [fact("Caroline", "moved to", "Boston", 1, exclusive=True),
                                  fact("Caroline", "adopted", "a beagle", 2)]})
    cut = whole[: whole.index('"a beagle"') + 4]  # stopped inside the second fact
    await ended_with_facts(app, fake_ollama, "", "I moved to Boston", "I adopted a beagle")
    assert facts_jobs(db)[0][0] == "queued"  # (the empty reply: not JSON)
    fake_ollama.enqueue_chat({"role": "assistant", "content": cut, "_done_reason": "length"})
    db.rows("UPDATE jobs SET run_after = '2000-01-01' WHERE kind = 'facts'")
    await run_jobs(app)
    assert [state for state, _ in facts_jobs(db)] == ["done"]
    assert [content for content, _, _, _ in fact_rows(db)] == ["Caroline moved to Boston"]


async def test_a_facts_reply_cut_before_any_fact_says_the_cap_and_stores_nothing(
    app: App, db: Database, fake_ollama: FakeOllama
) -> None:
    cut = {"role": "assistant", "content": '{"facts": [{"subject": "Caroline", "predi', "_done_reason": "length"}
    await ended_with_facts(app, fake_ollama, "", "I moved to Boston")
    fake_ollama.enqueue_chat(cut)
    db.rows("UPDATE jobs SET run_after = '2000-01-01' WHERE kind = 'facts'")
    await run_jobs(app)
    state, reason = facts_jobs(db)[0]
    assert state == "queued" and reason == (
        "Chat model 'qwen2.5:3b' was stopped at 1000 tokens (num_predict) before it listed a fact."
    )
    assert fact_rows(db) == []


async def test_a_summary_cut_at_its_cap_keeps_its_summary_or_says_the_cap(
    app: App, db: Database, fake_ollama: FakeOllama
) -> None:
    summary = '{"summary": "Caroline moved to Boston.", "key_points": ["Boston", "a be'
    fake_ollama.enqueue_chat({"role": "assistant", "content": '{"summary": "Caroline mo', "_done_reason": "length"},
                             {"role": "assistant", "content": summary, "_done_reason": "length"})
    conv = await app.conversations.start(new_conversation("move"))
    await app.transcript.add_messages(conv.id, parse_turns("messages", [{"role": "user", "content": "I moved"}]))
    await app.conversations.end(conv.id)
    await run_jobs(app)
    [(state, reason)] = db.rows("SELECT state, last_error FROM jobs WHERE kind = 'summarize'")
    assert state == "queued" and reason == (
        "Chat model 'qwen2.5:3b' was stopped at 600 tokens (num_predict) before its summary was written; "
        "a larger model, or a shorter conversation, is needed."
    )
    assert db.count("SELECT count(*) FROM memories WHERE kind = 'summary'") == 0
    db.rows("UPDATE jobs SET run_after = '2000-01-01' WHERE kind = 'summarize'")
    await run_jobs(app)
    assert db.rows("SELECT content FROM memories WHERE kind = 'summary'") == [
        ("Caroline moved to Boston.\n\nKey points:\n- Boston",)]


@pytest.mark.parametrize("written", [
    '{"name": "search_all_conversations", "arguments": {"query": "database"}}',
    '```json\n{"name": "search_all_conversations", "arguments": {"query": "database"}}\n```',
    '<tool_call>\n{"name": "search_all_conversations", "parameters": {"query": "database"}}\n</tool_call>',
])
async def test_a_tool_call_written_as_text_is_run_as_the_call_it_names(
    settings: Settings, db: Database, fake_ollama: FakeOllama, written: str
) -> None:
    fake_ollama.enqueue_chat({"role": "assistant", "content": written}, "You chose PostgreSQL.")
    async with human(settings, None) as (client, _):
        await call(client, "store_memory", content="We chose PostgreSQL for the database")
        answer = await call(client, "ask_agent", query="which database?")
    assert answer["response"] == "You chose PostgreSQL." and answer["tools_used"][-1] == "search_all_conversations"
    fed = fake_ollama.chat_requests()[-1].body["messages"][-1]
    assert fed["role"] == "tool" and "We chose PostgreSQL" in fed["content"]


async def test_an_answer_that_only_contains_json_stays_the_answer(
    settings: Settings, fake_ollama: FakeOllama
) -> None:
    said = 'Your config was {"name": "prod", "port": 5432}.'
    fake_ollama.enqueue_chat(said)
    async with human(settings, None) as (client, _):
        await call(client, "store_memory", content='The prod config: {"name": "prod", "port": 5432}')
        answer = await call(client, "ask_agent", query="what was my config?")
    assert answer["response"] == said and len(fake_ollama.chat_requests()) == 1


async def test_the_same_search_asked_again_is_refused_and_the_model_asked_to_answer_without_tools(
    settings: Settings, db: Database, fake_ollama: FakeOllama
) -> None:
    again = tool_call("search_all_conversations", query="database")
    fake_ollama.enqueue_chat(again, again, "Memory holds nothing on this.")
    async with human(settings, None) as (client, _):
        answer = await call(client, "ask_agent", query="which database?")
    assert answer["response"] == "Memory holds nothing on this."
    decisions = db.rows("SELECT tool, decision FROM agent_audit WHERE tool = 'search_all_conversations' ORDER BY id")
    assert [d for _, d in decisions] == ["ran", "ran", "refused"]  # (the search made for it, then the model's)
    asked = fake_ollama.chat_requests()
    assert [bool(r.body.get("tools")) for r in asked] == [True, True, False]
    assert asked[-1].body["messages"][-1]["content"] == (
        "Error: search_all_conversations was already called with these arguments; its result is above. "
        'Answer from it now, or say "Memory holds nothing on this."')


async def test_a_model_writing_the_search_made_for_it_until_its_cap_is_asked_to_answer(
    settings: Settings, db: Database, fake_ollama: FakeOllama
) -> None:
    made = '{"name": "search_all_conversations", "arguments": {"query": "which database?"}}'
    looped = f"{made} {made}\n{made} " + made[:30]  # as the 0.5B writes it, cut at its token cap
    fake_ollama.enqueue_chat({"role": "assistant", "content": looped, "_done_reason": "length"},
                             "You chose PostgreSQL.")
    async with human(settings, None) as (client, _):
        await call(client, "store_memory", content="We chose PostgreSQL for the database")
        answer = await call(client, "ask_agent", query="which database?")
    assert answer["response"] == "You chose PostgreSQL." and answer["note"] is None
    decisions = db.rows("SELECT decision FROM agent_audit WHERE tool = 'search_all_conversations' ORDER BY id")
    assert [d for (d,) in decisions] == ["ran", "refused", "refused", "refused"]
    assert [bool(r.body.get("tools")) for r in fake_ollama.chat_requests()] == [True, False]


async def test_a_call_written_where_an_answer_was_asked_leaves_the_answer_to_the_settling_call(
    settings: Settings, fake_ollama: FakeOllama
) -> None:
    made = '{"name": "search_all_conversations", "arguments": {"query": "which database?"}}'
    fake_ollama.enqueue_chat(made, f"{made} {made}", settle(True, "PostgreSQL"))
    async with human(settings, None) as (client, _):
        await call(client, "store_memory", content="We chose PostgreSQL for the database")
        answer = await call(client, "ask_agent", query="which database?")
    assert answer["response"] == "PostgreSQL" and answer["note"] is None
    [settling] = [r.body for r in fake_ollama.settle_requests()]
    assert [m["role"] for m in settling["messages"][-2:]] == ["tool", "user"]
    assert not any(m["role"] == "assistant" and m.get("content") for m in settling["messages"])  # no draft


async def test_a_recalled_turn_tells_the_model_who_said_it(
    settings: Settings, fake_ollama: FakeOllama
) -> None:
    fake_ollama.enqueue_chat("Caroline did.")
    async with human(settings, None) as (client, _):
        conv = (await call(client, "init_conversation", name="chat"))["conversation_id"]
        await call(client, "add_messages", conversation_id=conv, messages=[
            {"role": "user", "content": "I moved to Boston in May", "actor": 'Caroline "C"'},
            {"role": "assistant", "content": "How is Boston?"}])
        await call(client, "init_conversation", name="asking")
        await call(client, "ask_agent", query="who moved to Boston?", scope="all")
    said = json.dumps(fake_ollama.chat_requests()[-1].body["messages"])
    assert 'kind=\\"message\\" speaker=\\"Caroline C\\">I moved to Boston in May' in said
    assert 'speaker=\\"assistant\\">How is Boston?' in said


def settle(in_memory: bool, answer: str) -> dict[str, Any]:
    return {"role": "assistant", "content": json.dumps({"in_memory": in_memory, "answer": answer}), "_settle": True}


async def test_a_rambling_answer_is_settled_to_the_answer_alone(settings: Settings, fake_ollama: FakeOllama) -> None:
    draft = "To answer this question, I searched the memories. The relevant memory says her pets are Luna and Oliver."
    fake_ollama.enqueue_chat(draft, settle(True, "Luna and Oliver"))
    async with human(settings, None) as (client, _):
        await call(client, "store_memory", content="Her pets are Luna and Oliver")
        answer = await call(client, "ask_agent", query="what are her pets called?")
    assert answer["response"] == "Luna and Oliver"
    [settling] = [r.body for r in fake_ollama.settle_requests()]
    assert settling["messages"][-2:] == [{"role": "assistant", "content": draft}, {"role": "user", "content": (
        "Reply JSON: in_memory (true when the memories found state the answer to my question, false when they do "
        "not), answer (the answer alone, briefly).")}]
    assert settling["options"]["num_predict"] == 200 and not settling.get("tools")


async def test_an_answer_the_model_says_memory_does_not_hold_is_said_so_plainly(
    settings: Settings, fake_ollama: FakeOllama
) -> None:
    fake_ollama.enqueue_chat("You went to the moon in 1969.", settle(False, "the moon in 1969"))
    async with human(settings, None) as (client, _):
        await call(client, "store_memory", content="The standup moved to Tuesday")
        answer = await call(client, "ask_agent", query="when did I go to the moon?")
    assert answer["response"] == "Memory holds nothing on this."
    assert answer["note"] == (
        'The model answered "You went to the moon in 1969.", then said the memories do not state it.')


@pytest.mark.parametrize("settling", ["not json", '{"answer": "no flag"}', '{"in_memory": true, "answer": ""}'])
async def test_a_settling_reply_without_the_flag_or_an_answer_leaves_the_models_own(
    settings: Settings, fake_ollama: FakeOllama, settling: str
) -> None:
    fake_ollama.enqueue_chat("The standup is on Tuesday.", {"role": "assistant", "content": settling, "_settle": True})
    async with human(settings, None) as (client, _):
        await call(client, "store_memory", content="The standup moved to Tuesday")
        answer = await call(client, "ask_agent", query="when is the standup?")
    assert answer["response"] == "The standup is on Tuesday."


async def test_an_earlier_runs_tool_steps_are_never_search_results_for_the_agent(
    settings: Settings, fake_ollama: FakeOllama
) -> None:
    fake_ollama.enqueue_chat(tool_call("get_current_time"), "It is late in the evening.", "Still late.")
    async with human(settings, None) as (client, _):
        conv = (await call(client, "init_conversation", name="time"))["conversation_id"]
        for _ in range(2):
            await call(client, "ask_agent", query="what time is it?", conversation_id=conv)
    found = fake_ollama.chat_requests()[-1].body["messages"][-1]
    assert found["tool_name"] == "search_memories"
    assert "It is late in the evening." in found["content"] and "what time is it?" in found["content"]
    assert "(calls get_current_time)" not in found["content"] and 'speaker="get_current_time"' not in found["content"]


@pytest.mark.parametrize("settling", [
    {"_delay": 3, "role": "assistant", "content": '{"in_memory": true, "answer": "late"}', "_settle": True},
    {"_status": (500, "model runner crashed"), "_settle": True},
])
async def test_a_settling_call_that_times_out_or_fails_leaves_the_models_answer(
    settings: Settings, fake_ollama: FakeOllama, settling: dict[str, Any]
) -> None:
    fake_ollama.enqueue_chat("The standup is on Tuesday.", settling)
    async with human(replace(settings, agent_deadline=1.0, chat_timeout=10), None) as (client, _):
        await call(client, "store_memory", content="The standup moved to Tuesday")
        answer = await call(client, "ask_agent", query="when is the standup?")
    assert answer["response"] == "The standup is on Tuesday."


async def test_an_answer_no_memory_read_states_becomes_memory_holds_nothing(
    settings: Settings, fake_ollama: FakeOllama
) -> None:
    fake_ollama.enqueue_chat("You felt triumphant.", settle(True, "triumphant"))
    async with human(settings, None) as (client, _):
        await call(client, "store_memory", content="The standup moved to Tuesday")
        answer = await call(client, "ask_agent", query="how did I feel after the race?")
    assert answer["response"] == "Memory holds nothing on this."
    assert answer["note"] == 'The model answered "triumphant", which the memories it read do not state.'


@pytest.mark.parametrize("said", ["2", "Yes", "Twice, on 2023-07-06."])
async def test_a_yes_no_or_number_answer_is_the_models_to_work_out_and_stands(
    settings: Settings, fake_ollama: FakeOllama, said: str
) -> None:
    fake_ollama.enqueue_chat(said, settle(True, said))
    async with human(settings, None) as (client, _):
        await call(client, "store_memory", content="We went to the beach twice this summer")
        answer = await call(client, "ask_agent", query="how many times did we go to the beach?")
    assert answer["response"] == said


async def asked_after_a_chat_of_two(
    settings: Settings, fake_ollama: FakeOllama, question: str, draft: str, settled: str
) -> dict[str, Any]:
    """``question`` asked of every conversation after Melanie and Caroline talked (Melanie plays the
    clarinet, Caroline paints sunsets); the model answers ``draft`` and settles it to ``settled``."""
    fake_ollama.enqueue_chat(draft, settle(True, settled))
    async with human(settings, None) as (client, _):
        conv = (await call(client, "init_conversation", name="chat"))["conversation_id"]
        await call(client, "add_messages", conversation_id=conv, messages=[
            {"role": "user", "content": "I play the clarinet in a band", "actor": "Melanie"},
            {"role": "user", "content": "I love painting sunsets", "actor": "Caroline"}])
        await call(client, "init_conversation", name="asking")
        answer: dict[str, Any] = await call(client, "ask_agent", query=question, scope="all")
    return answer


async def test_an_answer_about_one_person_from_anothers_turn_says_whose_words_were_found(
    settings: Settings, db: Database, fake_ollama: FakeOllama
) -> None:
    answer = await asked_after_a_chat_of_two(
        settings, fake_ollama, "What instrument does Caroline play?", "Caroline plays the clarinet.", "the clarinet")
    assert answer["response"] == "Memory holds nothing on this. What was found are Melanie's words, not Caroline's."
    [(kept,)] = db.rows("SELECT content FROM memories WHERE role = 'assistant' AND actor = 'agent:qwen2.5:3b'")
    assert kept == answer["response"]


async def test_an_answer_resting_on_the_asked_persons_own_turn_stands(
    settings: Settings, fake_ollama: FakeOllama
) -> None:
    answer = await asked_after_a_chat_of_two(
        settings, fake_ollama, "What instrument does Melanie play?", "Melanie plays the clarinet.", "the clarinet")
    assert answer["response"] == "the clarinet"


async def test_an_answer_that_names_another_person_than_the_one_asked_about_says_so(
    settings: Settings, fake_ollama: FakeOllama
) -> None:
    answer = await asked_after_a_chat_of_two(
        settings, fake_ollama, "Where does Caroline play?", "Melanie paints sunsets; Caroline plays in a band.",
        "Melanie, in a band")
    assert answer["response"] == "Memory holds nothing on this. What was found is about Melanie, not Caroline."


async def test_a_long_conversations_facts_are_asked_for_in_segments_a_small_model_reads_whole(
    app: App, fake_ollama: FakeOllama
) -> None:
    turns = [f"Day {n}: " + "we walked by the river and talked about the garden " * 9 for n in range(12)]  # 6,300
    await ended_with_facts(app, fake_ollama, reply(fact("Caroline", "walked by", "the river", 1)), *turns)
    asked = [r.body["messages"][-1]["content"] for r in fake_ollama.chat_requests() if r.body.get("format")]
    assert len(asked) == 3 and all(len(text) < 4200 for text in asked[:2])  # (4,000 and the lines' numbers)
    assert "Day 0:" in asked[0] and "Day 11:" in asked[1] and asked[2].startswith(asked[1])


async def test_a_segment_the_model_lists_no_fact_for_is_asked_once_more_naming_its_speakers(
    app: App, db: Database, fake_ollama: FakeOllama
) -> None:
    await ended_with_facts(app, fake_ollama, (reply(), reply(fact("Caroline", "moved to", "Boston", 1))),
                           "I moved to Boston", "since when?")
    first, second = (r.body["messages"][-1]["content"] for r in fake_ollama.chat_requests())
    restated = "\n\nThose are 2 lines of a conversation. List every fact they tell about caroline:"
    assert second.startswith(first + restated)
    assert [content for content, _, _, _ in fact_rows(db)] == ["Caroline moved to Boston"]
    assert [state for state, _ in facts_jobs(db)] == ["done"]


async def test_a_segment_listed_empty_twice_stores_no_fact_and_is_not_asked_a_third_time(
    app: App, db: Database, fake_ollama: FakeOllama
) -> None:
    await ended_with_facts(app, fake_ollama, (reply(), reply()), "ok", "bye")
    assert len(fake_ollama.chat_requests()) == 2 and fact_rows(db) == []
    assert facts_jobs(db) == [("done", None)]

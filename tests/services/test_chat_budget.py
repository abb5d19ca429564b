"""The ceiling on background chat-model work (OLLAMA_MCP_CHAT_CALLS_PER_HOUR): summaries,
compaction and facts make at most that many calls in any hour, across every process on the store;
the rest wait, nothing is dropped, and stats, doctor and the Health page say where it stands. The
fake Ollama counts the calls that reach it; an hour passing is the calls' and jobs' times moved
back an hour in the real database."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

import pytest

from ollama_mcp.app import App, open_app
from ollama_mcp.config import Settings
from ollama_mcp.errors import ChatBudgetSpent, ConfigError
from ollama_mcp.inputs.context import job_id, work_request
from ollama_mcp.inputs.conversations import new_conversation
from ollama_mcp.inputs.memories import note as new_note
from ollama_mcp.services import doctor
from tests.conftest import Database
from tests.support.fake_ollama import FakeOllama

pytestmark = pytest.mark.anyio


async def ended_conversations(app: App, count: int) -> list[str]:
    """``count`` conversations with a note each, ended without a summary: a summarize job each."""
    ids = []
    for n in range(count):
        conversation = await app.conversations.start(new_conversation(f"chat {n}"))
        await app.memories.store(new_note(f"Note number {n} about the garden", conversation.id))
        await app.conversations.end(conversation.id)
        ids.append(conversation.id)
    return ids


async def run_jobs(app: App) -> None:
    while await app.jobs.run_once():
        pass


def summaries(db: Database) -> int:
    return db.count("SELECT count(*) FROM memories WHERE kind = 'summary'")


def summarize_jobs(db: Database) -> list[tuple[Any, ...]]:
    return db.rows("SELECT state, attempts, last_error FROM jobs WHERE kind = 'summarize' ORDER BY id")


def an_hour_passes(db: Database) -> None:
    """Every call made so far is now more than an hour old, and every waiting job is due."""
    for call_id, at in db.rows("SELECT id, at FROM chat_calls"):
        db.rows("UPDATE chat_calls SET at = ? WHERE id = ?", "2000" + at[4:], call_id)
    db.rows("UPDATE jobs SET run_after = '2000-01-01T00:00:00.000000Z' WHERE state = 'queued'")


async def test_background_work_makes_at_most_the_hours_budget_of_calls_and_the_rest_waits(
    settings: Settings, db: Database, fake_ollama: FakeOllama
) -> None:
    async with open_app(replace(settings, chat_calls_per_hour=2), background=False) as app:
        await ended_conversations(app, 5)
        await run_jobs(app)
        assert len(fake_ollama.chat_requests()) == 2 and summaries(db) == 2
        waiting = [row for row in summarize_jobs(db) if row[0] == "queued"]
        assert len(waiting) == 3
        assert waiting == [("queued", 0, None)] * 3  # not even claimed: no attempt used, no error

        assert await app.jobs.run_once() is False  # nothing is claimed while the budget is spent

        an_hour_passes(db)
        await run_jobs(app)
        assert len(fake_ollama.chat_requests()) == 4 and summaries(db) == 4

        an_hour_passes(db)
        await run_jobs(app)
        assert len(fake_ollama.chat_requests()) == 5 and summaries(db) == 5
        assert [row[0] for row in summarize_jobs(db)] == ["done"] * 5  # nothing lost, nothing failed


async def test_a_job_needing_more_calls_than_the_hour_allows_finishes_and_the_next_waits(
    settings: Settings, db: Database, fake_ollama: FakeOllama
) -> None:
    async with open_app(replace(settings, chat_calls_per_hour=1), background=False) as app:
        long = await app.conversations.start(new_conversation("long"))
        for n in range(6):  # 6 x 4,000 characters: two segments of 20,000, two calls
            await app.memories.store(new_note(f"{n} " + "the garden plan in detail " * 154, long.id))
        await app.conversations.end(long.id)
        await ended_conversations(app, 1)
        await run_jobs(app)
        assert len(fake_ollama.chat_requests()) == 2 and summaries(db) == 1  # the long one, whole
        assert db.count("SELECT count(*) FROM jobs WHERE kind = 'summarize' AND state = 'queued'") == 1

        an_hour_passes(db)
        await run_jobs(app)
        assert len(fake_ollama.chat_requests()) == 3 and summaries(db) == 2


async def test_the_budget_refuses_a_call_past_it_saying_when_one_frees_up(settings: Settings) -> None:
    async with open_app(replace(settings, chat_calls_per_hour=1), background=False) as app:
        budget = app.jobs.budget
        assert budget is not None
        await budget.take("summary")
        with pytest.raises(ChatBudgetSpent) as spent:
            await budget.take("summary")
        state = await budget.state()
        assert state.used == 1 and state.next_at == spent.value.resume_at
        assert str(spent.value) == (
            "Background work made its 1 chat-model call of the last hour (OLLAMA_MCP_CHAT_CALLS_PER_HOUR); it waits"
            f" until {spent.value.resume_at[:19].replace('T', ' ')} UTC."
        )


async def test_two_processes_on_one_store_share_one_budget(
    settings: Settings, db: Database, fake_ollama: FakeOllama
) -> None:
    budgeted = replace(settings, chat_calls_per_hour=3)
    async with open_app(budgeted, background=False) as one, open_app(budgeted, background=False) as two:
        await ended_conversations(one, 6)
        for _ in range(6):  # the two take turns, as two Claude Desktop copies on one file would
            await one.jobs.run_once()
            await two.jobs.run_once()
        assert len(fake_ollama.chat_requests()) == 3 and summaries(db) == 3
        assert db.count("SELECT count(*) FROM jobs WHERE kind = 'summarize' AND state = 'queued'") == 3


async def test_a_budget_of_0_pauses_background_chat_work_and_stats_and_doctor_say_so(
    settings: Settings, db: Database, fake_ollama: FakeOllama
) -> None:
    paused = replace(settings, chat_calls_per_hour=0)
    async with open_app(paused, background=False) as app:
        await ended_conversations(app, 2)
        await run_jobs(app)
        assert fake_ollama.chat_requests() == [] and summaries(db) == 0
        assert [row[0] for row in summarize_jobs(db)] == ["queued", "queued"]

    lines = dict(doctor.stats(paused))
    assert lines["chat budget"] == (
        "paused (OLLAMA_MCP_CHAT_CALLS_PER_HOUR=0): 2 jobs (summaries, compaction, facts) waiting; "
        "set it above 0 to run them"
    )
    [check] = [c for c in await doctor.run_checks(paused) if c.name == "budget"]
    assert not check.ok and not check.blocking and check.detail == lines["chat budget"]

    async with open_app(settings, background=False) as app:  # the setting raised: the work runs
        await run_jobs(app)
    assert len(fake_ollama.chat_requests()) == 2 and summaries(db) == 2


async def test_a_requested_job_waiting_for_the_budget_says_why_when_followed(
    settings: Settings, db: Database, fake_ollama: FakeOllama
) -> None:
    async with open_app(replace(settings, chat_calls_per_hour=1), background=False) as app:
        first, second = await ended_conversations(app, 2)
        await run_jobs(app)  # the hour's one call: the first summary
        job = await app.work.request(work_request(second, "summarize"))
        await run_jobs(app)
        waiting = await app.work.job(job_id(job.id))
        assert waiting.state == "queued" and waiting.last_error is not None
        assert waiting.last_error.startswith(
            "Background work made its 1 chat-model call of the last hour (OLLAMA_MCP_CHAT_CALLS_PER_HOUR); it waits"
            " until "
        )
        an_hour_passes(db)
        assert (await app.work.job(job_id(job.id))).last_error is None  # a call is free: nothing to wait for
    async with open_app(replace(settings, chat_calls_per_hour=0), background=False) as app:
        job = await app.work.request(work_request(first, "compact"))
        assert (await app.work.job(job_id(job.id))).last_error == (
            "Background chat-model work is paused (OLLAMA_MCP_CHAT_CALLS_PER_HOUR=0); it waits until the setting"
            " allows calls."
        )


async def test_stats_and_doctor_show_this_hours_calls_and_when_the_next_may_be_made(
    settings: Settings, db: Database
) -> None:
    budgeted = replace(settings, chat_calls_per_hour=2)
    async with open_app(budgeted, background=False) as app:
        await ended_conversations(app, 3)
        await run_jobs(app)
    [(oldest,)] = db.rows("SELECT min(at) FROM chat_calls")
    line = dict(doctor.stats(budgeted))["chat budget"]
    frees = (datetime.fromisoformat(oldest) + timedelta(hours=1)).strftime("%Y-%m-%d %H:%M:%S")
    assert line == (
        "2 of 2 chat-model calls used in the last hour; 1 job (summaries, compaction, facts) waiting;"
        f" the next call may be made at {frees} UTC"
    )
    [check] = [c for c in await doctor.run_checks(budgeted) if c.name == "budget"]
    assert check.ok and check.detail == line


async def test_a_call_that_never_reached_ollama_is_given_back_to_the_budget(
    settings: Settings, db: Database, fake_ollama: FakeOllama
) -> None:
    async with open_app(replace(settings, chat_calls_per_hour=1), background=False) as app:
        await ended_conversations(app, 1)
        fake_ollama.stop()
        await run_jobs(app)
        [(state, _, error)] = summarize_jobs(db)
        assert state == "queued" and "not reachable" in error
        assert db.count("SELECT count(*) FROM chat_calls") == 0  # the hour's one call is still there to use


@pytest.mark.parametrize("bad", ["-1", "2.5", "lots", "100001"])
def test_a_budget_that_is_not_a_whole_number_is_refused_naming_the_setting(bad: str) -> None:
    with pytest.raises(ConfigError) as refused:
        Settings.from_env({"HOME": "/tmp", "OLLAMA_MCP_CHAT_CALLS_PER_HOUR": bad})
    assert str(refused.value) == (
        f"OLLAMA_MCP_CHAT_CALLS_PER_HOUR must be a whole number from 0 to 100,000, got {bad!r}."
    )


def test_the_budget_defaults_to_60_calls_an_hour() -> None:
    assert Settings.from_env({"HOME": "/tmp"}).chat_calls_per_hour == 60
    assert Settings.from_env({"HOME": "/tmp", "OLLAMA_MCP_CHAT_CALLS_PER_HOUR": "0"}).chat_calls_per_hour == 0

"""Time-aware memory (#18): when a memory happened (occurred_at), and the time a query names."""

from __future__ import annotations

import json
import sqlite3
import uuid
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from ollama_mcp.app import App, open_app
from ollama_mcp.config import Settings
from ollama_mcp.domain import SearchFilters
from ollama_mcp.errors import InvalidInputError
from ollama_mcp.inputs.conversations import new_conversation
from ollama_mcp.inputs.memories import note as new_note
from ollama_mcp.inputs.memories import note_change
from ollama_mcp.inputs.search import search_request
from ollama_mcp.services import indexer
from ollama_mcp.storage.ranking import SearchTuning
from ollama_mcp.storage.sqlite.store import Store
from ollama_mcp.when import TimeWindow, in_window, query_window, times_named
from tests.conftest import Database, backfill, connect, eventually, sqlite_store_at
from tests.support.fake_ollama import FakeOllama
from tests.support.mcp_client import call, error

pytestmark = pytest.mark.anyio

REFERENCE = datetime(2023, 12, 20, 15, 0, tzinfo=UTC)  # a Wednesday


def day(value: str) -> str:
    return f"{value}T00:00:00.000000Z"


# -- the time a query names ---------------------------------------------------------------------


@pytest.mark.parametrize(("query", "start", "end"), [
    ("what did Sam do on 4 December 2023?", day("2023-12-04"), day("2023-12-05")),
    ("What painting did she show on October 13, 2023?", day("2023-10-13"), day("2023-10-14")),
    ("the 4th of May, 2023", day("2023-05-04"), day("2023-05-05")),
    ("deploy on 2023-12-04", day("2023-12-04"), day("2023-12-05")),
    ("Where did Joanna travel in July 2022?", day("2022-07-01"), day("2022-08-01")),
    ("what was I working on in March?", day("2023-03-01"), day("2023-04-01")),  # the latest March
    ("what did we plan in december", day("2023-12-01"), day("2024-01-01")),
    ("How often did we go to the beach in 2022?", day("2022-01-01"), day("2023-01-01")),
    ("what did we decide yesterday", day("2023-12-19"), day("2023-12-20")),
    ("what did we decide last week", day("2023-12-11"), day("2023-12-18")),
    ("what happened last weekend", day("2023-12-16"), day("2023-12-18")),
    ("what did I buy last month", day("2023-11-01"), day("2023-12-01")),
    ("the trip last year", day("2022-01-01"), day("2023-01-01")),
    ("what did I say three days ago", day("2023-12-17"), day("2023-12-18")),
    ("what did we start recently", day("2023-11-20"), day("2023-12-21")),
    # a bare day of the month: the latest one not after the reference, as for a month without a year
    ("what did we decide on the 15th", day("2023-12-15"), day("2023-12-16")),
    ("the call on the 21st", day("2023-11-21"), day("2023-11-22")),
    ("what did we plan on the 31st?", day("2023-10-31"), day("2023-11-01")),  # November has no 31st
    ("my relationship status as of September 2023", None, day("2023-10-01")),
    ("what happened before April 10, 2023?", None, day("2023-04-10")),
    # a period counted back from a date is read against that date
    ("what did Maria do last weekend before April 10, 2023?", day("2023-04-08"), day("2023-04-10")),
    ("What did John do the week before August 3, 2023?", day("2023-07-27"), day("2023-08-03")),
    ("the puppy she got two weeks before August 11, 2023", day("2023-07-24"), day("2023-08-02")),
    ("shown on the Sunday before October 25, 2022", day("2022-10-23"), day("2022-10-24")),
    ("the day before 4 May 2023", day("2023-05-03"), day("2023-05-04")),
    ("the month before 4 May 2023", day("2023-04-04"), day("2023-05-04")),
    ("every plan since 2022", day("2022-01-01"), None),
    # a part of a month: those days, not all of it
    ("what did we do in early June 2023", day("2023-06-01"), day("2023-06-11")),
    ("the tournament at the beginning of November 2022", day("2022-11-01"), day("2022-11-11")),
    ("Which country was Tim visiting in the second week of November?", day("2023-11-08"), day("2023-11-15")),
    ("in mid-March 2023", day("2023-03-11"), day("2023-03-21")),
    ("the trip in late February", day("2023-02-21"), day("2023-03-01")),  # 28 days in 2023
    ("plans for the last week of August 2023", day("2023-08-25"), day("2023-09-01")),
    ("my status as of the end of May 2023", None, day("2023-06-01")),
    ("every run since early June", day("2023-06-01"), None),
    # Ways people name a time that the dev conversations the ranking was tuned on never use (#56
    # item 5: dated questions must not lean on that half's phrasing). Seasons, as meteorologists
    # count them in the northern hemisphere (REFERENCE is Wednesday 20 December 2023)
    ("what did we do last summer", day("2023-06-01"), day("2023-09-01")),  # the latest one over
    ("the hikes this fall", day("2023-09-01"), day("2023-12-01")),
    ("the trip in the summer of 2022", day("2022-06-01"), day("2022-09-01")),
    ("skiing in winter 2023", day("2022-12-01"), day("2023-03-01")),  # named by the year of its January
    ("what did I plant in the spring", day("2023-03-01"), day("2023-06-01")),  # the latest one begun
    # quarters and thirds of a year
    ("our revenue in Q3 2023", day("2023-07-01"), day("2023-10-01")),
    ("the second quarter of 2022", day("2022-04-01"), day("2022-07-01")),
    ("what did I read in early 2023", day("2023-01-01"), day("2023-05-01")),
    ("the move in mid-2022", day("2022-05-01"), day("2022-09-01")),
    ("plans for the end of 2022", day("2022-09-01"), day("2023-01-01")),
    ("my job by the end of 2022", None, day("2023-01-01")),
    # ranges: from the first one's start to the end of the last
    ("what happened between June and July 2023", day("2023-06-01"), day("2023-08-01")),
    ("from November 2022 to February", day("2022-11-01"), day("2023-03-01")),
    ("the classes from May to June", day("2023-05-01"), day("2023-07-01")),
    ("the house we rented between 2019 and 2021", day("2019-01-01"), day("2022-01-01")),
    # counted back from now
    ("what did we decide the week before last", day("2023-12-04"), day("2023-12-11")),
    ("the weekend before last", day("2023-12-09"), day("2023-12-11")),
    ("the month before last", day("2023-10-01"), day("2023-11-01")),
    ("what did she say a fortnight ago", day("2023-12-02"), day("2023-12-11")),
    ("what did I buy the previous month", day("2023-11-01"), day("2023-12-01")),
    ("the prior week", day("2023-12-11"), day("2023-12-18")),
    ("the race in mid-July", day("2023-07-11"), day("2023-07-21")),
])
def test_a_query_naming_a_time_gets_that_window(query: str, start: str | None, end: str | None) -> None:
    window = query_window(query, REFERENCE)
    assert window is not None
    assert (window.start, window.end) == (start, end)


@pytest.mark.parametrize("query", [
    "meeting on 31 February 2023",  # no such day: searched without a window, never an error
    "I may go to the park",  # "may" is a month only beside a day, a year or "in"
    "call March about the invoice",
    "the 2000 calories plan",
    "we were down 10 in the 4th quarter",
    "what happened on the 32nd",
    "what do I like",
    "between 2022 and 2019",  # a range that ends before it starts is no time at all
    "the fall of the Roman empire",
    "between the summer and winter courses",
])
def test_a_query_naming_no_possible_time_gets_no_window(query: str) -> None:
    assert query_window(query, REFERENCE) is None


def test_absolute_dates_leave_the_keywords_and_relative_words_stay() -> None:
    dated = query_window("what did Sam cook on 4 December 2023?", REFERENCE)
    assert dated is not None and dated.keyword_text.split() == ["what", "did", "Sam", "cook", "on", "?"]
    part = query_window("what did Sam cook in the second week of November?", REFERENCE)
    assert part is not None and part.keyword_text.split() == ["what", "did", "Sam", "cook", "in", "?"]
    relative = query_window("what did Sam cook last weekend", REFERENCE)
    assert relative is not None and relative.keyword_text == "what did Sam cook last weekend"
    before = query_window("status as of September 2023", REFERENCE)
    assert before is not None and before.keyword_text.split() == ["status"]
    counted = query_window("what did John do the week before August 3, 2023 with his kids", REFERENCE)
    assert counted is not None and counted.keyword_text.split() == ["what", "did", "John", "do", "with", "his", "kids"]
    season = query_window("What state did Joanna visit in summer 2021?", REFERENCE)  # memories say "last summer"
    assert season is not None and season.keyword_text == "What state did Joanna visit in summer 2021?"
    quarter = query_window("our revenue in Q3 2023", REFERENCE)
    assert quarter is not None and quarter.keyword_text.split() == ["our", "revenue", "in"]


def speaks_of(window: TimeWindow, occurred_at: str, text: str) -> bool:
    return in_window(window, occurred_at, times_named(text, occurred_at))


def test_a_memory_speaks_of_the_day_its_own_words_name_relative_to_when_it_happened() -> None:
    window = query_window("what was Sam doing on 4 December?", REFERENCE)
    assert window is not None
    said_next_day = "2023-12-05T09:00:00.000000Z"
    assert speaks_of(window, said_next_day, "Sam: I went hiking yesterday with the dog")
    assert not speaks_of(window, said_next_day, "Sam: I went hiking with the dog")
    assert not speaks_of(window, "2023-12-07T09:00:00.000000Z", "Sam: I went hiking yesterday")
    assert speaks_of(window, "2023-12-04T22:00:00.000000Z", "anything at all")
    august = query_window("When did John meet his teammates on 15 August 2023?", REFERENCE)
    assert august is not None
    assert speaks_of(august, "2023-08-17T19:54:00.000000Z", "John: I met back up with my teammates on the 15th!")
    assert not speaks_of(august, "2023-09-17T19:54:00.000000Z", "John: I met back up with my teammates on the 15th!")
    early_may = query_window("where did Ana move in early May 2023?", REFERENCE)
    assert early_may is not None
    assert not speaks_of(early_may, "2023-06-10T10:00:00.000000Z", "Ana: we moved at the end of May")
    assert speaks_of(early_may, "2023-06-10T10:00:00.000000Z", "Ana: we moved at the beginning of May")


def test_the_times_a_memory_names_are_kept_as_spans_read_against_when_it_was_said() -> None:
    said = "2023-12-05T09:00:00.000000Z"
    assert times_named("Sam: I went hiking yesterday with the dog", said) == (
        "2023-12-04T00:00:00.000000Z/2023-12-05T00:00:00.000000Z"
    )
    assert times_named("Sam: in May 2023 and on 4 June 2023", said) == (
        "2023-05-01T00:00:00.000000Z/2023-06-01T00:00:00.000000Z"
        " 2023-06-04T00:00:00.000000Z/2023-06-05T00:00:00.000000Z"
    )
    assert times_named("Sam: I went hiking with the dog", said) == ""
    assert times_named("Sam: on 31 February 2023", said) == ""
    assert times_named("Ana: we went skiing last winter", "2023-05-01T09:00:00.000000Z") == (
        "2022-12-01T00:00:00.000000Z/2023-03-01T00:00:00.000000Z"
    )


async def test_an_upgraded_store_reads_again_the_times_its_memories_name_by_the_wider_grammar(
    db_path: Path, fake_ollama: FakeOllama
) -> None:
    sqlite_store_at(db_path, 16)
    conv, said = str(uuid.uuid4()), "2023-05-01T09:00:00.000000Z"
    with sqlite3.connect(db_path, isolation_level=None) as conn:
        conn.execute("INSERT INTO conversations (id, created_at) VALUES (?, '2023-05-01')", (conv,))
        for seq, text, spoken in [(1, "Ana: we went skiing last winter", ""),  # what the narrower grammar kept
                                  (2, "Ana: we went skiing yesterday", f"{day('2023-04-30')}/{day('2023-05-01')}")]:
            conn.execute(
                "INSERT INTO memories (seq, id, conversation_id, kind, content, content_hash, context, created_at,"
                " occurred_at, spoken_of) VALUES (?, ?, ?, 'note', ?, ?, ?, ?, ?, ?)",
                (seq, str(uuid.uuid4()), conv, text, f"h{seq}", text, said, said, spoken),
            )
    settings = Settings.from_env({"OLLAMA_MCP_DB": str(db_path), "OLLAMA_HOST": fake_ollama.url})
    async with open_app(settings, background=False) as app:
        unread = "SELECT count(*) FROM memories WHERE spoken_of IS NULL"
        assert sqlite3.connect(db_path).execute(unread).fetchone() == (2,)
        assert await app.indexer.times_step() is None
    assert sqlite3.connect(db_path).execute("SELECT spoken_of FROM memories ORDER BY seq").fetchall() == [
        (f"{day('2022-12-01')}/{day('2023-03-01')}",), (f"{day('2023-04-30')}/{day('2023-05-01')}",),
    ]


# -- occurred_at: stored, checked, filtered, carried ---------------------------------------------------


async def test_a_memory_remembers_when_it_happened_and_defaults_to_when_it_was_stored(app: App, db: Database) -> None:
    then = await app.memories.store(new_note("we adopted the cat", occurred_at="2021-06-05"))
    now = await app.memories.store(new_note("the cat likes tuna"))
    assert db.rows("SELECT content, occurred_at, created_at FROM memories ORDER BY seq") == [
        ("we adopted the cat", "2021-06-05T00:00:00.000000Z", then.memory.created_at),
        ("the cat likes tuna", now.memory.created_at, now.memory.created_at),
    ]


@pytest.mark.parametrize(("value", "says"), [
    ("next Tuesday", "is not an ISO 8601 date or time"),
    ("1899-12-31", "is before 1900"),
    ((datetime.now(UTC) + timedelta(days=3)).date().isoformat(), "is more than a day in the future"),
])
async def test_a_bad_occurred_at_is_refused_naming_the_field_and_stores_nothing(
    settings: Settings, db: Database, value: Any, says: str
) -> None:
    async with connect(settings) as client:
        text = await error(client, "store_memory", content="a dated note", occurred_at=value)
        assert f"occurred_at: {says}" in text
        turn = {"role": "user", "content": "hello", "occurred_at": value}
        text = await error(client, "add_messages", messages=[{"role": "user", "content": "hi"}, turn])
        assert f"messages[1].occurred_at: {says}" in text
    assert db.count("SELECT count(*) FROM memories") == 0


async def test_a_turn_recorded_late_keeps_when_it_was_said(settings: Settings, db: Database) -> None:
    async with connect(settings) as client:
        await call(client, "add_messages", messages=[
            {"role": "user", "content": "we shipped the release", "occurred_at": "2023-12-04T10:00:00+01:00"},
            {"role": "assistant", "content": "congratulations"},
        ])
        found = await call(client, "search_memories", query="shipped release")
    occurred = db.rows("SELECT content, occurred_at = created_at FROM memories ORDER BY seq")
    assert occurred == [("we shipped the release", 0), ("congratulations", 1)]
    assert db.rows("SELECT occurred_at FROM memories WHERE content = 'we shipped the release'") == [
        ("2023-12-04T09:00:00.000000Z",)
    ]
    first = found["results"][0]
    assert first["content"] == "we shipped the release" and first["occurred_at"] == "2023-12-04T09:00:00.000000Z"
    assert found["results"][1]["occurred_at"] is None  # said when stored: not repeated


async def test_a_revised_memory_keeps_when_it_happened_and_who_wrote_it(app: App) -> None:
    first = await app.memories.store(
        new_note("we met Sam at the harbour", occurred_at="2023-12-04T10:00:00Z"), actor="alex"
    )
    old, new = await app.memories.update(note_change(first.memory.id, "we met Sam at the old harbour", None, None))
    assert (new.memory.occurred_at, new.memory.actor) == ("2023-12-04T10:00:00.000000Z", "alex")
    assert new.memory.created_at > old.created_at  # the row is new; what it records is not
    found = await app.recall.search(search_request("harbour", since="2023-12-04", until="2023-12-05"))
    assert [h.memory.id for h in found.hits] == [new.memory.id]


async def test_since_and_until_filter_by_when_memories_happened_not_when_they_were_stored(app: App) -> None:
    await app.memories.store(new_note("the tea tasting in Kyoto", occurred_at="2019-04-02"))
    await app.memories.store(new_note("the tea order for the office"))
    old = await app.recall.search(search_request("tea", until="2020-01-01", top_k=10))
    assert [h.memory.content for h in old.hits] == ["the tea tasting in Kyoto"]
    recent = await app.recall.search(search_request("tea", since="2020-01-01", top_k=10))
    assert [h.memory.content for h in recent.hits] == ["the tea order for the office"]


async def test_occurred_at_survives_export_and_import_and_an_old_export_happened_when_stored(
    app: App, settings: Settings, another_database: Callable[[], Database]
) -> None:
    conv = await app.conversations.start(new_conversation("trip"))
    await app.memories.store(new_note("the ferry to Hydra", conv.id, occurred_at="2022-08-14T08:30:00Z"))
    await app.memories.store(new_note("pack sunscreen", conv.id))
    document = json.loads(json.dumps(await app.archive.export_all()))
    memories = document["conversations"][0]["memories"]
    assert [m["occurred_at"] for m in memories][0] == "2022-08-14T08:30:00.000000Z"
    del memories[1]["occurred_at"]  # as an export written before occurred_at existed
    target = another_database()
    async with open_app(target.settings(settings), background=False) as restored:
        await restored.archive.import_document(document)
    assert target.rows("SELECT content, occurred_at = created_at FROM memories ORDER BY seq") == [
        ("the ferry to Hydra", 0), ("pack sunscreen", 1)
    ]
    assert target.rows("SELECT occurred_at FROM memories WHERE content = 'the ferry to Hydra'") == [
        ("2022-08-14T08:30:00.000000Z",)
    ]
    memories[0]["occurred_at"] = "3000-01-01"
    with pytest.raises(InvalidInputError, match=r"conversations\[0\]\.memories\[0\]\.occurred_at: is more than a day"):
        await app.archive.import_document(document)


@pytest.mark.sqlite_only
async def test_memories_stored_before_the_upgrade_happened_when_they_were_stored(db_path: Path) -> None:
    sqlite_store_at(db_path, 10)
    with sqlite3.connect(db_path, isolation_level=None) as conn:
        conn.execute("INSERT INTO conversations (id, created_at) VALUES ('c1', '2026-01-01')")
        conn.execute("INSERT INTO memories (id, conversation_id, kind, content, content_hash, context, created_at)"
                     " VALUES ('m1', 'c1', 'note', 'an old note', 'h1', 'an old note', '2025-03-04T05:06:07.000000Z')")
    store = await Store.open(db_path)
    await store.aclose()
    with sqlite3.connect(db_path) as conn:
        assert conn.execute("SELECT occurred_at FROM memories").fetchall() == [("2025-03-04T05:06:07.000000Z",)]


async def test_an_upgraded_store_searches_its_earlier_memories_by_the_times_they_name(
    db_path: Path, fake_ollama: FakeOllama
) -> None:
    sqlite_store_at(db_path, 12)
    conv, ids = str(uuid.uuid4()), {1: str(uuid.uuid4()), 2: str(uuid.uuid4())}
    with sqlite3.connect(db_path, isolation_level=None) as conn:
        conn.execute("INSERT INTO conversations (id, created_at) VALUES (?, '2023-12-01')", (conv,))
        for seq, text, at in [(1, "went hiking with Sam", "2023-11-01T10:00:00.000000Z"),
                              (2, "Sam: we went hiking yesterday", "2023-12-05T09:00:00.000000Z")]:
            conn.execute(
                "INSERT INTO memories (seq, id, conversation_id, kind, content, content_hash, context, created_at,"
                " occurred_at) VALUES (?, ?, ?, 'note', ?, ?, ?, ?, ?)",
                (seq, ids[seq], conv, text, f"h{seq}", text, at, at),
            )
    settings = Settings.from_env({"OLLAMA_MCP_DB": str(db_path), "OLLAMA_HOST": fake_ollama.url})
    async with open_app(settings, background=False) as app:
        assert sqlite3.connect(db_path).execute("SELECT count(*) FROM memories WHERE spoken_of IS NULL").fetchone() == (
            2,
        )
        request = search_request("Sam hiking on 4 December 2023", conv, top_k=2)
        # its text read meanwhile
        assert [h.memory.id for h in (await app.recall.search(request)).hits] == [ids[2], ids[1]]
        assert await app.indexer.times_step() is None
        assert sqlite3.connect(db_path).execute("SELECT id, spoken_of FROM memories ORDER BY seq").fetchall() == [
            (ids[1], ""), (ids[2], f"{day('2023-12-04')}/{day('2023-12-05')}"),
        ]
        assert [h.memory.id for h in (await app.recall.search(request)).hits] == [ids[2], ids[1]]


# -- a query's time in the ranking -------------------------------------------------------------------


async def _hikes(app: App) -> dict[str, str]:
    conv = await app.conversations.start(new_conversation("hikes"))
    stored = {}
    for text, when in [
        ("Sam and I went hiking in the hills, the hills were steep", "2023-06-01T10:00:00Z"),
        ("went hiking", "2023-12-04T10:00:00Z"),
        ("Sam went hiking in the hills today, lovely hills", "2023-03-01T10:00:00Z"),
        ("Sam: the hiking boots hurt after yesterday", "2023-12-05T09:00:00Z"),
    ]:
        stored[when[:10]] = (await app.memories.store(new_note(text, conv.id, occurred_at=when))).memory.id
    while await app.indexer.backfill_once():
        pass
    return stored


async def test_a_memory_of_the_day_a_query_names_rises_above_better_worded_ones(app: App) -> None:
    ids = await _hikes(app)
    plain = await app.recall.search(search_request("Sam hiking hills", top_k=4))
    assert plain.hits[0].memory.id != ids["2023-12-04"]
    dated = await app.recall.search(search_request("Sam hiking hills on 4 December 2023", top_k=4))
    first_two = {h.memory.id for h in dated.hits[:2]}
    # The walk of 4 December, and the turn of the 5th that calls it "yesterday".
    assert first_two == {ids["2023-12-04"], ids["2023-12-05"]}


async def test_memories_stored_before_times_were_kept_are_found_by_them_once_read(
    app: App, db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    ids = await _hikes(app)
    db.rows("UPDATE memories SET spoken_of = NULL")  # as the upgrade leaves the memories stored before it
    query = search_request("Sam hiking hills on 4 December 2023", top_k=4)
    first_two = {ids["2023-12-04"], ids["2023-12-05"]}
    # their text is read meanwhile
    assert {h.memory.id for h in (await app.recall.search(query)).hits[:2]} == first_two
    monkeypatch.setattr(indexer, "TIMES_BATCH", 3)
    assert await app.indexer.times_step() == indexer.TIMES_PAUSE_SECONDS  # a whole batch: more may wait
    assert db.count("SELECT count(*) FROM memories WHERE spoken_of IS NULL") == 1
    assert await app.indexer.times_step() is None  # the last one: done for good
    assert db.rows("SELECT id, spoken_of FROM memories WHERE spoken_of <> '' ORDER BY seq") == [
        (ids["2023-03-01"], f"{day('2023-03-01')}/{day('2023-03-02')}"),  # "today"
        (ids["2023-12-05"], f"{day('2023-12-04')}/{day('2023-12-05')}"),  # "yesterday", read against the 5th
    ]
    assert {h.memory.id for h in (await app.recall.search(query)).hits[:2]} == first_two


async def test_a_server_reads_the_times_of_memories_stored_before_they_were_kept_on_its_own(
    settings: Settings, db: Database
) -> None:
    async with open_app(settings, background=False) as app:
        await _hikes(app)
    db.rows("UPDATE memories SET spoken_of = NULL")  # as the upgrade leaves them
    unread = "SELECT count(*) FROM memories WHERE spoken_of IS NULL"

    async def all_read() -> bool:
        return db.count(unread) == 0

    async with open_app(settings):  # with its background work, as a server runs
        await eventually(all_read)
    assert db.count("SELECT count(*) FROM memories WHERE spoken_of <> ''") == 2  # "today" and "yesterday"


async def test_relative_words_in_a_query_are_read_against_the_reference_time_given(app: App) -> None:
    ids = await _hikes(app)
    request = search_request("Sam hiking hills last week", top_k=4, reference_time="2023-12-13T12:00:00Z")
    found = await app.recall.search(request)
    assert {h.memory.id for h in found.hits[:2]} == {ids["2023-12-04"], ids["2023-12-05"]}
    with pytest.raises(InvalidInputError, match="reference_time: is not an ISO 8601"):
        search_request("hiking last week", reference_time="last week")


async def test_an_impossible_date_in_a_query_is_searched_without_a_window(app: App) -> None:
    ids = await _hikes(app)
    # what "February 2023" would lift
    february = await app.memories.store(new_note("hiking again", occurred_at="2023-02-10"))
    while await app.indexer.backfill_once():
        pass
    found = await app.recall.search(search_request("Sam hiking hills on 31 February 2023", top_k=5))
    plain = await app.recall.search(search_request("Sam hiking hills 31 February 2023", top_k=5))
    assert [h.memory.id for h in found.hits] == [h.memory.id for h in plain.hits]
    assert found.hits[0].memory.id != february.memory.id
    lifted = await app.recall.search(search_request("Sam hiking hills on 10 February 2023", top_k=5))
    assert lifted.hits[0].memory.id == february.memory.id
    assert set(ids.values()) | {february.memory.id} >= {h.memory.id for h in found.hits}


async def test_without_the_time_weight_a_dated_query_ranks_by_its_other_words(app: App) -> None:
    ids = await _hikes(app)
    app.ranker.tuning = replace(SearchTuning(), time_weight=0)
    dated = await app.recall.search(search_request("Sam hiking hills on 4 December 2023", top_k=4))
    assert dated.hits[0].memory.id != ids["2023-12-04"]


async def test_a_dated_query_lifts_a_memory_of_that_day_from_far_down_the_candidates(app: App) -> None:
    conv = await app.conversations.start(new_conversation("many hikes"))
    for i in range(120):  # better worded, one a day from January 2022 (each its own session)
        happened = (datetime(2022, 1, 1, 10, tzinfo=UTC) + timedelta(days=i)).isoformat()
        await app.memories.store(new_note(f"Sam hiking in the hills, trail {i}", conv.id, occurred_at=happened))
    target = await app.memories.store(
        new_note(
            "went hiking, then cooked a long dinner with friends and watched a film about the sea until late",
            conv.id,
            occurred_at="2023-12-04T10:00:00Z",
        )
    )
    while await app.indexer.backfill_once():
        pass
    request = search_request("Sam hiking hills on 4 December 2023", conv.id, top_k=20)
    assert target.memory.id in [h.memory.id for h in (await app.recall.search(request)).hits]
    app.ranker.tuning = replace(SearchTuning(), window_depth=50)
    assert target.memory.id not in [h.memory.id for h in (await app.recall.search(request)).hits]


# -- memories that tell of the time a query names, later ---------------------------------------------

_NOVEMBER = [  # (key, text, when); the first stored first, so that its context is its own text
    ("castle", "I went to a castle during my trip to the UK last Friday", "2023-11-16T18:00:00Z"),
    ("yesterday", "a castle in the UK, we saw it yesterday", "2023-11-20T10:00:00Z"),  # the 19th: too late
    ("december", "a castle in the UK, we saw it last Friday", "2023-12-01T10:00:00Z"),  # 24 November
    ("january", "a castle in the UK, we saw it last Friday", "2024-01-12T10:00:00Z"),  # in January
    ("elsewhere", "my trip to the UK last Friday: a castle!", "2023-11-16T18:00:00Z"),  # another conversation
] + [  # better worded for the question than all of them: more than its lists hold
    (f"fair {i}", f"Tim was visiting a country fair, stall {i} of every country", f"2023-10-{i + 1:02d}T10:00:00Z")
    for i in range(14)
]
_WHERE_WAS_TIM = "Which country was Tim visiting in the second week of November?"


async def _november(app: App, fake_ollama: FakeOllama) -> tuple[str, dict[str, str]]:
    """``_NOVEMBER``'s memories by key: only a list of its own finds the castle, which shares no word
    with the question and is less near in meaning than the fairs the lists hold."""
    fake_ollama.concepts.update({"uk": "country"})  # near in meaning, as a real model has them
    conv = (await app.conversations.start(new_conversation("trips"))).id
    other = (await app.conversations.start(new_conversation("other trips"))).id
    ids = {
        key: (
            await app.memories.store(new_note(text, other if key == "elsewhere" else conv, occurred_at=when))
        ).memory.id
        for key, text, when in _NOVEMBER
    }
    await backfill(app)
    app.ranker.tuning = replace(SearchTuning(), window_depth=0)  # lists 12 deep
    return conv, ids


async def test_a_memory_telling_later_of_a_queried_week_is_found_without_sharing_its_words(
    app: App, fake_ollama: FakeOllama
) -> None:
    conv, ids = await _november(app, fake_ollama)
    request = search_request(_WHERE_WAS_TIM, conv, top_k=3, reference_time="2023-12-20T12:00:00Z")
    found = [h.memory.id for h in (await app.recall.search(request)).hits]
    assert ids["castle"] in found  # 16 November's "last Friday" is the 10th: in the second week
    assert not {ids["yesterday"], ids["december"], ids["january"], ids["elsewhere"]} & set(found)
    app.ranker.tuning = replace(app.ranker.tuning, told_weight=0)
    assert ids["castle"] not in [h.memory.id for h in (await app.recall.search(request)).hits]


async def test_a_queried_month_is_too_long_to_read_what_was_said_of_it_later(
    app: App, fake_ollama: FakeOllama
) -> None:
    conv, ids = await _november(app, fake_ollama)
    request = search_request("Which country was Tim visiting in November 2023?", conv, top_k=3)
    # 1 December's "last Friday" is 24 November: told of November, and read only when a month is short enough
    assert ids["december"] not in [h.memory.id for h in (await app.recall.search(request)).hits]
    app.ranker.tuning = replace(app.ranker.tuning, told_span_days=31)
    assert ids["december"] in [h.memory.id for h in (await app.recall.search(request)).hits]


async def test_what_happened_after_a_time_is_read_within_the_filters_earliest_first(app: App) -> None:
    chat = (await app.conversations.start(new_conversation("chat"))).id
    other = (await app.conversations.start(new_conversation("other"))).id
    stored = {}
    for key, conversation, when in [
        ("before", chat, "2023-11-14T23:59:59Z"),
        ("third", chat, "2023-11-20T10:00:00Z"),
        ("first", chat, "2023-11-15T00:00:00Z"),
        ("second", chat, "2023-11-15T09:00:00Z"),
        ("elsewhere", other, "2023-11-16T10:00:00Z"),
        ("after", chat, "2023-12-16T00:00:00Z"),
    ]:
        stored[key] = (await app.memories.store(new_note(f"the {key} one", conversation, occurred_at=when))).memory
    revised = (await app.memories.update(note_change(stored["second"].id, "the second one, yesterday", None, None)))[
        1
    ].memory
    start, end = day("2023-11-15"), day("2023-12-16")
    read = await app.store.moments_between(SearchFilters(conversation_id=chat), start, end, 10)
    assert list(read) == [stored["first"].seq, revised.seq, stored["third"].seq]  # not the superseded version
    # when it happened, and the day its "yesterday" names (read against that, not the revision's time)
    assert read[revised.seq] == (revised.occurred_at, f"{day('2023-11-14')}/{day('2023-11-15')}")
    assert list(await app.store.moments_between(SearchFilters(conversation_id=chat), start, end, 2)) == [
        stored["first"].seq, revised.seq,
    ]
    everywhere = await app.store.moments_between(SearchFilters(), start, end, 10)
    assert stored["elsewhere"].seq in everywhere


async def test_what_was_said_later_is_read_only_from_the_conversations_a_caller_may_search(
    app: App, fake_ollama: FakeOllama
) -> None:
    conv, ids = await _november(app, fake_ollama)
    request = search_request(_WHERE_WAS_TIM, top_k=3, reference_time="2023-12-20T12:00:00Z", everywhere=True)
    everywhere = [h.memory.id for h in (await app.recall.search(request)).hits]
    assert {ids["castle"], ids["elsewhere"]} <= set(everywhere)  # both told of the second week later
    # A caller who may search ``conv`` only: nothing of the other conversation, however far down.
    shared = replace(request, top_k=50, filters=replace(request.filters, conversation_ids=(conv,)))
    found = (await app.recall.search(shared)).hits
    assert ids["castle"] in [h.memory.id for h in found]
    assert {h.memory.conversation_id for h in found} == {conv}

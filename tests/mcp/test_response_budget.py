"""What a read tool sends fits a client's context: the whole JSON-RPC response of a search over
long memories, of an export page and of a memory read page by page, measured in bytes on the
real server's stdout, on both backends."""

from __future__ import annotations

import json
import random
from typing import Any

from tests.support.fake_ollama import FakeOllama
from tests.support.stdio import raw_server as _raw_server
from tests.support.stdio import read_reply as _read
from tests.support.stdio import send_rpc as _rpc

WORDS = (
    "river stone lantern orchard meadow harbour copper window thistle marble cedar hollow ember "
    "quarry saddle willow beacon pebble falcon"
).split()
# Claude Code keeps a tool result of up to about 25k tokens in context; a response of this many
# bytes is well under that even at 2.5 bytes a token.
RESPONSE_BYTES = 40_000


def long_text(seed: int, chars: int, needle: str, where: float) -> str:
    """``chars`` characters of words, with ``needle`` at ``where`` (a share of the length)."""
    rng = random.Random(seed)
    words: list[str] = []
    size = 0
    while size < chars:
        words.append(rng.choice(WORDS))
        size += len(words[-1]) + 1
    text = " ".join(words)[:chars]
    cut = text.rfind(" ", 0, int(chars * where))
    return f"{text[:cut]} {needle} {text[cut + 1:]}"[:chars]


class Session:
    """Raw JSON-RPC lines to the real server: each answer with its size in bytes."""

    def __init__(self, proc: Any) -> None:
        self.proc = proc
        self.next_id = 10

    def call(self, tool: str, **arguments: Any) -> tuple[dict[str, Any], int]:
        self.next_id += 1
        _rpc(self.proc, {"jsonrpc": "2.0", "id": self.next_id, "method": "tools/call",
                         "params": {"name": tool, "arguments": arguments}})
        answer = _read(self.proc, timeout=60)
        assert answer["id"] == self.next_id, answer
        size = len(json.dumps(answer, ensure_ascii=False, separators=(",", ":")).encode())
        result = answer["result"]
        assert not result.get("isError"), result["content"][0]["text"]
        assert _without_nulls(json.loads(result["content"][0]["text"])) == _without_nulls(result["structuredContent"])
        return result["structuredContent"], size


def _without_nulls(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_nulls(v) for k, v in value.items() if v is not None}
    return [_without_nulls(v) for v in value] if isinstance(value, list) else value


def test_a_search_over_long_memories_answers_with_their_matching_passages_within_the_budget(
    database_url: str, fake_ollama: FakeOllama
) -> None:
    with _raw_server(database_url, fake_ollama) as (proc, _):  # type: ignore[arg-type]
        s = Session(proc)
        s.call("init_conversation", name="long notes")
        texts = [long_text(i, 88_000, f"the kestrel report number {i}", 0.3 + 0.1 * i) for i in range(5)]
        ids = [s.call("store_memory", content=t)[0]["memory_id"] for t in texts]
        found, size = s.call("search_memories", query="kestrel report", top_k=5)
        assert size < RESPONSE_BYTES, f"a 5-hit search answered {size:,} bytes"
        assert sorted(h["memory_id"] for h in found["results"]) == sorted(ids)
        for hit in found["results"]:
            assert hit["length"] == 88_000
            assert "kestrel report" in hit["content"] and hit["content"].count("[…]") >= 1
            assert len(hit["content"]) <= 10_000 // 5
        assert "read_memory reads one whole" in found["notice"]

        pages, whole = 0, []
        first, size = s.call("read_memory", memory_id=ids[2])
        assert size < RESPONSE_BYTES and first["pages"] > 1
        whole.append(first["content"])
        for page in range(2, first["pages"] + 1):
            more, size = s.call("read_memory", memory_id=ids[2], page=page)
            assert size < RESPONSE_BYTES and more["page"] == page
            whole.append(more["content"])
            pages = page
        assert "".join(whole) == texts[2] and pages == first["pages"]


def test_export_pages_of_long_memories_stay_within_the_budget_and_cover_every_memory(
    database_url: str, fake_ollama: FakeOllama
) -> None:
    with _raw_server(database_url, fake_ollama) as (proc, _):  # type: ignore[arg-type]
        s = Session(proc)
        s.call("init_conversation", name="long notes")
        texts = [long_text(i, 88_000, "marker", 0.5) for i in range(3)]
        short = [f"short note {i} about the harbour" for i in range(150)]
        ids = [s.call("store_memory", content=t)[0]["memory_id"] for t in texts]
        for half in (short[:75], short[75:]):
            s.call("add_messages", messages=[{"role": "user", "content": t} for t in half])
        for fmt in ("markdown", "json"):
            first, size = s.call("export_conversation", format=fmt)
            assert size < RESPONSE_BYTES, f"a {fmt} export page answered {size:,} bytes"
            seen = json.dumps(first)
            for page in range(2, first["pages"] + 1):
                more, size = s.call("export_conversation", format=fmt, page=page)
                assert size < RESPONSE_BYTES, f"{fmt} page {page} answered {size:,} bytes"
                seen += json.dumps(more)
            assert all(i in seen for i in ids) and all(t in seen for t in short)
            assert seen.count("read_memory memory_id=") == 3


def test_a_query_of_star_or_nothing_lists_what_carries_the_tags_newest_first(
    database_url: str, fake_ollama: FakeOllama
) -> None:
    with _raw_server(database_url, fake_ollama) as (proc, _):  # type: ignore[arg-type]
        s = Session(proc)
        s.call("init_conversation", name="decisions")
        decided = [s.call("store_memory", content=c, tags=["decision"], occurred_at=f"2026-0{m}-01")[0]["memory_id"]
                   for m, c in ((1, "Use PostgreSQL for the team server"), (3, "Ship the wheel first"),
                                (2, "Keep SQLite as the default"))]
        s.call("store_memory", content="The office plant needs water", tags=["chore"])
        for query in ("", "*"):
            found, _ = s.call("search_memories", query=query, tags=["decision"], top_k=10)
            assert found["mode"] == "list"
            assert [h["memory_id"] for h in found["results"]] == [decided[1], decided[2], decided[0]]
            everywhere, _ = s.call("search_all_conversations", query=query, tags=["decision"], top_k=2)
            assert [h["memory_id"] for h in everywhere["results"]] == [decided[1], decided[2]]
        unrelated, _ = s.call("search_memories", query="zebra migration patterns", tags=["decision"])
        assert unrelated["mode"] == "hybrid"  # words that share no meaning still search, not list

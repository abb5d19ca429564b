"""The agent's answer, settled: the answer alone, or "Memory holds nothing on this." when the
model says the memories do not state it, when they do not, or when they are another person's.

Small models ramble, and told to say a fixed sentence when memory holds nothing, Qwen2.5-Coder
1.5B said it for every question (bench/README.md, #84). So after the model answers in its own
words, one more call under FINAL_SCHEMA asks it whether the memories state the answer, and the
answer alone. The 1.5B says they do for most questions they do not answer; two checks on the
words alone, never another model call, then turn such an answer into NOTHING_HELD:

- **Grounded**: the answer's own words (those the question does not already hold; not yes, no or
  a number, which a model works out rather than copies) must mostly (READ_SHARE) be in what the
  model read: its instructions, the conversation, the question and every tool result.
  "triumphed", said of a feeling no memory names, is not.
- **Whose word**: in a conversation of several people each turn says "I". Asked "What instrument
  does Caroline play?", a small model answers "clarinet" from Melanie's "I play the clarinet"
  (every one of LoCoMo's adversarial questions is of this kind). An answer about the one speaker
  the question names must rest on that speaker's own turns: when the memory holding most of its
  words is only another speaker's turn, or the answer itself names another speaker and not the
  one asked about, memory holds nothing on it about that person, and the answer says whose words
  were found. Nothing is decided when the question names no speaker or several, or when a memory
  as close is the asked person's turn, a note, a fact or a summary.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from typing import Any

from ollama_mcp.domain import Memory
from ollama_mcp.errors import OllamaMcpError
from ollama_mcp.folds import words
from ollama_mcp.ollama.client import OllamaClient
from ollama_mcp.ollama.cut_json import completed

log = logging.getLogger(__name__)

# The answer, in the product's words, when memory does not hold one.
NOTHING_HELD = "Memory holds nothing on this."
FINAL_SCHEMA = {
    "type": "object",
    "properties": {"in_memory": {"type": "boolean"}, "answer": {"type": "string"}},
    "required": ["in_memory", "answer"],
}
FINAL_QUESTION = (
    "Reply JSON: in_memory (true when the memories found state the answer to my question, false when they do "
    "not), answer (the answer alone, briefly)."
)
FINAL_TOKENS = 200
SEARCHES = frozenset({"search_memories", "search_all_conversations"})
# Of the answer's own words, somewhere in what the model read. Decided on conv-26's answers (the
# 1.5B's, two runs): at 1/3, 21-24 of 30 adversarial questions abstained; at 0.7, 25-27, at the
# cost of paraphrased answers (F1 0.205 -> 0.184). Live through MCP: 24 of 30 on conv-26, and 8 of
# 12 on conv-41, which the choice never saw (bench/README.md).
READ_SHARE = 0.7
RESTING_SHARE = 0.5  # of the answer's own words, in the one memory it rests on
_COMMON = frozenset(
    "a an the and or but of to in on at by for with about as from into is are was were be been being has have "
    "had do does did it its this that these those he she they them his her their i me my we our you your who "
    "what which when where why how not so very just also than then there here yes no".split()
)


async def settled(
    client: OllamaClient, model: str, messages: Sequence[dict[str, Any]], question: str, found: Sequence[Memory],
    *, num_ctx: int,
) -> tuple[str, str | None]:
    """The answer the model drafted (the last of ``messages``), settled by one more call under
    FINAL_SCHEMA and checked against what it read (``on_record``) when all the tools it called
    were searches: an answer drawn from another tool's result (the time, the conversations, a
    refusal) is the model's reading of it. A reply that is not the JSON asked for, or a call that fails,
    leaves the draft, checked the same way. With the answer, when it is not the model's: what
    the model had answered, for the answer's note (the user sees why, and what was set aside).
    With no draft (``messages`` ending in what the tools returned: the model wrote calls where an
    answer was asked), the settling call's answer is the answer, checked the same way."""
    draft = str(messages[-1].get("content") or "") if messages[-1].get("role") == "assistant" else ""
    answer = draft
    try:
        reply = await client.chat(
            model, [*messages, {"role": "user", "content": FINAL_QUESTION}],
            schema=FINAL_SCHEMA, num_ctx=num_ctx, num_predict=FINAL_TOKENS,
        )
        data = completed(reply.content)
        if isinstance(data, dict) and isinstance(data.get("in_memory"), bool):
            said = data.get("answer")
            if not data["in_memory"]:
                if not draft:
                    return NOTHING_HELD, "The model said the memories do not state the answer."
                return NOTHING_HELD, f'The model answered "{_clip(draft)}", then said the memories do not state it.'
            if isinstance(said, str) and said.strip():
                answer = said.strip()
    except OllamaMcpError as exc:  # the model answered; only the settling failed
        log.warning("ask_agent kept the model's own answer: settling it failed (%s)", exc)
    called = {call["function"]["name"] for m in messages for call in m.get("tool_calls") or ()}
    if not answer or not called <= SEARCHES:
        return answer, None
    read = [str(m.get("content") or "") for m in messages if m["role"] != "assistant"]
    checked = on_record(question, answer, read, found)
    if checked == answer:
        return answer, None
    return checked, f'The model answered "{_clip(answer)}", which the memories it read do not state.'


def _clip(text: str, limit: int = 200) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def on_record(question: str, answer: str, read: Sequence[str], found: Sequence[Memory]) -> str:
    """``answer``, or what to say instead when it does not rest on ``read`` (every text the
    model read) or rests on another speaker's turns among ``found`` (the memories its searches
    showed it) than the one the question names."""
    own = {w for w in _words(answer) - _words(question) if not w.isdigit()}
    if not own or answer.startswith(NOTHING_HELD):
        return answer
    seen = set().union(*map(_words, read)) if read else set()
    if len(own & seen) / len(own) < READ_SHARE:
        return NOTHING_HELD
    return _misattributed(question, answer, own, found) or answer


def _misattributed(question: str, answer: str, own: set[str], found: Sequence[Memory]) -> str | None:
    speakers = {m.actor for m in found if m.kind == "message" and m.actor}
    asked = _named(question, speakers)
    if len(asked) != 1:
        return None
    [person] = asked
    others = _named(answer, speakers) - asked
    if others and not _named(answer, asked):  # "The church was made by Caroline", asked what Melanie made
        return f"{NOTHING_HELD} What was found is about {', '.join(sorted(others))}, not {person}."
    share = {m.id: len(own & _words(m.content)) / len(own) for m in found}
    best = max(share.values(), default=0.0)
    resting = [m for m in found if share[m.id] == best]
    if best < RESTING_SHARE or any(m.kind != "message" or not m.actor or m.actor == person for m in resting):
        return None
    by = ", ".join(sorted({m.actor or "" for m in resting}))
    return f"{NOTHING_HELD} What was found are {by}'s words, not {person}'s."


def _named(text: str, speakers: set[str]) -> set[str]:
    return {s for s in speakers if re.search(rf"(?<!\w){re.escape(s)}(?!\w)", text, re.IGNORECASE)}


def _words(text: str) -> set[str]:
    """Its words as a search's folding reads them (``folds.words``), a plural's s dropped (so
    "bowls" finds "bowl"), the most common left out."""
    return {w[:-1] if len(w) > 3 and w.endswith("s") else w for w in words(text).split()} - _COMMON

"""The context handed to a model for a conversation (``build_context``, the agent's opening): its
rolling summary, its recent turns verbatim, the facts and memories recalled for its latest user
message, never over a token budget. What fits and how each part is shown is ``context``'s."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from ollama_mcp.domain import Conversation, Memory
from ollama_mcp.errors import InvalidInputError
from ollama_mcp.inputs.context import MAX_HISTORY, ContextRequest
from ollama_mcp.inputs.fields import MAX_TOP_K
from ollama_mcp.inputs.search import search_request
from ollama_mcp.services.context import (
    DATA_NOTICE,
    FACTS_NOTICE,
    MAX_CONTEXT_FACTS,
    BuiltContext,
    answered,
    as_chat_message,
    estimate_tokens,
    fit,
    recall_block,
    sees,
)
from ollama_mcp.services.recall import Recall
from ollama_mcp.services.summarizing import retention
from ollama_mcp.storage.protocols import Storage


class ContextBuilder:
    def __init__(self, store: Storage, recall: Recall) -> None:
        self._store = store
        self._recall = recall

    async def build(self, request: ContextRequest) -> BuiltContext:
        """The rolling summary, the recent messages verbatim and the memories recalled for the
        latest user message (or ``query``), never over ``token_budget`` (estimated tokens).
        Memories are recalled from every conversation unless ``recall_everywhere`` is False.

        ``participants`` (names: actors, or roles for turns without one) builds their view of a
        shared transcript: the turns they wrote, the turns addressed to everyone (no ``to``) and
        those addressed to one of them. Once any turn of the conversation was addressed to some
        participants only, a view leaves out the rolling summary and recalls notes only, since a
        summary may retell that turn.

        ``facts``: add the facts (kind ``fact``) most related to the latest user message (or
        ``query``), from every conversation unless ``recall_everywhere`` is False; without either,
        the conversation's newest facts. Recalled memories then leave facts out. A participant's
        view of a conversation with private turns has no facts (one may come from such a turn).

        What goes first when the budget is short: the latest message (it must fit: else an
        error), then the rolling summary, then facts, then recalled memories, then older messages,
        newest first. The order of the returned messages is the conversation's.
        """
        target, budget, window, names = (
            request.conversation_id, request.token_budget, request.recent_messages, request.participants
        )
        conversation = await self._store.get_conversation(target)
        private = False
        if names:
            private = await self._check_view(conversation, names)
            scan = await self._store.messages(target, MAX_HISTORY) if window else []
            recent = [m for m in scan if m.seq > conversation.summarized_through and sees(names, m)][-window:]
        else:
            recent = [m for m in await self._store.messages(target, window) if m.seq > conversation.summarized_through]
        latest_user = next((m for m in reversed(recent) if m.role == "user"), None)
        ask = request.query or (latest_user.content if latest_user else None)

        used = 0
        kept: list[Memory] = []
        if recent:
            latest_cost = estimate_tokens(recent[-1].content)
            if latest_cost > budget:
                raise InvalidInputError(
                    "token_budget", f"is {budget} tokens, but the latest message alone takes about {latest_cost}",
                    f"pass a token_budget of at least {latest_cost}",
                )
            kept, used = [recent[-1]], latest_cost
        summary_text = None
        if conversation.rolling_summary and not private:
            text = f"Summary of the earlier part of this conversation:\n{conversation.rolling_summary}"
            if used + estimate_tokens(text) <= budget:
                summary_text, used = text, used + estimate_tokens(text)
        known: list[Memory] = []
        if request.facts and not private:
            if ask:
                asked = search_request(ask, target, top_k=MAX_CONTEXT_FACTS, everywhere=request.recall_everywhere)
                outcome = await self._recall.search(replace(asked, filters=replace(asked.filters, kinds=("fact",))))
                candidates = [hit.memory for hit in outcome.hits]
            else:
                candidates = await self._store.current_facts(target, MAX_CONTEXT_FACTS)
            known, used = fit(candidates, FACTS_NOTICE, used, budget)
        recalled: list[Memory] = []
        if ask and request.recall_k:
            # Asked for as many more as the recent turns it holds: a recent turn ranked among the
            # best is already in the context, and must not take a recalled memory's place.
            asked = search_request(
                ask, target, top_k=min(request.recall_k + len(recent), MAX_TOP_K),
                threshold=request.recall_threshold, everywhere=request.recall_everywhere,
            )
            if private or request.facts:
                kinds = ("note",) if private else tuple(kind for kind in asked.filters.kinds if kind != "fact")
                asked = replace(asked, filters=replace(asked.filters, kinds=kinds))
            outcome = await self._recall.search(asked)
            # Turns are recalled too now: not those the context already holds as recent turns. A
            # fact said there and elsewhere too (a note of "remember: ..."), folded into one hit,
            # is recalled by its other place.
            # A statement a later one superseded stays out: the chat model reads lines, not marks,
            # and the current statement already stands where it ranked (services/superseding.py).
            held = {m.id for m in recent}
            found = [
                place for hit in outcome.hits if hit.superseded is None
                if (place := next((m for m in (hit.memory, *hit.also) if m.id not in held), None)) is not None
            ][: request.recall_k]
            recalled, used = fit(found, DATA_NOTICE, used, budget)
        for message in reversed(recent[:-1]):
            cost = estimate_tokens(message.content)
            if used + cost > budget:
                break
            kept.insert(0, message)
            used += cost

        kept = answered(kept)  # no tool turn whose call the window left out
        messages: list[dict[str, Any]] = []
        if summary_text:
            messages.append({"role": "system", "content": summary_text})
        if known:
            messages.append({"role": "system", "content": recall_block(known, FACTS_NOTICE)})
        if recalled:
            messages.append({"role": "system", "content": recall_block(recalled)})
        messages.extend(as_chat_message(m) for m in kept)
        return BuiltContext(messages, used, summary_text, recalled, kept, known)

    async def _check_view(self, conversation: Conversation, names: frozenset[str]) -> bool:
        """Whether some turn was addressed to some participants only (also one an ephemeral
        retention deleted since); a name the conversation has never seen (as writer or addressee)
        is an error listing those it has, unless turns were deleted (it may have been in those)."""
        seen = await self._store.participants(conversation.id)
        known = {p.name for p in seen}
        unknown = sorted(names - known)
        if unknown:
            messages = await self._store.messages(conversation.id, MAX_HISTORY)
            unknown = sorted(set(unknown) - {n for m in messages for n in m.metadata.get("to", ())})
        if unknown and retention(conversation) != "ephemeral":
            listed = ", ".join(sorted(known)) or "none yet"
            raise InvalidInputError(
                "participants", f"names {unknown[0]!r}, who neither wrote a turn of this conversation nor was sent one",
                f"pass participants it has (actors, or roles for turns without one): {listed}",
            )
        return conversation.metadata.get("private_turns") is True or any(p.addressed for p in seen)

"""A conversation over its lifetime: its transcript, the summaries the chat model writes of it
(at its end, and rolling ones as it grows), the context handed to a model, and its deletion
when it expires.

Messages are memories of kind ``message``: they share the store's one search, index, vector
and delete path with notes. Work that needs the chat model runs as jobs (``jobs.py``), so
nothing here ever makes a tool call wait for a summary.
"""

from __future__ import annotations

import logging
import math
import uuid
from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

from ollama_mcp import audit, inputs
from ollama_mcp.background import Step
from ollama_mcp.domain import (
    Conversation,
    Job,
    JobStatus,
    Memory,
    OpenTurn,
    Participant,
    format_timestamp,
    utc_now,
)
from ollama_mcp.errors import (
    ConfigError,
    ConversationNotFoundError,
    InvalidInputError,
    JobNotFoundError,
    MemoryNotFoundError,
    OllamaMcpError,
    TurnClosedError,
)
from ollama_mcp.services.archive import Archive
from ollama_mcp.services.context import (
    CHARS_PER_TOKEN,
    DATA_NOTICE,
    FACTS_NOTICE,
    MAX_CONTEXT_FACTS,
    MESSAGE_OVERHEAD_TOKENS,
    BuiltContext,
    answered,
    as_chat_message,
    estimate_tokens,
    fit,
    recall_block,
    sees,
)
from ollama_mcp.services.facts import ConversationFacts
from ollama_mcp.services.indexer import Indexer
from ollama_mcp.services.jobs import JobRunner
from ollama_mcp.services.memories import MemoryService
from ollama_mcp.services.summaries import Summarizer
from ollama_mcp.services.turns import RETRY_WINDOW, Turn, message_of, parse_turn, parse_turns, produced_of
from ollama_mcp.storage.protocols import Storage

log = logging.getLogger(__name__)

MAX_HISTORY = 500
SUMMARY_TOKENS = 1000  # hierarchical compaction condenses a rolling summary past this
# The turns one compaction job folds at most; a longer backlog (an imported or long-recorded chat)
# takes several jobs, each queuing the next, each within the chat-model budget.
COMPACT_AT_MOST = 1_000
MAX_TOKEN_BUDGET = 1_000_000


class ConversationLifecycle(Archive):
    """Transcript, summaries, compaction, context building and retention over ``MemoryService``."""

    def __init__(
        self,
        store: Storage,
        service: MemoryService,
        indexer: Indexer,
        jobs: JobRunner,
        summarizer: Summarizer | None,
        *,
        compact_messages: int = 50,
        compact_tokens: int = 8000,
        retention_days: float | None = None,
        facts: ConversationFacts | None = None,
        page_chars: int = 10_000,
    ) -> None:
        self._store = store
        self._facts = facts
        self._page_chars = page_chars
        self.service = service
        self._indexer = indexer
        self._jobs = jobs
        self._summarizer = summarizer
        self._compact_messages = compact_messages
        self._compact_tokens = compact_tokens
        self._retention_days = retention_days
        jobs.register("summarize", self._summarize_job)
        jobs.register("compact", self._compact_job)

    # -- transcript -----------------------------------------------------------------------------

    async def add_message(
        self,
        conversation_id: object,
        role: object,
        content: object,
        *,
        actor: object = None,
        tool_calls: Sequence[dict[str, Any]] = (),
        tool_call_id: str | None = None,
    ) -> Memory:
        """Append a message to an active conversation's transcript; it is embedded in the
        background, and a transcript past its thresholds is queued for compaction."""
        target = inputs.conversation_id("conversation_id", conversation_id)
        if target is None:
            raise InvalidInputError("conversation_id", "is required", "pass the conversation the message belongs to")
        turn = parse_turn("", {"role": role, "content": content, "actor": actor}, self.service.max_content_chars)
        # The agent's own tool calls, as its chat model made them: not a caller's input to check.
        message = replace(message_of(target, turn, utc_now()), tool_calls=tuple(tool_calls), tool_call_id=tool_call_id)
        with audit.recording("add_message", target, message.id, arguments=[turn.role, turn.content, turn.actor]):
            stored, _ = await self._store.insert_memory(message)
        self._indexer.added(seqs=[stored.seq])
        await self._maybe_compact(await self._store.get_conversation(target))
        return stored

    async def add_messages(
        self, conversation_id: object, messages: object, *, embed: bool = True
    ) -> tuple[list[Memory], bool]:
        """Record a client's turns, in order and in one transaction, in the given conversation
        (default: the current one, else a new one made current); returns (the messages, was_retry).
        The same turns sent again within RETRY_WINDOW are a retry and are not added twice.
        ``embed``: wait for their own vectors, as a store does (``Indexer.embed_turns``); else
        the background embeds them (a hook, which must return at once)."""
        turns = parse_turns("messages", messages, self.service.max_content_chars)
        return await self._record(conversation_id, turns, embed=embed)

    async def add_turn(self, conversation_id: str, turn: object) -> tuple[Memory, bool]:
        """One turn into a given conversation (the REST API's), its fields named as they are
        (``content``, not ``messages[0].content``); returns (the message, was_retry)."""
        if not isinstance(turn, dict):
            raise InvalidInputError("turn", "must be an object with role and content", "pass the turn as an object")
        stored, retry = await self._record(conversation_id, [parse_turn("", turn, self.service.max_content_chars)])
        return stored[0], retry

    async def _record(
        self, conversation_id: object, turns: list[Turn], *, embed: bool = True
    ) -> tuple[list[Memory], bool]:
        conversation = await self.service.resolve_conversation(conversation_id, create=True)
        assert conversation is not None, "create=True makes one"
        now = utc_now()  # one created_at for the batch: how a retry is told from the end of a longer one
        batch = [message_of(conversation.id, turn, now) for turn in turns]
        retry_since = format_timestamp(datetime.now(UTC) - RETRY_WINDOW)
        arguments = [[t.role, t.content, t.actor, *([list(t.to)] if t.to else [])] for t in turns]
        with audit.recording("add_messages", conversation.id, batch[0].id, arguments=arguments):
            stored, retry = await self._store.insert_messages(batch, retry_since)
        if not retry:
            if embed:
                await self._indexer.embed_turns(stored)
            self._indexer.added(seqs=[turn.seq for turn in stored])
            await self._maybe_compact(await self._store.get_conversation(conversation.id))
        return stored, retry

    # -- streamed turns ----------------------------------------------------------------------------

    async def open_turn(self, conversation_id: str, turn: object) -> OpenTurn:
        """Start a turn whose text will come in chunks (``append``), committed as a message of the
        same id (``commit``) or aborted. Checked as any turn, with empty text allowed."""
        if not isinstance(turn, dict):
            raise InvalidInputError("turn", "must be an object with role", "pass the turn as an object")
        fields = {k: v for k, v in turn.items() if k not in ("content", "tokens", "occurred_at")}
        if turn.get("content"):
            raise InvalidInputError("content", "must be empty when the turn is opened", "send the text with append")
        parse_turn("", {**fields, "content": "."}, self.service.max_content_chars)  # role, actor, to, model...
        with audit.recording("open_turn", conversation_id):
            return await self._store.open_turn(str(uuid.uuid4()), conversation_id, fields, utc_now())

    async def append(self, turn_id: object, chunk: object) -> OpenTurn:
        """Add ``chunk`` to a turn being written: live to the conversation's subscribers."""
        target = inputs.memory_id("turn_id", turn_id)
        if not isinstance(chunk, str) or not chunk:
            raise InvalidInputError("append", "must be a non-empty text", "send the next part of the reply")
        current = await self._store.get_open_turn(target)
        if len(current.content) + len(chunk) > self.service.max_content_chars:
            raise InvalidInputError(
                "append", f"would make the turn longer than {self.service.max_content_chars:,} characters",
                "commit it and continue in a new turn",
            )
        return await self._store.append_to_turn(target, chunk.replace("\x00", " "), utc_now())

    async def commit(self, turn_id: object, extra: dict[str, object]) -> Memory:
        """The turn's text as a transcript message with the turn's id (``extra``: tokens, model
        given at the end), in one transaction with removing the open turn; a commit sent twice
        returns the message."""
        target = inputs.memory_id("turn_id", turn_id)
        try:
            opened = await self._store.get_open_turn(target)
        except TurnClosedError as closed:
            if closed.state != "committed":
                raise
            return await self._store.get_memory(target)  # committed before: this is a retry
        if opened.state != "open":
            raise TurnClosedError(target, opened.state)
        turn = parse_turn("", {**opened.fields, **extra, "content": opened.content}, self.service.max_content_chars)
        message = replace(message_of(opened.conversation_id, turn, utc_now()), id=target)
        with audit.recording("commit_turn", opened.conversation_id, target):
            stored = await self._store.commit_turn(target, message)
        self._indexer.added(seqs=[stored.seq])
        await self._maybe_compact(await self._store.get_conversation(opened.conversation_id))
        return stored

    async def read_turn(self, turn_id: object) -> OpenTurn | Memory:
        """A turn by its id, whatever became of it: being written or aborted (the open turn, its
        text so far), or committed (the message)."""
        target = inputs.memory_id("turn_id", turn_id)
        try:
            return await self._store.get_open_turn(target)
        except TurnClosedError as closed:
            if closed.state != "committed":
                raise
            return await self._store.get_memory(target)

    async def abort(self, turn_id: object) -> OpenTurn:
        """Stop a turn being written: it is kept, marked aborted, and never becomes a message."""
        target = inputs.memory_id("turn_id", turn_id)
        opened = await self._store.get_open_turn(target)
        with audit.recording("abort_turn", opened.conversation_id, target):
            return await self._store.abort_turn(target, utc_now())

    async def revise_turn(
        self, turn_id: object, content: object, *, regenerated: bool = False, model: object = None
    ) -> Memory:
        """A turn said again: edited (``content`` replaces what was said) or, for an assistant
        turn, regenerated (a new answer, by ``model``). The turn keeps its id and place; what it
        said before is kept in its metadata's ``earlier_versions`` (the export's chain); searches
        and history show the latest."""
        target = inputs.memory_id("turn_id", turn_id)
        text = inputs.text("content", content, self.service.max_content_chars, what="message text")
        produced = dict(produced_of("", {"model": model} if model is not None else {}))
        if regenerated:
            turn = await self._store.get_memory(target)
            if turn.kind != "message" or turn.role != "assistant":
                raise InvalidInputError("turn_id", "names a turn that is not the assistant's",
                                        "regenerate an assistant turn; edit any turn with PUT")
        with audit.recording("regenerate_turn" if regenerated else "edit_turn", None, target):
            revised, gone, contexts = await self._store.revise_turn(
                target, text, "regenerated" if regenerated else "edited", utc_now(), produced
            )
        await self._indexer.removed(gone, contexts=contexts)
        self._indexer.added()  # its new text is embedded in the background like any pending memory
        return revised

    async def open_turns(self, conversation_id: str) -> list[OpenTurn]:
        return await self._store.open_turns(conversation_id)

    async def history(self, conversation_id: object, limit: object = 20, before: object = None) -> list[Memory]:
        """The latest ``limit`` messages (before the message ``before``, to page back), oldest
        first, of the given conversation (default: the current one)."""
        return (await self.history_page(conversation_id, limit, before))[1]

    async def history_page(
        self, conversation_id: object, limit: object = 20, before: object = None
    ) -> tuple[str, list[Memory], bool]:
        """``history`` with the conversation's id and whether earlier messages exist."""
        target = (
            inputs.conversation_id("conversation_id", conversation_id) or await self.service.current_conversation_id()
        )
        if target is None:
            raise InvalidInputError(
                "conversation_id", "is missing and no conversation is current", "pass the conversation to read"
            )
        count = inputs.integer("limit", limit, 1, MAX_HISTORY)
        await self._store.get_conversation(target)
        before_seq = None
        if before is not None:
            anchor = await self._store.get_memory(inputs.memory_id("before", before))
            if anchor.conversation_id != target or anchor.kind != "message":
                raise InvalidInputError(
                    "before", "is not a message of this conversation", "pass a message id it returned"
                )
            before_seq = anchor.seq
        found = await self._store.messages(target, count + 1, before_seq)
        return target, found[-count:], len(found) > count

    # -- work on demand -------------------------------------------------------------------------

    async def request(
        self, conversation_id: object, kind: object, *, through: object = None, strategy: object = None
    ) -> JobStatus:
        """Queue, now, the summary, compaction or fact extraction that would otherwise wait for
        its trigger (the end, a threshold): its job, to follow (``job``). Asking while one is
        queued returns that one (taking this request's options); while one runs, that one, or
        ``JobBusyError`` if this request's options differ. It runs in the background, within the
        chat-model budget, like any other.

        ``through`` (a turn's id) ends what is read at that turn: the summary covers the turns up
        to it, a compaction folds them (not the oldest half) into the rolling summary, facts are
        extracted from them. ``strategy`` (rolling or hierarchical) compacts this once so,
        whatever the conversation's own setting."""
        target = inputs.conversation_id("conversation_id", conversation_id)
        if target is None:
            raise InvalidInputError("conversation_id", "is required", "pass the conversation to work on")
        if kind not in ("summarize", "compact", "facts"):
            raise InvalidInputError("kind", "must be summarize, compact or facts", "pass one of them")
        if strategy is not None and (kind != "compact" or strategy not in ("rolling", "hierarchical")):
            raise InvalidInputError(
                "strategy", "applies to a compaction only, and is rolling or hierarchical",
                "pass one of them to compact, or leave it out",
            )
        conversation = await self._store.get_conversation(target)
        if self._summarizer is None:
            raise ConfigError(
                "No chat model is configured (OLLAMA_MCP_CHAT_MODEL=none), so nothing can be summarized or "
                "extracted; set OLLAMA_MCP_CHAT_MODEL to a chat model such as qwen2.5:3b."
            )
        if kind == "facts" and (self._facts is None or not self._facts.wanted(conversation)):
            raise InvalidInputError(
                "facts", "are not extracted from this conversation",
                'start it with metadata {"facts": true}, or set OLLAMA_MCP_FACTS=on for every conversation',
            )
        options: dict[str, Any] = {"strategy": strategy} if strategy is not None else {}
        if through is not None:
            options |= {"through": str(through), "through_seq": await self._through_seq(conversation, kind, through)}
        status = await self._store.request_job(kind, target, utc_now(), options)
        self._jobs.wakeup.set()
        return status

    async def _through_seq(self, conversation: Conversation, kind: object, through: object) -> int:
        """The seq of the turn ``through`` names, checked: a current turn of this conversation,
        past what the rolling summary (or the facts extracted so far) already covers."""
        try:
            turn = await self._store.get_memory(inputs.memory_id("through", through))
        except MemoryNotFoundError:
            turn = None
        if (turn is None or turn.conversation_id != conversation.id or turn.kind != "message"
                or turn.superseded_by is not None):
            raise InvalidInputError("through", "is not a turn of this conversation", "pass the id of one of its turns")
        covered = (
            await self._store.facts_through(conversation.id) if kind == "facts" else conversation.summarized_through
        )
        if turn.seq <= covered:
            what = "its facts were extracted" if kind == "facts" else "its rolling summary covers it"
            raise InvalidInputError(
                "through", f"names a turn whose work is done ({what})", "pass a later turn, or leave through out"
            )
        return turn.seq

    async def job(self, job_id: object) -> JobStatus:
        """A job requested with ``request``: its state, attempts and why it waits or failed (a
        queued job that calls the chat model while the hour's budget is spent: the budget)."""
        if isinstance(job_id, bool) or not isinstance(job_id, int) or job_id < 1:
            raise JobNotFoundError(str(job_id))
        status = await self._store.job_status(job_id)
        if status.state == "queued" and self._jobs.budget is not None:
            waits = await self._jobs.budget.why_waiting(status.kind)
            if waits is not None:
                return replace(status, last_error=waits)
        return status

    # -- context --------------------------------------------------------------------------------

    async def build_context(
        self,
        conversation_id: object,
        token_budget: object = 4000,
        recent_messages: object = 20,
        recall_k: object = 5,
        query: object = None,
        participants: object = None,
        facts: object = False,
        *,
        recall_everywhere: bool = True,
        recall_threshold: object = None,
    ) -> BuiltContext:
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
        target = inputs.conversation_id("conversation_id", conversation_id)
        if target is None:
            raise InvalidInputError("conversation_id", "is required", "pass the conversation to build context for")
        budget = inputs.integer("token_budget", token_budget, 1, MAX_TOKEN_BUDGET)
        window = inputs.integer("recent_messages", recent_messages, 0, MAX_HISTORY)
        k = inputs.integer("recall_k", recall_k, 0, inputs.MAX_TOP_K)
        floor = inputs.threshold("recall_threshold", recall_threshold)
        ask = None if query is None else inputs.text("query", query, inputs.MAX_QUERY_CHARS, what="search text")
        names = frozenset(inputs.actors("participants", participants))
        with_facts = inputs.flag("facts", facts)
        conversation = await self._store.get_conversation(target)
        private = False
        if names:
            private = await self._check_view(conversation, names)
            scan = await self._store.messages(target, MAX_HISTORY) if window else []
            recent = [m for m in scan if m.seq > conversation.summarized_through and sees(names, m)][-window:]
        else:
            recent = [m for m in await self._store.messages(target, window) if m.seq > conversation.summarized_through]
        latest_user = next((m for m in reversed(recent) if m.role == "user"), None)
        ask = ask or (latest_user.content if latest_user else None)

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
        if with_facts and not private:
            if ask:
                request = inputs.search_request(ask, target, top_k=MAX_CONTEXT_FACTS, everywhere=recall_everywhere)
                outcome = await self.service.search(replace(request, filters=replace(request.filters, kinds=("fact",))))
                candidates = [hit.memory for hit in outcome.hits]
            else:
                candidates = await self._store.current_facts(target, MAX_CONTEXT_FACTS)
            known, used = fit(candidates, FACTS_NOTICE, used, budget)
        recalled: list[Memory] = []
        if ask and k:
            request = inputs.search_request(ask, target, top_k=k, threshold=floor, everywhere=recall_everywhere)
            if private or with_facts:
                kinds = ("note",) if private else tuple(kind for kind in request.filters.kinds if kind != "fact")
                request = replace(request, filters=replace(request.filters, kinds=kinds))
            outcome = await self.service.search(request)
            # Turns are recalled too now: not those the context already holds as recent turns. A
            # fact said there and elsewhere too (a note of "remember: ..."), folded into one hit,
            # is recalled by its other place.
            held = {m.id for m in recent}
            found = [
                place for hit in outcome.hits
                if (place := next((m for m in (hit.memory, *hit.also) if m.id not in held), None)) is not None
            ]
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

    async def participants(self, conversation_id: object) -> list[Participant]:
        """Who wrote the conversation's turns (actors, or roles for turns without one), in the
        order they first spoke."""
        target = inputs.conversation_id("conversation_id", conversation_id)
        if target is None:
            raise InvalidInputError(
                "conversation_id", "is required", "pass the conversation whose participants to list"
            )
        await self._store.get_conversation(target)
        return await self._store.participants(target)

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
        if unknown and self.retention(conversation) != "ephemeral":
            listed = ", ".join(sorted(known)) or "none yet"
            raise InvalidInputError(
                "participants", f"names {unknown[0]!r}, who neither wrote a turn of this conversation nor was sent one",
                f"pass participants it has (actors, or roles for turns without one): {listed}",
            )
        return conversation.metadata.get("private_turns") is True or any(p.addressed for p in seen)

    # -- summaries and compaction (jobs) ----------------------------------------------------------

    async def _summarize_job(self, job: Job) -> None:
        try:
            conversation = await self._store.get_conversation(job.conversation_id)
        except ConversationNotFoundError:
            await self._store.finish_job(job, utc_now())  # deleted meanwhile: nothing to do
            return
        summarizer = self._require_summarizer()
        await self._facts_before_retiring(conversation)
        items = await self._store.conversation_memories(job.conversation_id, kinds=("note", "message"))
        # Messages the rolling summary covers are read through it; every note is read itself.
        # Asked to summarize through a turn (options), nothing after it is read.
        last = job.options.get("through_seq", math.inf)
        current = [
            m for m in items
            if m.superseded_by is None and (m.kind == "note" or m.seq > conversation.summarized_through)
            and m.seq <= last
        ]
        if not current and not conversation.rolling_summary:
            await self._store.finish_job(job, utc_now())
            return
        text = await summarizer.summarize(current, conversation.rolling_summary)
        now = utc_now()
        summary = Memory(
            id=str(uuid.uuid4()), seq=0, conversation_id=job.conversation_id, kind="summary", content=text,
            tags=("summary",), metadata={"written_by": summarizer.model}, created_at=now,
        )
        # It covers every turn read, and the rolling summary it was given the earlier ones.
        through = max((m.seq for m in current if m.kind == "message"), default=conversation.summarized_through)
        retire = self._retire(conversation, through)
        with audit.recording(_audited("summarize", retire), job.conversation_id, summary.id):
            gone, contexts = await self._store.finish_job(job, now, summary=summary, retire=retire)
        await self._indexer.removed(gone, contexts=contexts)
        self._indexer.added()

    async def _compact_job(self, job: Job) -> None:
        try:
            conversation = await self._store.get_conversation(job.conversation_id)
        except ConversationNotFoundError:
            await self._store.finish_job(job, utc_now())
            return
        summarizer = self._require_summarizer()
        await self._facts_before_retiring(conversation)
        # At most COMPACT_AT_MOST turns a job: a recorded chat of 100,000 turns was read whole, on
        # the event loop, at every retry of a job waiting for the chat model (~1 s each time).
        if "through_seq" in job.options:  # asked for: the turns up to that one, however many (in steps)
            pending = await self._store.conversation_memories(
                job.conversation_id, after_seq=conversation.summarized_through, limit=COMPACT_AT_MOST,
                kinds=("message",),
            )
            folded = [m for m in pending if m.seq <= job.options["through_seq"]]
        else:  # a threshold crossed: the older half, the newer kept verbatim
            messages, _ = await self._store.transcript_size(job.conversation_id, conversation.summarized_through)
            folded = await self._store.conversation_memories(
                job.conversation_id, after_seq=conversation.summarized_through,
                limit=min(messages // 2, COMPACT_AT_MOST), kinds=("message",),
            ) if messages >= 2 else []
        if not folded:
            await self._store.finish_job(job, utc_now())
            return
        through = folded[-1].seq
        text = await summarizer.summarize(folded, conversation.rolling_summary)
        level = 1
        strategy = job.options.get("strategy") or self.compaction_strategy(conversation)
        if (strategy == "hierarchical"
                and estimate_tokens(text) > self.summary_budget(conversation)):
            # A summary of summaries: the long one is kept (searchable, its detail not lost), and
            # the rolling summary that build_context sends becomes a condensed one.
            detailed = Memory(
                id=str(uuid.uuid4()), seq=0, conversation_id=conversation.id, kind="summary", content=text, tags=(),
                metadata={"level": 1, "through_seq": through}, created_at=utc_now(),
            )
            condensed = await summarizer.condense(text)
            with audit.recording("compact", conversation.id, detailed.id):
                await self._store.insert_memory(detailed)
            text, level = condensed, 2
        # Kept as a summary memory too, so what was compacted stays searchable from any conversation.
        summary = Memory(
            id=str(uuid.uuid4()), seq=0, conversation_id=conversation.id, kind="summary", content=text, tags=(),
            metadata={"rolling": True, "through_seq": through, **({"level": level} if level > 1 else {})},
            created_at=utc_now(),
        )
        retire = self._retire(conversation, through)
        with audit.recording(_audited("compact", retire), conversation.id, summary.id):
            gone, contexts = await self._store.finish_job(job, utc_now(), rolling=(summary, through), retire=retire)
        await self._indexer.removed(gone, contexts=contexts)
        self._indexer.added()  # its vector is computed in the background like any pending memory
        if self._facts is not None and self._facts.wanted(conversation) and self.retention(conversation) == "full":
            await self._store.enqueue_job("facts", conversation.id, utc_now())  # the turns stay: no hurry
        if "through_seq" in job.options and through < job.options["through_seq"] and len(folded) == COMPACT_AT_MOST:
            await self._store.request_job("compact", conversation.id, utc_now(), dict(job.options))  # the next step
            self._jobs.wakeup.set()
            return
        # Still over a threshold (a burst of messages while the model worked, or a long backlog): go on.
        await self._maybe_compact(await self._store.get_conversation(job.conversation_id))

    async def _maybe_compact(self, conversation: Conversation) -> None:
        if self._summarizer is None or self.compaction_strategy(conversation) == "never":
            return
        messages, chars = await self._store.transcript_size(conversation.id, conversation.summarized_through)
        max_messages, max_tokens = self.compaction_thresholds(conversation)
        tokens = math.ceil(chars / CHARS_PER_TOKEN) + MESSAGE_OVERHEAD_TOKENS * messages
        if messages >= 2 and (messages > max_messages or tokens > max_tokens):
            if await self._store.enqueue_job("compact", conversation.id, utc_now()):
                self._jobs.wakeup.set()

    def compaction_thresholds(self, conversation: Conversation) -> tuple[int, int]:
        """(messages, tokens) past which the transcript is compacted: the conversation's metadata
        (compact_after_messages, compact_after_tokens) or the configured defaults."""
        given = inputs.ConversationSettings.of(conversation.metadata)
        messages, tokens = given.compact_after_messages, given.compact_after_tokens
        return messages or self._compact_messages, tokens or self._compact_tokens

    def compaction_strategy(self, conversation: Conversation) -> str:
        """rolling (the default), hierarchical or never: the conversation's metadata."""
        return inputs.ConversationSettings.of(conversation.metadata).compaction_strategy or "rolling"

    def summary_budget(self, conversation: Conversation) -> int:
        """Estimated tokens past which hierarchical compaction condenses the rolling summary."""
        return inputs.ConversationSettings.of(conversation.metadata).compact_summary_tokens or SUMMARY_TOKENS

    def retention(self, conversation: Conversation) -> str:
        """full (the default), audit-only or ephemeral: the conversation's metadata."""
        return inputs.ConversationSettings.of(conversation.metadata).retention or "full"

    def _retire(self, conversation: Conversation, through: int) -> tuple[str, int] | None:
        """What a summary covering the turns through seq ``through`` does to them: nothing under
        full retention, else (the mode, ``through``) for the store to apply with the summary."""
        mode = self.retention(conversation)
        return None if mode == "full" else (mode, through)

    async def _facts_before_retiring(self, conversation: Conversation) -> None:
        """Under an audit-only retention the summary about to be written takes the text of the
        turns it covers (their rows stay, as digests, and so do their facts): a conversation that
        wants facts has them extracted first. (An ephemeral retention deletes the turns, and a
        fact goes with the memory it came from: its facts come from its notes.)"""
        if (
            self._facts is not None
            and self._facts.wanted(conversation)
            and self.retention(conversation) == "audit-only"
        ):
            await self._facts.catch_up(conversation.id)

    def _require_summarizer(self) -> Summarizer:
        if self._summarizer is None:
            raise OllamaMcpError(
                "No chat model is configured (OLLAMA_MCP_CHAT_MODEL=none), so summaries cannot be written; "
                "set OLLAMA_MCP_CHAT_MODEL to a chat model such as qwen2.5:3b."
            )
        return self._summarizer

    # -- retention ------------------------------------------------------------------------------

    async def expired(self) -> list[Conversation]:
        """The conversations the next sweep deletes."""
        found = []
        for conversation_id in await self._expired_ids():
            try:
                found.append(await self._store.get_conversation(conversation_id))
            except ConversationNotFoundError:
                continue
        return found

    async def _expired_ids(self) -> list[str]:
        now = datetime.now(UTC)
        cutoff = None
        if self._retention_days:
            cutoff = format_timestamp(now - timedelta(days=self._retention_days))
        return await self._store.expired_conversations(format_timestamp(now), cutoff)

    async def sweep(self) -> list[str]:
        """Delete every conversation past its TTL or (with a retention period) idle for longer,
        then, in conversations that set ``memory_ttl_hours``, every memory stored longer ago."""
        deleted = []
        for conversation_id in await self._expired_ids():
            try:
                with audit.through("retention"):
                    await self.service.delete_conversation(conversation_id)
            except ConversationNotFoundError:
                continue  # another process swept it first
            deleted.append(conversation_id)
        if deleted:
            log.info("retention: deleted %d expired conversations", len(deleted))
        forgotten = 0
        now = datetime.now(UTC)
        for conversation_id, metadata in await self._store.conversations_with_setting("memory_ttl_hours"):
            hours = inputs.ConversationSettings.of(metadata).memory_ttl_hours
            if hours is not None:
                with audit.through("retention"):
                    forgotten += await self.service.forget_older(
                        format_timestamp(now - timedelta(hours=hours)), conversation_id
                    )
        if forgotten:
            log.info("retention: deleted %d memories past their conversation's memory_ttl_hours", forgotten)
        return deleted

    def retention_step(self, interval: float) -> Step:
        """A step for ``background.supervise``: sweep, then wait ``interval`` seconds."""

        async def step() -> float:
            await self.sweep()
            return interval

        return step


def _audited(action: str, retire: tuple[str, int] | None) -> str:
    """The write audit's name for a summary that may also retire the turns it covers: an auditor
    looks for exactly those redactions and deletions."""
    if retire is None:
        return action
    return f"{action}_and_{'redact' if retire[0] == 'audit-only' else 'delete'}_turns"

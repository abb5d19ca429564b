"""The summaries the chat model writes of a conversation, as jobs (``jobs.py``), so that no tool
call ever waits for one: the summary at its end (``summarize``) and the rolling summary its
transcript is compacted into as it grows (``compact``), with what a retention mode then does to
the turns a summary covers. When a transcript is due for compaction is decided here
(``compact_at``) and checked by the store in the same transaction as the turns that cross it.
"""

from __future__ import annotations

import math
import uuid

from ollama_mcp import audit
from ollama_mcp.domain import CompactAt, Conversation, Job, JobKind, Memory, utc_now
from ollama_mcp.errors import ConversationNotFoundError, OllamaMcpError
from ollama_mcp.inputs.conversations import ConversationSettings
from ollama_mcp.services.context import CHARS_PER_TOKEN, MESSAGE_OVERHEAD_TOKENS, estimate_tokens
from ollama_mcp.services.facts import ConversationFacts
from ollama_mcp.services.indexer import Indexer
from ollama_mcp.services.jobs import JobRunner
from ollama_mcp.services.summaries import Summarizer
from ollama_mcp.storage.protocols import Storage

SUMMARY_TOKENS = 1000  # hierarchical compaction condenses a rolling summary past this
# The turns one compaction job folds at most; a longer backlog (an imported or long-recorded chat)
# takes several jobs, each queuing the next, each within the chat-model budget.
COMPACT_AT_MOST = 1_000


def retention(conversation: Conversation) -> str:
    """full (the default), audit-only or ephemeral: the conversation's metadata."""
    return ConversationSettings.of(conversation.metadata).retention or "full"


class Summarizing:
    """The summarize and compact jobs of one store, and when a transcript is due."""

    def __init__(
        self, store: Storage, indexer: Indexer, jobs: JobRunner, summarizer: Summarizer | None, *,
        compact_messages: int = 50, compact_tokens: int = 8000, facts: ConversationFacts | None = None,
    ) -> None:
        self._store = store
        self._indexer = indexer
        self._jobs = jobs
        self._summarizer = summarizer
        self._facts = facts
        self._compact_messages = compact_messages
        self._compact_tokens = compact_tokens
        jobs.register("summarize", self._summarize_job)
        jobs.register("compact", self._compact_job)

    def compact_at(self, conversation: Conversation) -> CompactAt | None:
        """When ``conversation``'s transcript is due for compaction; None when it never is (no chat
        model, or its strategy is never). A write of turns hands it to the store."""
        if self._summarizer is None or self.compaction_strategy(conversation) == "never":
            return None
        messages, tokens = self.compaction_thresholds(conversation)
        return CompactAt(messages, tokens, CHARS_PER_TOKEN, MESSAGE_OVERHEAD_TOKENS)

    def compaction_thresholds(self, conversation: Conversation) -> tuple[int, int]:
        """(messages, tokens) past which the transcript is compacted: the conversation's metadata
        (compact_after_messages, compact_after_tokens) or the configured defaults."""
        given = ConversationSettings.of(conversation.metadata)
        messages, tokens = given.compact_after_messages, given.compact_after_tokens
        return messages or self._compact_messages, tokens or self._compact_tokens

    def compaction_strategy(self, conversation: Conversation) -> str:
        """rolling (the default), hierarchical or never: the conversation's metadata."""
        return ConversationSettings.of(conversation.metadata).compaction_strategy or "rolling"

    def summary_budget(self, conversation: Conversation) -> int:
        """Estimated tokens past which hierarchical compaction condenses the rolling summary."""
        return ConversationSettings.of(conversation.metadata).compact_summary_tokens or SUMMARY_TOKENS

    # -- the jobs -------------------------------------------------------------------------------

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
        # What it leads to is queued with it: facts of the turns it folded (they stay: no hurry),
        # the next step of a compaction asked through a turn, or (a burst of messages while the
        # model worked, a long backlog) another compaction while the transcript is still past due.
        then: list[tuple[JobKind, dict[str, object]]] = []
        if self._facts is not None and self._facts.wanted(conversation) and retention(conversation) == "full":
            then.append(("facts", {}))
        steps_on = (
            "through_seq" in job.options and through < job.options["through_seq"] and len(folded) == COMPACT_AT_MOST
        )
        if steps_on:
            then.append(("compact", dict(job.options)))
        retire = self._retire(conversation, through)
        with audit.recording(_audited("compact", retire), conversation.id, summary.id):
            gone, contexts = await self._store.finish_job(
                job, utc_now(), rolling=(summary, through), retire=retire, then=then,
                compact=None if steps_on else self.compact_at(conversation),
            )
        await self._indexer.removed(gone, contexts=contexts)
        self._indexer.added()  # its vector is computed in the background like any pending memory
        self._jobs.wakeup.set()  # whatever it queued

    def _retire(self, conversation: Conversation, through: int) -> tuple[str, int] | None:
        """What a summary covering the turns through seq ``through`` does to them: nothing under
        full retention, else (the mode, ``through``) for the store to apply with the summary."""
        mode = retention(conversation)
        return None if mode == "full" else (mode, through)

    async def _facts_before_retiring(self, conversation: Conversation) -> None:
        """Under an audit-only retention the summary about to be written takes the text of the
        turns it covers (their rows stay, as digests, and so do their facts): a conversation that
        wants facts has them extracted first. (An ephemeral retention deletes the turns, and a
        fact goes with the memory it came from: its facts come from its notes.)"""
        if self._facts is not None and self._facts.wanted(conversation) and retention(conversation) == "audit-only":
            await self._facts.catch_up(conversation.id)

    def _require_summarizer(self) -> Summarizer:
        if self._summarizer is None:
            raise OllamaMcpError(
                "No chat model is configured (OLLAMA_MCP_CHAT_MODEL=none), so summaries cannot be written; "
                "set OLLAMA_MCP_CHAT_MODEL to a chat model such as qwen2.5:3b."
            )
        return self._summarizer


def _audited(action: str, retire: tuple[str, int] | None) -> str:
    """The write audit's name for a summary that may also retire the turns it covers: an auditor
    looks for exactly those redactions and deletions."""
    if retire is None:
        return action
    return f"{action}_and_{'redact' if retire[0] == 'audit-only' else 'delete'}_turns"

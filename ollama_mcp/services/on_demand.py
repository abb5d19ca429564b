"""Work asked for now rather than at its trigger (the end, a threshold): a summary, a compaction
or a fact extraction of a conversation, through a turn or not (REST's /summarize, /compact and
/facts, the agent's), and what became of it (``job``). It runs in the background, within the
chat-model budget, like any other job."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from ollama_mcp.domain import Conversation, JobStatus, utc_now
from ollama_mcp.errors import ConfigError, InvalidInputError, MemoryNotFoundError
from ollama_mcp.inputs.context import WorkRequest
from ollama_mcp.services.facts import ConversationFacts
from ollama_mcp.services.jobs import JobRunner
from ollama_mcp.storage.protocols import Storage


class WorkOnDemand:
    def __init__(
        self, store: Storage, jobs: JobRunner, *, summaries: bool, facts: ConversationFacts | None = None,
    ) -> None:
        self._store = store
        self._jobs = jobs
        self._summaries = summaries  # a chat model is configured
        self._facts = facts

    async def request(self, work: WorkRequest) -> JobStatus:
        """Queue the work now: its job, to follow (``job``). Asking while one is queued returns
        that one (taking this request's options); while one runs, that one, or ``JobBusyError`` if
        this request's options differ.

        ``through`` (a turn's id) ends what is read at that turn: the summary covers the turns up
        to it, a compaction folds them (not the oldest half) into the rolling summary, facts are
        extracted from them. ``strategy`` (rolling or hierarchical) compacts this once so,
        whatever the conversation's own setting."""
        conversation = await self._store.get_conversation(work.conversation_id)
        if not self._summaries:
            raise ConfigError(
                "No chat model is configured (OLLAMA_MCP_CHAT_MODEL=none), so nothing can be summarized or "
                "extracted; set OLLAMA_MCP_CHAT_MODEL to a chat model such as qwen2.5:3b."
            )
        if work.kind == "facts" and (self._facts is None or not self._facts.wanted(conversation)):
            raise InvalidInputError(
                "facts", "are not extracted from this conversation",
                'start it with metadata {"facts": true}, or set OLLAMA_MCP_FACTS=on for every conversation',
            )
        options: dict[str, Any] = {"strategy": work.strategy} if work.strategy is not None else {}
        if work.through is not None:
            options |= {"through": work.through, "through_seq": await self._through_seq(conversation, work)}
        status = await self._store.request_job(work.kind, work.conversation_id, utc_now(), options)
        self._jobs.wakeup.set()
        return status

    async def _through_seq(self, conversation: Conversation, work: WorkRequest) -> int:
        """The seq of the turn ``through`` names, checked: a current turn of this conversation,
        past what the rolling summary (or the facts extracted so far) already covers."""
        assert work.through is not None
        try:
            turn = await self._store.get_memory(work.through)
        except MemoryNotFoundError:
            turn = None
        if (turn is None or turn.conversation_id != conversation.id or turn.kind != "message"
                or turn.superseded_by is not None):
            raise InvalidInputError("through", "is not a turn of this conversation", "pass the id of one of its turns")
        covered = (
            await self._store.facts_through(conversation.id) if work.kind == "facts"
            else conversation.summarized_through
        )
        if turn.seq <= covered:
            what = "its facts were extracted" if work.kind == "facts" else "its rolling summary covers it"
            raise InvalidInputError(
                "through", f"names a turn whose work is done ({what})", "pass a later turn, or leave through out"
            )
        return turn.seq

    async def job(self, job_id: int) -> JobStatus:
        """A job requested with ``request``: its state, attempts and why it waits or failed (a
        queued job that calls the chat model while the hour's budget is spent: the budget)."""
        status = await self._store.job_status(job_id)
        if status.state == "queued" and self._jobs.budget is not None:
            waits = await self._jobs.budget.why_waiting(status.kind)
            if waits is not None:
                return replace(status, last_error=waits)
        return status

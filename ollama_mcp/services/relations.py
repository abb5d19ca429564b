"""Relations between conversations: follow-ups (recorded by ``init_conversation(follows=…)``),
related and duplicate conversations (found by the ``relate`` job once a conversation's end summary
exists, by the cosine similarity of the summaries' vectors), the list of a conversation's
relations, and the conversations a search "related to" one covers.

The relate job is queued by the store in the transaction that stores an end summary (given at
the end, or written by the chat model). It embeds the summary itself when the backfill has not
yet, so a conversation is linked as soon as Ollama answers; while Ollama is down the job waits
(jobs do not count those attempts). Each job records the links from its conversation to earlier
ones; a list reads both directions, so every pair is found once either side has been related.
"""

from __future__ import annotations

from typing import Protocol

from ollama_mcp import audit
from ollama_mcp.domain import Conversation, Job, Relation, RelationKind, utc_now
from ollama_mcp.errors import OllamaMcpError
from ollama_mcp.services.indexer import Indexer
from ollama_mcp.services.jobs import JobRunner
from ollama_mcp.storage.protocols import ConversationStorage, JobStorage, RelationStorage

MAX_RELATED = 5  # links a conversation records to others like it, best first
MAX_SCOPE = 50  # conversations a search related to one covers at most
MAX_FOLLOW_UPS = 20  # steps along chains of follow-ups, either way


class RelationReads(ConversationStorage, JobStorage, RelationStorage, Protocol):
    """What relations between conversations ask of storage."""


class ConversationRelations:
    """The relate job, and reading a conversation's relations."""

    def __init__(
        self, store: RelationReads, indexer: Indexer, jobs: JobRunner, *, related: float, duplicate: float
    ) -> None:
        self._store = store
        self._indexer = indexer
        self.related_threshold = related
        self.duplicate_threshold = duplicate
        jobs.register("relate", self._relate_job)

    async def of(self, conversation_id: str) -> tuple[Conversation, list[Relation]]:
        """The conversation and its relations (``ConversationNotFoundError`` when there is none)."""
        conversation = await self._store.get_conversation(conversation_id)
        return conversation, await self._store.relations(conversation_id)

    async def _relate_job(self, job: Job) -> None:
        summary = await self._store.end_summary(job.conversation_id)  # None too when deleted meanwhile
        if summary is not None:
            if await self._indexer.is_pending(summary):
                await self._indexer.embed_now(summary)
            found = await self._store.similar_summaries(job.conversation_id, self._indexer.model, MAX_RELATED)
            if found is None:
                raise OllamaMcpError("The conversation's summary has no vector yet; linking it waits for one.")
            with audit.recording("relate", job.conversation_id):
                await self._store.set_similar(job.conversation_id, self.links(found), utc_now())
        await self._store.finish_job(job, utc_now())

    def links(self, found: list[tuple[str, float]]) -> list[tuple[str, RelationKind, float]]:
        """The similar conversations worth a link: related past one threshold, duplicate past
        the other."""
        return [
            (other, "duplicate" if score >= self.duplicate_threshold else "related", round(score, 4))
            for other, score in found
            if score >= self.related_threshold
        ]


async def related_scope(store: RelationReads, conversation_id: str) -> list[str]:
    """The conversations a search related to ``conversation_id`` covers: its thread (the chain of
    follow-ups both ways), the conversations related to (or duplicating) one in it, and their
    threads; nearest first, at most ``MAX_SCOPE``. ``ConversationNotFoundError`` when it does
    not exist."""
    await store.get_conversation(conversation_id)
    leaps = {conversation_id: 0}  # similarity links crossed to reach each (follow-ups cross none)
    frontier = [conversation_id]
    for _ in range(MAX_FOLLOW_UPS):
        reached: list[str] = []
        for current in frontier:
            for relation in await store.relations(current):
                leap = leaps[current] + (relation.kind != "follow_up")
                if leap > 1 or leaps.get(relation.conversation_id, 2) <= leap:
                    continue
                leaps[relation.conversation_id] = leap
                reached.append(relation.conversation_id)
        frontier = reached
        if not frontier or len(leaps) >= MAX_SCOPE:
            break
    return list(leaps)[:MAX_SCOPE]

"""The composition root: builds the backend's store and ranker (``backends``) → Ollama clients →
embedder → indexer → jobs → the services a search and a store use (``Early``) → relations, and on
first use (``LaterServices``) facts → summarizing → transcript, context, retention, work, archive →
agent; runs the background work (loading the search indexes and the embedding model,
embedding backfill, jobs, retention sweep, keyword index upkeep, the times earlier memories
name), and closes everything in reverse order."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING

import anyio

from ollama_mcp.background import Step, beside, supervise
from ollama_mcp.config import Settings
from ollama_mcp.head_start import HeadStart
from ollama_mcp.ollama.client import OllamaClient
from ollama_mcp.ollama.embeddings import Embedder
from ollama_mcp.services.changes import Changes
from ollama_mcp.services.chat_budget import ChatBudget
from ollama_mcp.services.conversations import Conversations
from ollama_mcp.services.current import CurrentConversations
from ollama_mcp.services.indexer import CATCH_UP_IDLE_SECONDS, Indexer
from ollama_mcp.services.jobs import JobRunner
from ollama_mcp.services.memories import Memories
from ollama_mcp.services.recall import Recall
from ollama_mcp.services.redacting import Redacting
from ollama_mcp.services.relations import ConversationRelations
from ollama_mcp.services.shares import ShareRegistry
from ollama_mcp.services.superseding import Superseding
from ollama_mcp.storage.backends import open_backend
from ollama_mcp.storage.protocols import Storage
from ollama_mcp.storage.ranker import Ranker
from ollama_mcp.storage.ranking import SearchTuning

if TYPE_CHECKING:  # built on first use, their modules imported then (``LaterServices``)
    from ollama_mcp.services.agent import Agent
    from ollama_mcp.services.archive import Archive
    from ollama_mcp.services.claude_history import SessionNotices
    from ollama_mcp.services.context_builder import ContextBuilder
    from ollama_mcp.services.facts import ConversationFacts
    from ollama_mcp.services.on_demand import WorkOnDemand
    from ollama_mcp.services.retention import Retention
    from ollama_mcp.services.secret_sweep import SecretSweep
    from ollama_mcp.services.streamed_turns import StreamedTurns
    from ollama_mcp.services.summarizing import Summarizing
    from ollama_mcp.services.transcript import Transcript

# The first moments after a start belong to the client's calls: the background's first rounds
# (a scan for pending memories, due jobs, the retention sweep; 20 ms together at 10k memories on
# SQLite's one connection) wait this long unless work arrives (a store wakes the backfill).
START_GRACE_SECONDS = 1.0


log = logging.getLogger(__name__)
CLOSE_SECONDS = 10.0  # what closing the clients and the store may take at shutdown, at most


@dataclass(frozen=True)
class Later:
    """The services built on first use (``LaterServices``)."""

    facts: ConversationFacts
    summarizing: Summarizing
    transcript: Transcript
    streamed_turns: StreamedTurns
    context: ContextBuilder
    retention: Retention
    work: WorkOnDemand
    archive: Archive
    agent: Agent
    secret_sweep: SecretSweep
    session_notices: SessionNotices


class LaterServices:
    """The services a search does not use: facts, summaries and compaction, the transcript, the
    context builder, retention, work on demand, export and import, and the agent. Built on first
    use (``get``), so that importing their modules (about 9 ms, bench/README.md) is not on the way
    to a new process's first search. The job runner has them built before it claims its first
    job: their handlers must be registered by then."""

    def __init__(
        self, settings: Settings, store: Storage, early: Early, indexer: Indexer, jobs: JobRunner,
        chat_client: OllamaClient, budget: ChatBudget,
    ) -> None:
        self._settings = settings
        self._store = store
        self._early = early
        self._indexer = indexer
        self._jobs = jobs
        self._chat_client = chat_client
        self._budget = budget
        self._built: Later | None = None
        jobs.before_first_job(self.get)

    def get(self) -> Later:
        if self._built is None:
            self._built = self._build()
        return self._built

    def retention_step(self, interval: float) -> Step:
        """The retention sweep, for ``background.supervise``, building it when it first runs."""

        async def step() -> float | None:
            return await self.get().retention.step(interval)()

        return step

    def _build(self) -> Later:
        # Imported here, not with the app: see the class.
        from ollama_mcp.services.agent import Agent  # noqa: PLC0415
        from ollama_mcp.services.archive import Archive  # noqa: PLC0415
        from ollama_mcp.services.chat_budget import BudgetedChat  # noqa: PLC0415
        from ollama_mcp.services.claude_history import SessionNotices  # noqa: PLC0415
        from ollama_mcp.services.context_builder import ContextBuilder  # noqa: PLC0415
        from ollama_mcp.services.facts import ConversationFacts, FactExtractor  # noqa: PLC0415
        from ollama_mcp.services.on_demand import WorkOnDemand  # noqa: PLC0415
        from ollama_mcp.services.retention import Retention  # noqa: PLC0415
        from ollama_mcp.services.secret_sweep import SecretSweep  # noqa: PLC0415
        from ollama_mcp.services.streamed_turns import StreamedTurns  # noqa: PLC0415
        from ollama_mcp.services.summaries import Summarizer  # noqa: PLC0415
        from ollama_mcp.services.summarizing import Summarizing  # noqa: PLC0415
        from ollama_mcp.services.transcript import Transcript  # noqa: PLC0415

        settings, store, chat_client, budget = self._settings, self._store, self._chat_client, self._budget
        early, indexer, jobs = self._early, self._indexer, self._jobs
        chatting = settings.chat_model is not None
        # Background work's chat calls go through the hourly budget; ask_agent's (a person asking) do not.
        summarizer = None if settings.chat_model is None else Summarizer(
            BudgetedChat(chat_client, budget, "summary"), settings.chat_model
        )
        extractor = None if settings.chat_model is None else FactExtractor(
            BudgetedChat(chat_client, budget, "facts"), settings.chat_model
        )
        facts = ConversationFacts(store, indexer, jobs, extractor, default=settings.facts)
        summarizing = Summarizing(
            store, indexer, jobs, summarizer, compact_messages=settings.compact_messages,
            compact_tokens=settings.compact_tokens, facts=facts,
        )
        chars = settings.max_content_chars
        transcript = Transcript(
            store, early.conversations, early.current, indexer, jobs, summarizing, early.superseding, early.redacting,
            max_content_chars=chars,
        )
        context = ContextBuilder(store, early.recall)
        work = WorkOnDemand(store, jobs, summaries=chatting, facts=facts)
        agent = Agent(
            store, early.conversations, early.memories, early.recall, transcript, context, work, chat_client,
            settings.agent_chat_model, allowed=settings.agent_tools, confirm=settings.agent_confirm,
            max_steps=settings.agent_max_steps, deadline=settings.agent_deadline,
            context_messages=settings.agent_context_messages, instructions=settings.agent_system_prompt,
            max_content_chars=chars,
        )
        return Later(
            facts, summarizing, transcript, StreamedTurns(
                store, indexer, jobs, summarizing, early.superseding, early.redacting, max_content_chars=chars,
            ),
            context, Retention(store, early.conversations, early.memories, retention_days=settings.retention_days),
            work,
            Archive(store, indexer, early.superseding, early.redacting, page_chars=settings.response_chars,
                    summaries=chatting), agent, SecretSweep(store, indexer), SessionNotices(store),
        )


@dataclass(frozen=True)
class Early:
    """The services a search and a store use, built with the app."""

    current: CurrentConversations
    conversations: Conversations
    memories: Memories
    recall: Recall
    changes: Changes
    superseding: Superseding
    redacting: Redacting


@dataclass(frozen=True)
class App:
    settings: Settings
    store: Storage
    ranker: Ranker
    indexer: Indexer
    jobs: JobRunner
    early: Early
    relations: ConversationRelations
    shares: ShareRegistry  # shares and tokens; only the local principal's app's are the server's
    later: LaterServices

    # -- the services, each one concept (services/): what the edges call ---------------------------

    @property
    def current(self) -> CurrentConversations:
        return self.early.current

    @property
    def conversations(self) -> Conversations:
        return self.early.conversations

    @property
    def memories(self) -> Memories:
        return self.early.memories

    @property
    def recall(self) -> Recall:
        return self.early.recall

    @property
    def changes(self) -> Changes:
        return self.early.changes

    @property
    def superseding(self) -> Superseding:
        return self.early.superseding

    @property
    def facts(self) -> ConversationFacts:
        return self.later.get().facts

    @property
    def summarizing(self) -> Summarizing:
        return self.later.get().summarizing

    @property
    def transcript(self) -> Transcript:
        return self.later.get().transcript

    @property
    def streamed_turns(self) -> StreamedTurns:
        return self.later.get().streamed_turns

    @property
    def context(self) -> ContextBuilder:
        return self.later.get().context

    @property
    def retention(self) -> Retention:
        return self.later.get().retention

    @property
    def work(self) -> WorkOnDemand:
        return self.later.get().work

    @property
    def archive(self) -> Archive:
        return self.later.get().archive

    @property
    def secret_sweep(self) -> SecretSweep:
        return self.later.get().secret_sweep

    @property
    def session_notices(self) -> SessionNotices:
        return self.later.get().session_notices

    @property
    def agent(self) -> Agent:
        return self.later.get().agent


@asynccontextmanager
async def open_app(
    settings: Settings, *, background: bool = True, tuning: SearchTuning | None = None,
    head_start: HeadStart | None = None,
) -> AsyncIterator[App]:
    """Open the database and Ollama client; with ``background``, run the background work meanwhile.

    ``tuning`` overrides the ranking defaults (benchmarks only; the server always uses defaults).
    ``head_start``: Ollama's answers to calls made while the app was being opened (the server's).
    """
    for said in settings.unread:  # a mistyped setting is ignored: say so where an operator looks
        log.warning("%s", said)
    store, ranker = await open_backend(settings, tuning, head_start.vectors if head_start else None)
    client = OllamaClient(
        settings.ollama_host, timeout=settings.embed_timeout, connect_timeout=settings.connect_timeout,
        keep_alive=settings.keep_alive,
    )
    # Chat replies take far longer than embeddings: a client of their own, with its own timeout.
    chat_client = OllamaClient(
        settings.ollama_host, timeout=settings.chat_timeout, connect_timeout=settings.connect_timeout,
        model_setting="OLLAMA_MCP_CHAT_MODEL", timeout_setting="OLLAMA_MCP_CHAT_TIMEOUT",
    )
    try:
        indexer = Indexer(store, Embedder(
            client, settings.embed_model, wait_timeout=settings.wait_timeout, head_start=head_start,
        ), ranker)
        budget = ChatBudget(store, settings.chat_calls_per_hour)
        jobs = JobRunner(store, lease=settings.job_lease, max_delay=settings.job_max_delay, budget=budget)
        current = CurrentConversations(store)
        redacting = Redacting(settings.redact)
        conversations = Conversations(
            store, indexer, jobs, current, redacting, summaries=settings.chat_model is not None, facts=settings.facts,
        )
        superseding = Superseding(store)
        early = Early(
            current, conversations, Memories(store, indexer, conversations, superseding, redacting),
            Recall(store, indexer, indexer.embedder, ranker, current, superseding), Changes(store), superseding,
            redacting,
        )
        relations = ConversationRelations(
            store, indexer, jobs, related=settings.related_threshold, duplicate=settings.duplicate_threshold
        )
        later = LaterServices(settings, store, early, indexer, jobs, chat_client, budget)
        async with beside() as tasks:
            if background:
                interval = settings.upkeep_interval
                tasks.start_soon(supervise, "loading the search indexes", indexer.warm_up)
                tasks.start_soon(indexer.warm_model)
                tasks.start_soon(lambda: supervise(
                    "background embedding", indexer.backfill_step, wakeup=indexer.wakeup,
                    max_delay=settings.backfill_max_delay, initial_delay=START_GRACE_SECONDS,
                ))
                tasks.start_soon(lambda: supervise(
                    "background jobs", jobs.step, wakeup=jobs.wakeup, max_delay=settings.job_max_delay,
                    initial_delay=START_GRACE_SECONDS,
                ))
                tasks.start_soon(lambda: supervise(
                    "retention sweep", later.retention_step(settings.retention_interval),
                    max_delay=settings.retention_interval, initial_delay=START_GRACE_SECONDS,
                ))
                tasks.start_soon(lambda: supervise(
                    "taking in new vectors", indexer.catch_up_step, wakeup=indexer.written,
                    max_delay=settings.backfill_max_delay, initial_delay=CATCH_UP_IDLE_SECONDS,
                ))
                tasks.start_soon(lambda: supervise(
                    "reading the times earlier memories name", indexer.times_step,
                    max_delay=settings.backfill_max_delay, initial_delay=START_GRACE_SECONDS,
                ))
                tasks.start_soon(lambda: supervise(
                    "reading what earlier memories state", superseding.claims_step,
                    max_delay=settings.backfill_max_delay, initial_delay=START_GRACE_SECONDS,
                ))
                tasks.start_soon(lambda: supervise(
                    "index upkeep", indexer.upkeep_step(interval, settings.upkeep_min_new),
                    max_delay=interval, initial_delay=interval,
                ))
            shares = ShareRegistry(store)
            yield App(settings, store, ranker, indexer, jobs, early, relations, shares, later)
    finally:
        # Shielded: at shutdown this runs inside a cancelled scope, and an unawaited close
        # would leave the database thread running after the event loop is gone. Bounded: a
        # server must stop, whatever a close waits for (a database that stopped answering).
        with anyio.CancelScope(shield=True), anyio.move_on_after(CLOSE_SECONDS) as closing:
            await chat_client.aclose()
            await client.aclose()
            await store.aclose()
        if closing.cancelled_caught:
            log.warning("closing the store took over %.0f s; stopped without waiting for it", CLOSE_SECONDS)

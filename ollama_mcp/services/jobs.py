"""Durable deferred work (summaries, compaction): claim from the jobs table, run, retry, record.

A job is a row before it is work: queuing it commits with the change that asked for it (ending a
conversation queues its summary in the same transaction), so a crash cannot lose it. A worker
claims a job under a short lease and renews it while it works; if the process dies, the lease
lapses within seconds and this process (after a restart) or another one resumes the job.
Failures are retried with exponential backoff:

- Ollama unreachable or the model not pulled: the job *waits* (its ``last_error`` says why) and
  is retried for as long as it takes; the user may start Ollama or pull the model next week.
- Anything else (a chat model that keeps answering malformed JSON, a bug): after
  ``max_attempts`` the job is marked ``failed`` with the reason. Nothing is dropped silently.
- The chat-model budget spent (``chat_budget``): jobs that call the chat model are not claimed
  until a call frees up, and one that runs out midway is put back to wait for it; neither uses
  up an attempt.

Pending embeddings are not rows here: a memory without a vector of the configured model *is*
the pending state (see ``service``), which survives everything a job row would, and also a
change of embedding model, without a row per memory.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from contextlib import nullcontext
from datetime import UTC, datetime, timedelta

import anyio

from ollama_mcp import audit
from ollama_mcp.background import Wakeup, beside
from ollama_mcp.domain import Job, JobKind, format_timestamp
from ollama_mcp.errors import ChatBudgetSpent, OllamaMcpError, OllamaModelError, OllamaUnavailableError
from ollama_mcp.services.chat_budget import CHAT_JOBS, ChatBudget
from ollama_mcp.storage.protocols import JobStorage

log = logging.getLogger(__name__)

Handler = Callable[[Job], Awaitable[None]]
# A handler that has nothing left to do (its conversation was deleted meanwhile) just returns.

MAX_ATTEMPTS = 5
IDLE_POLL_SECONDS = 60.0  # also notices jobs queued by another process


class JobRunner:
    """Runs due jobs one at a time (``step``, run by ``background.supervise``)."""

    def __init__(
        self, store: JobStorage, *, lease: float = 30.0, max_delay: float = 300.0, max_attempts: int = MAX_ATTEMPTS,
        budget: ChatBudget | None = None,
    ) -> None:
        self._store = store
        self.budget = budget  # the chat-model calls jobs may make (None: no ceiling)
        self._handlers: dict[str, Handler] = {}
        self._lease = lease
        self._max_delay = max_delay
        self._max_attempts = max_attempts
        self.wakeup = Wakeup()  # set it after queuing a job to start it at once
        self._before_first: Callable[[], object] | None = None

    def register(self, kind: JobKind, handler: Handler) -> None:
        self._handlers[kind] = handler

    def before_first_job(self, prepare: Callable[[], object]) -> None:
        """Have ``prepare`` run once (until it succeeds) before this runner claims its first job:
        what registers handlers late (the services the app builds on first use) does so by then,
        and no job is claimed by a runner that would not know its kind."""
        self._before_first = prepare

    async def step(self) -> float:
        """One round for ``background.supervise``: run a due job, or say how long until one is due."""
        return 0.0 if await self.run_once() else await self._until_due()

    async def run_once(self) -> bool:
        """Run the next due job, if any; returns whether one ran (or was put back to wait)."""
        if self._before_first is not None:
            self._before_first()
            self._before_first = None
        now = datetime.now(UTC)
        paused, _ = await self._paused(now)
        job = await self._store.claim_job(
            format_timestamp(now), format_timestamp(now + timedelta(seconds=self._lease)), paused
        )
        if job is None:
            return False
        handler = self._handlers.get(job.kind)
        try:
            if handler is None:
                raise OllamaMcpError(f"No handler for background job kind {job.kind!r}; this version cannot run it.")
            await self._run_leased(handler, job)
        except ChatBudgetSpent as exc:  # another process took the last call, or a job needed more
            log.info("background job %d (%s) waits for the chat-model budget until %s", job.id, job.kind, exc.resume_at)
            await self._store.defer_job(job.id, exc.resume_at, str(exc))
        except (OllamaUnavailableError, OllamaModelError) as exc:
            # Waiting for Ollama or for a model: not the job's fault, so no attempt is used up.
            await self._retry(job, str(exc), count=False)
        except OllamaMcpError as exc:
            await self._retry(job, str(exc), count=True)
        except Exception as exc:
            log.exception("background job %d (%s) failed", job.id, job.kind)
            await self._retry(job, f"internal error ({type(exc).__name__}); details are in the server log.", count=True)
        return True

    async def _run_leased(self, handler: Handler, job: Job) -> None:
        """Run the handler while renewing the job's lease, admitted by the chat-model budget if it
        calls the chat model (``ChatBudgetSpent`` if none is free); its exception comes out unwrapped."""
        admitted = self.budget.admitted(job.kind) if self.budget and job.kind in CHAT_JOBS else nullcontext()
        async with beside() as tasks:
            tasks.start_soon(self._keep_lease, job)
            with audit.through("background"):
                async with admitted:
                    await handler(job)

    async def _keep_lease(self, job: Job) -> None:
        while True:
            await anyio.sleep(self._lease / 3)
            until = datetime.now(UTC) + timedelta(seconds=self._lease)
            await self._store.renew_job(job.id, format_timestamp(until))

    async def _retry(self, job: Job, error: str, *, count: bool) -> None:
        if count and job.attempts >= self._max_attempts:
            log.warning("background job %d (%s) failed after %d attempts: %s", job.id, job.kind, job.attempts, error)
            await self._store.fail_job(
                job, f"Gave up after {job.attempts} attempts: {error}", format_timestamp(datetime.now(UTC))
            )
            return
        delay = min(self._max_delay, 2.0 ** min(job.attempts, 20))
        log.info("background job %d (%s) will be retried in %.0f s: %s", job.id, job.kind, delay, error)
        await self._store.retry_job(
            job.id, format_timestamp(datetime.now(UTC) + timedelta(seconds=delay)), error
        )

    async def _paused(self, now: datetime) -> tuple[tuple[JobKind, ...], str | None]:
        """The kinds of job not to claim now (those that call the chat model, while its budget is
        spent), and when that ends."""
        if self.budget is None:
            return (), None
        state = await self.budget.state(now)
        return (CHAT_JOBS, state.next_at) if state.next_at is not None else ((), None)

    async def _until_due(self) -> float:
        now = datetime.now(UTC)
        paused, resumes = await self._paused(now)
        seconds = IDLE_POLL_SECONDS
        for due in (await self._store.next_job_time(paused), resumes):
            if due is not None:
                wait = datetime.strptime(due, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC) - now
                seconds = min(seconds, max(0.01, wait.total_seconds()))
        return seconds

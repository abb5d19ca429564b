"""A ceiling on the chat-model calls background work makes: summaries, compaction and fact
extraction together start at most ``OLLAMA_MCP_CHAT_CALLS_PER_HOUR`` calls in any hour (``0``
pauses them), counted in the store, so every process and instance on one store keeps to one
budget. Work over the budget waits: its job is not claimed, or is put back, until a call frees up
(``JobRunner``); nothing is dropped. ``ask_agent`` is a person asking and is not counted.

The budget admits jobs, not single calls: a job starts only if a call is free, taking it
(``ChatBudget.admitted``), and the further calls of a job once started (the second segment of a
long conversation's summary) are made and counted, not refused. Refusing them would throw away
the calls already made, and a job needing more calls than an hour allows would never finish. So
an hour may see one job's extra calls above the budget, and the next jobs wait until the last
hour's calls are back under it. A call that never reached a model (Ollama not running, the model
not pulled) is given back, so a week with Ollama stopped does not leave the budget spent on nothing.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from ollama_mcp.domain import JobKind, counted, format_timestamp
from ollama_mcp.errors import ChatBudgetSpent, OllamaModelError, OllamaUnreachableError
from ollama_mcp.ollama.client import ChatReply, OllamaClient
from ollama_mcp.storage.protocols import ChatCallStorage

WINDOW = timedelta(hours=1)
SETTING = "OLLAMA_MCP_CHAT_CALLS_PER_HOUR"
# The jobs that call the chat model: paused together when the budget is spent.
CHAT_JOBS: tuple[JobKind, ...] = ("summarize", "compact", "facts")
UNLIMITED = 2**62  # the limit a started job's further calls are recorded under


@dataclass
class _Admission:
    """The call a job took to start, until its first chat call uses it."""

    call_id: int | None


_admitted: ContextVar[_Admission | None] = ContextVar("ollama_mcp_chat_admission", default=None)


@dataclass(frozen=True)
class BudgetState:
    """The budget as it stands: calls allowed and made in the last hour, and when the next one may
    be made (None: now)."""

    per_hour: int
    used: int
    next_at: str | None

    @classmethod
    def of(cls, per_hour: int, used: int, oldest: str | None, now: datetime) -> BudgetState:
        """The state from the calls counted in the last hour (``used``, the ``oldest`` one's time):
        the next call may be made now, an hour after the oldest once the budget is used, or (0:
        paused) not before the setting changes, looked at again in an hour."""
        if per_hour == 0:
            return cls(per_hour, used, format_timestamp(now + WINDOW))
        if used < per_hour or oldest is None:
            return cls(per_hour, used, None)
        return cls(per_hour, used, format_timestamp(datetime.fromisoformat(oldest) + WINDOW))

    @property
    def paused(self) -> bool:
        return self.per_hour == 0

    def describe(self, waiting: int) -> str:
        """One line for stats, doctor and the Health page, with ``waiting`` jobs."""
        jobs = f"{waiting:,} job{'' if waiting == 1 else 's'} (summaries, compaction, facts) waiting"
        if self.paused:
            return f"paused ({SETTING}=0): {jobs}; set it above 0 to run them"
        said = f"{self.used:,} of {self.per_hour:,} chat-model calls used in the last hour; {jobs}"
        if self.next_at is not None:
            said += f"; the next call may be made at {self.next_at[:19].replace('T', ' ')} UTC"
        return said


class ChatBudget:
    """The hourly budget of chat-model calls of one store."""

    def __init__(self, store: ChatCallStorage, per_hour: int) -> None:
        self._store = store
        self.per_hour = per_hour

    async def state(self, now: datetime | None = None) -> BudgetState:
        now = now or datetime.now(UTC)
        used, oldest = await self._store.chat_calls_since(format_timestamp(now - WINDOW))
        return BudgetState.of(self.per_hour, used, oldest, now)

    @asynccontextmanager
    async def admitted(self, kind: str) -> AsyncIterator[None]:
        """Run a job of ``kind`` only if a call is free (``ChatBudgetSpent`` if not), taking it for
        the job's first chat call; the job's further calls are counted without limit. A job that
        made no call gives its call back."""
        admission = _Admission(await self.take(kind))
        token = _admitted.set(admission)
        try:
            yield
        finally:
            _admitted.reset(token)
            if admission.call_id is not None:
                await self.give_back(admission.call_id)

    async def spend(self, kind: str) -> int:
        """The call a chat request is about to make: the job's admission, else one more counted
        for a started job, else one taken within the budget."""
        admission = _admitted.get()
        if admission is None:
            return await self.take(kind)
        if admission.call_id is not None:
            call, admission.call_id = admission.call_id, None
            return call
        return await self.take(kind, limit=UNLIMITED)

    async def take(self, kind: str, *, limit: int | None = None) -> int:
        """Take one call for ``kind`` within ``limit`` (default: the budget): its id (to give it
        back), or ``ChatBudgetSpent``."""
        now = datetime.now(UTC)
        if self.per_hour == 0 and limit is None:
            raise self._spent(format_timestamp(now + WINDOW))
        taken, oldest = await self._store.take_chat_call(
            kind, format_timestamp(now), format_timestamp(now - WINDOW), limit or self.per_hour
        )
        if taken is None:  # the hour's calls are all used: the next frees an hour after the oldest
            frees = BudgetState.of(self.per_hour, self.per_hour, oldest, now).next_at
            raise self._spent(frees or format_timestamp(now))
        return taken

    async def why_waiting(self, kind: str) -> str | None:
        """Why a queued job of ``kind`` is not run now (the budget is spent or paused), else None."""
        if kind not in CHAT_JOBS:
            return None
        state = await self.state()
        return None if state.next_at is None else str(self._spent(state.next_at))

    async def give_back(self, call_id: int) -> None:
        await self._store.give_back_chat_call(call_id)

    def _spent(self, resume_at: str) -> ChatBudgetSpent:
        if self.per_hour == 0:
            return ChatBudgetSpent(
                f"Background chat-model work is paused ({SETTING}=0); it waits until the setting allows calls.",
                resume_at,
            )
        return ChatBudgetSpent(
            f"Background work made its {counted(self.per_hour, 'chat-model call')} of the last hour ({SETTING}); "
            f"it waits until {resume_at[:19].replace('T', ' ')} UTC.",
            resume_at,
        )


class BudgetedChat:
    """The chat client as summaries, compaction and fact extraction use it: each call taken from
    the budget first, and given back if it never reached a model."""

    def __init__(self, client: OllamaClient, budget: ChatBudget, kind: str) -> None:
        self._client = client
        self._budget = budget
        self._kind = kind

    async def chat(
        self, model: str, messages: Sequence[Mapping[str, Any]], *, schema: Mapping[str, Any] | None = None,
        num_ctx: int | None = None, num_predict: int | None = None, repeat_penalty: float | None = None,
    ) -> ChatReply:
        call = await self._budget.spend(self._kind)
        try:
            return await self._client.chat(model, messages, schema=schema, num_ctx=num_ctx, num_predict=num_predict,
                                           repeat_penalty=repeat_penalty)
        except (OllamaUnreachableError, OllamaModelError):
            await self._budget.give_back(call)
            raise

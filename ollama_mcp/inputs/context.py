"""What a caller asks of a conversation's transcript, checked once at the door: the context to
build for a model (``context_request``), a page of its history (``history_request``), work asked
for now rather than at its trigger (``work_request``, ``job_id``), and a question for the local
agent (``agent_question``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from ollama_mcp.errors import InvalidInputError, JobNotFoundError
from ollama_mcp.inputs.fields import (
    MAX_QUERY_CHARS,
    MAX_TOP_K,
    actors,
    conversation_id,
    flag,
    integer,
    memory_id,
    text,
    threshold,
)

MAX_HISTORY = 500
MAX_TOKEN_BUDGET = 1_000_000

WorkKind = Literal["summarize", "compact", "facts"]


@dataclass(frozen=True)
class ContextRequest:
    """build_context's fields, checked (``ContextBuilder.build`` says what each does)."""

    conversation_id: str
    token_budget: int = 4000
    recent_messages: int = 20
    recall_k: int = 5
    query: str | None = None
    participants: frozenset[str] = frozenset()
    facts: bool = False
    recall_everywhere: bool = True
    recall_threshold: float | None = None


def context_request(
    conversation_id: object, token_budget: object = 4000, recent_messages: object = 20, recall_k: object = 5,
    query: object = None, participants: object = None, facts: object = False, *, recall_everywhere: bool = True,
    recall_threshold: object = None,
) -> ContextRequest:
    target = _conversation_id("conversation_id", conversation_id)
    if target is None:
        raise InvalidInputError("conversation_id", "is required", "pass the conversation to build context for")
    return ContextRequest(
        target,
        integer("token_budget", token_budget, 1, MAX_TOKEN_BUDGET),
        integer("recent_messages", recent_messages, 0, MAX_HISTORY),
        integer("recall_k", recall_k, 0, MAX_TOP_K),
        recall_threshold=threshold("recall_threshold", recall_threshold),
        query=None if query is None else text("query", query, MAX_QUERY_CHARS, what="search text"),
        participants=frozenset(actors("participants", participants)),
        facts=flag("facts", facts),
        recall_everywhere=recall_everywhere,
    )


@dataclass(frozen=True)
class HistoryRequest:
    """A page of a transcript: the latest ``limit`` turns before the turn ``before``."""

    conversation_id: str | None = None  # None: the current conversation
    limit: int = 20
    before: str | None = None


def history_request(conversation_id: object = None, limit: object = 20, before: object = None) -> HistoryRequest:
    return HistoryRequest(
        _conversation_id("conversation_id", conversation_id), integer("limit", limit, 1, MAX_HISTORY),
        None if before is None else memory_id("before", before),
    )


@dataclass(frozen=True)
class WorkRequest:
    """A summary, compaction or fact extraction asked for now, through a turn or not."""

    conversation_id: str
    kind: WorkKind
    through: str | None = None  # the turn it covers up to
    strategy: Literal["rolling", "hierarchical"] | None = None  # a compaction's, this once


def work_request(
    conversation_id: object, kind: object, through: object = None, strategy: object = None
) -> WorkRequest:
    target = _conversation_id("conversation_id", conversation_id)
    if target is None:
        raise InvalidInputError("conversation_id", "is required", "pass the conversation to work on")
    if kind != "summarize" and kind != "compact" and kind != "facts":
        raise InvalidInputError("kind", "must be summarize, compact or facts", "pass one of them")
    if strategy is not None and (kind != "compact" or (strategy != "rolling" and strategy != "hierarchical")):
        raise InvalidInputError(
            "strategy", "applies to a compaction only, and is rolling or hierarchical",
            "pass one of them to compact, or leave it out",
        )
    return WorkRequest(target, kind, None if through is None else memory_id("through", through), strategy)


def job_id(value: object) -> int:
    """A job's id as ``request`` returned it; anything else names no job."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise JobNotFoundError(str(value))
    return value


@dataclass(frozen=True)
class AgentQuestion:
    """ask_agent's fields, checked: the question, the conversation it is about (None: every one,
    from the current conversation or a new one), and how far the run may read."""

    query: str
    conversation_id: str | None = None
    scope: Literal["conversation", "all"] | None = None  # None: conversation when one is given

    @property
    def confined(self) -> bool:
        return self.scope == "conversation" or (self.scope is None and self.conversation_id is not None)


def agent_question(query: object, conversation_id: object = None, scope: object = None) -> AgentQuestion:
    question = text("query", query, MAX_QUERY_CHARS, what="question")
    if scope is not None and scope != "conversation" and scope != "all":
        raise InvalidInputError("scope", "must be 'conversation' or 'all'", "omit it or pass one of those")
    return AgentQuestion(question, _conversation_id("conversation_id", conversation_id), scope)


_conversation_id = conversation_id

"""The REST API's wire: its path prefix, what a request may send (strict: an unknown field or a
wrong type is refused, naming it) and what each answer holds. The OpenAPI document is generated
from these (``api.openapi``), so the shapes are written once. The rules a schema cannot say are
the handlers' (``inputs/``: the same builders the MCP tools use).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from ollama_mcp.domain import Conversation, JobStatus, Memory, OpenTurn, SearchHit
from ollama_mcp.folds import ALSO_SHOWN

PREFIX = "/api/v1"  # where the host mounts the API


class Body(BaseModel):
    """A request body: only the fields below, each of its type (no "5" for 5)."""

    model_config = ConfigDict(extra="forbid", strict=True)


class ConversationIn(Body):
    name: str | None = None
    metadata: dict[str, Any] | None = Field(default=None, description="Yours; a few keys are settings (README).")
    id: str | None = Field(default=None, description="A UUID you minted: creating it again returns it (200).")
    follows: str | None = Field(default=None, description="The id of the conversation this one continues.")


class EndIn(Body):
    summary: str | None = Field(default=None, description="Without one, the local model writes it (pending).")


class TokensIn(Body):
    prompt: int | None = None
    completion: int | None = None


class TurnIn(Body):
    role: Literal["user", "assistant", "system", "tool"]
    content: str | None = Field(default=None, description="null or empty only for an assistant turn with tool_calls.")
    actor: str | None = Field(default=None, description="Who spoke, when several share the conversation.")
    to: list[str] | None = Field(default=None, description="Addressed to these participants only.")
    tool_calls: list[dict[str, Any]] | None = None
    tool_call_id: str | None = None
    occurred_at: str | None = Field(default=None, description="ISO 8601, when it was said if not now.")
    tokens: TokensIn | None = None
    model: str | None = None
    adapter: str | None = None
    metadata: dict[str, Any] | None = Field(default=None, description="The app's own, returned with the turn.")
    status: Literal["open"] | None = Field(
        default=None, description='"open": stream it (empty content; PATCH /turns/{id} adds, POST .../commit ends).')


class AppendIn(Body):
    append: str = Field(description="The next part of the turn's text.")


class EditIn(Body):
    content: str


class RegenerateIn(Body):
    content: str = Field(description="The new answer.")
    model: str | None = Field(default=None, description="The model that wrote it.")


class CommitIn(Body):
    tokens: TokensIn | None = None
    model: str | None = None


class OpenTurnOut(BaseModel):
    """A turn being streamed, or aborted (kept, never a message)."""

    id: str
    conversation_id: str
    role: str
    content: str = Field(description="The text so far.")
    status: Literal["open", "aborted"]
    created_at: str
    updated_at: str

    @classmethod
    def of(cls, t: OpenTurn) -> OpenTurnOut:
        return cls(id=t.id, conversation_id=t.conversation_id, role=str(t.fields.get("role")), content=t.content,
                   status=t.state, created_at=t.created_at, updated_at=t.updated_at)  # type: ignore[arg-type]


class RecallIn(Body):
    query: str
    k: int = Field(default=5, description="1-100.")
    threshold: float | None = Field(default=None, description="Minimum cosine similarity, -1 to 1.")
    scope: Literal["conversation", "all"] = "conversation"
    kinds: list[Literal["note", "message", "summary", "fact"]] | None = Field(
        default=None, description="Only these kinds of memory; default every kind."
    )
    include_superseded: bool = Field(
        default=False, description="Also replaced versions, and each changed fact's earlier statements after it."
    )


class SemanticRecallIn(Body):
    k: int = 5
    threshold: float | None = None


class ContextIn(Body):
    token_budget: int
    recent_turns: int = 20
    semantic_recall: SemanticRecallIn | None = None
    include_facts: bool = False
    participants: list[str] | None = None
    query: str | None = Field(default=None, description="Recall for this instead of the latest user turn.")


THROUGH = "A turn's id: read the turns up to it only (default: every turn so far)."


class SummarizeIn(Body):
    through: str | None = Field(default=None, description=THROUGH)


class CompactIn(Body):
    strategy: Literal["rolling", "hierarchical"] | None = Field(
        default=None, description="This compaction only (default: the conversation's compaction_strategy).")
    through: str | None = Field(
        default=None, description="A turn's id: fold the turns up to it into the rolling summary (default: the "
                                  "older half of what is not yet compacted).")


class FactsIn(Body):
    through: str | None = Field(default=None, description=THROUGH)


class JobOptions(BaseModel):
    through: str | None = None
    strategy: str | None = None


class JobOut(BaseModel):
    """A background job: queued, running, done, or failed with why (last_error also says why it waits)."""

    id: int
    kind: Literal["summarize", "compact", "facts", "relate"]
    conversation_id: str
    state: Literal["queued", "running", "done", "failed"]
    attempts: int
    last_error: str | None = None
    created_at: str
    finished_at: str | None = None
    options: JobOptions | None = Field(default=None, description="What it was asked beyond its kind.")

    @classmethod
    def of(cls, j: JobStatus) -> JobOut:
        return cls(id=j.id, kind=j.kind, conversation_id=j.conversation_id, state=j.state,  # type: ignore[arg-type]
                   attempts=j.attempts, last_error=j.last_error, created_at=j.created_at, finished_at=j.finished_at,
                   options=JobOptions(through=j.options.get("through"), strategy=j.options.get("strategy"))
                   if j.options else None)


class ConversationOut(BaseModel):
    """A conversation; a field with no value (an unnamed one's name) is left out."""

    id: str
    name: str | None = None
    title: str | None = None
    status: Literal["active", "completed"]
    created_at: str
    ended_at: str | None = None
    metadata: dict[str, Any]
    summary: str | None = None
    summary_status: str

    @classmethod
    def of(cls, c: Conversation) -> ConversationOut:
        return cls(
            id=c.id, name=c.name, title=c.title, status=c.status, created_at=c.created_at, ended_at=c.ended_at,
            metadata=c.metadata, summary=c.summary, summary_status=c.summary_status,
        )


class ConversationCreated(ConversationOut):
    created: bool = Field(description="False: a conversation with this id existed, and is returned unchanged.")


class ConversationList(BaseModel):
    conversations: list[ConversationOut]


class ConversationDeleted(BaseModel):
    id: str
    memories_deleted: int


class TurnTokens(BaseModel):
    prompt: int | None = None
    completion: int | None = None


class TurnOut(BaseModel):
    id: str
    conversation_id: str
    role: str | None = None
    content: str
    actor: str | None = None
    to: list[str] | None = None
    tool_calls: list[dict[str, Any]] | None = None
    tool_call_id: str | None = None
    created_at: str
    occurred_at: str
    tokens: TurnTokens | None = None
    model: str | None = None
    adapter: str | None = None
    metadata: dict[str, Any] | None = Field(default=None, description="The app's own, as it was sent.")
    revised: Literal["edited", "regenerated"] | None = Field(default=None, description="How its text last changed.")
    earlier_versions: list[dict[str, Any]] | None = Field(
        default=None, description="What it said before, oldest first (content, or content_sha256 when long).")

    @classmethod
    def of(cls, m: Memory) -> TurnOut:
        meta = m.metadata or {}
        return cls(
            id=m.id, conversation_id=m.conversation_id, role=m.role, content=m.content, actor=m.actor,
            to=meta.get("to"), tool_calls=list(m.tool_calls) or None, tool_call_id=m.tool_call_id,
            metadata=meta.get("app") if isinstance(meta.get("app"), dict) else None,
            created_at=m.created_at, occurred_at=m.occurred_at,
            tokens=TurnTokens(**meta["tokens"]) if isinstance(meta.get("tokens"), dict) else None,
            model=meta.get("model"), adapter=meta.get("adapter"), revised=meta.get("revised"),
            earlier_versions=meta.get("earlier_versions"),
        )


class TurnAdded(TurnOut):
    duplicate: bool = Field(description="True: the same turn was just sent; it was kept once.")


class TurnPage(BaseModel):
    turns: list[TurnOut]
    earlier: bool = Field(description="Whether older turns exist: pass the first one's id as before.")


class RecallPlace(BaseModel):
    memory_id: str
    conversation_id: str
    kind: str
    occurred_at: str


class RecallHit(BaseModel):
    memory_id: str
    conversation_id: str
    kind: str
    content: str
    similarity: float | None = None  # none for a memory without a vector yet (found by its words)
    occurred_at: str
    project: str | None = None
    also_in: list[RecallPlace] | None = None  # the same fact said elsewhere, shown once here (ALSO_SHOWN)
    also_more: int | None = None  # how many more places said it
    via: str | None = None  # a turn found through the turn before it: that turn's words
    # A changed fact: the memory that superseded this one, why, and the one that holds now.
    superseded_by: str | None = None
    superseded_because: str | None = None
    current_memory_id: str | None = None

    @classmethod
    def of(cls, h: SearchHit) -> RecallHit:
        m = h.memory
        changed = h.superseded
        return cls(
            memory_id=m.id, conversation_id=m.conversation_id, kind=m.kind, content=m.content,
            similarity=h.similarity, occurred_at=m.occurred_at, project=h.project,
            also_in=[RecallPlace(memory_id=o.id, conversation_id=o.conversation_id, kind=o.kind,
                                 occurred_at=o.occurred_at) for o in h.also[:ALSO_SHOWN]] or None,
            also_more=len(h.also) - ALSO_SHOWN if len(h.also) > ALSO_SHOWN else None, via=h.via,
            superseded_by=None if changed is None else changed.by.id,
            superseded_because=None if changed is None else changed.grounds,
            current_memory_id=None if changed is None else changed.current.id,
        )


class Recalled(BaseModel):
    hits: list[RecallHit]
    mode: Literal["hybrid", "keyword", "list"]
    notice: str | None = None


class ContextMessage(BaseModel):
    """A chat message as OpenAI-style APIs take it: an assistant turn that called tools keeps its
    tool_calls (content null when it said nothing), a tool turn the id of the call it answers."""

    role: str
    content: str | None
    tool_calls: list[dict[str, Any]] | None = None
    tool_call_id: str | None = None


class ContextOut(BaseModel):
    messages: list[ContextMessage] = Field(description="In order, ready to hand to a chat model.")
    tokens: int = Field(description="Their estimated tokens, within token_budget.")
    summary_included: bool
    recalled: list[str] = Field(description="The ids of the memories recalled into it.")


class ErrorOut(BaseModel):
    error: str = Field(description="What is wrong and how to fix it.")
    field: str | None = Field(default=None, description="The field at fault, when one is.")

"""The pydantic models of tool results: the MCP-facing shape of domain values (and their schema)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel

from ollama_mcp.domain import (
    AgentAnswer,
    Conversation,
    ConversationShare,
    DeletedConversation,
    EndedConversation,
    Export,
    MatchReason,
    Memory,
    MemoryPage,
    SearchHit,
    SearchOutcome,
    ShareAccess,
    StoredMemory,
    SummaryStatus,
    counted,
)
from ollama_mcp.folds import ALSO_SHOWN
from ollama_mcp.services.passages import fit


class ConversationCreated(BaseModel):
    conversation_id: str
    name: str | None
    created_at: str
    status: Literal["created"] = "created"
    follows: str | None = None  # the conversation it continues

    @classmethod
    def of(cls, c: Conversation, follows: str | None = None) -> ConversationCreated:
        return cls(conversation_id=c.id, name=c.name, created_at=c.created_at, follows=follows)


class ConversationInfo(BaseModel):
    conversation_id: str
    name: str | None
    status: Literal["active", "completed"]
    anonymous: bool
    created_at: str
    ended_at: str | None
    memory_count: int

    @classmethod
    def of(cls, c: Conversation) -> ConversationInfo:
        return cls(
            conversation_id=c.id, name=c.name, status=c.status, anonymous=c.anonymous,
            created_at=c.created_at, ended_at=c.ended_at, memory_count=c.memory_count,
        )


class ListedConversation(ConversationInfo):
    """A conversation as list_conversations shows it: with its activity, messages and settings,
    and a title (its name, else the start of its summary or first memory: ``Conversation.title``)."""

    title: str | None
    last_activity: str
    message_count: int
    summary_status: SummaryStatus
    metadata: dict[str, Any]
    owner: str | None = None  # set on a conversation another principal shares with the caller
    access: ShareAccess | None = None

    @classmethod
    def of(cls, c: Conversation, share: ConversationShare | None = None) -> ListedConversation:
        return cls(
            **ConversationInfo.of(c).model_dump(), title=c.title, last_activity=c.last_activity or c.created_at,
            message_count=c.message_count, summary_status=c.summary_status, metadata=c.metadata,
            owner=None if share is None else share.owner, access=None if share is None else share.access,
        )


class MessagesAdded(BaseModel):
    conversation_id: str
    message_ids: list[str]
    duplicate: bool  # the same turns were just recorded: a retry, nothing added

    @classmethod
    def of(cls, messages: list[Memory], retry: bool) -> MessagesAdded:
        return cls(conversation_id=messages[0].conversation_id, message_ids=[m.id for m in messages], duplicate=retry)


class SharedWith(BaseModel):
    principal: str
    access: ShareAccess
    since: str


class ConversationShared(BaseModel):
    conversation_id: str
    shared_with: list[SharedWith]

    @classmethod
    def of(cls, conversation_id: str, shares: list[ConversationShare]) -> ConversationShared:
        return cls(conversation_id=conversation_id, shared_with=[
            SharedWith(principal=s.grantee, access=s.access, since=s.granted_at) for s in shares
        ])


class CurrentConversation(BaseModel):
    current: ConversationInfo | None

    @classmethod
    def of(cls, c: Conversation | None) -> CurrentConversation:
        return cls(current=None if c is None else ConversationInfo.of(c))


class ConversationList(BaseModel):
    conversations: list[ListedConversation]


class MemoryStored(BaseModel):
    memory_id: str
    conversation_id: str
    stored_at: str
    embedding_status: Literal["embedded", "pending"]
    embedding_dimension: int | None
    duplicate: bool
    note: str | None = None

    @classmethod
    def of(cls, s: StoredMemory) -> MemoryStored:
        note = s.embedding_note
        if s.duplicate:
            note = "This content was already stored in this conversation; returned the existing memory." + (
                f" {note}" if note else ""
            )
        return cls(
            memory_id=s.memory.id, conversation_id=s.memory.conversation_id, stored_at=s.memory.created_at,
            embedding_status=s.embedding_status, embedding_dimension=s.embedding_dimension,
            duplicate=s.duplicate, note=note,
        )


class Place(BaseModel):
    """Another place a hit's fact was said (folded into the hit: folds.fold)."""

    memory_id: str
    conversation_id: str
    kind: Literal["note", "message", "summary", "fact"]
    occurred_at: str

    @classmethod
    def of(cls, m: Memory) -> Place:
        return cls(memory_id=m.id, conversation_id=m.conversation_id, kind=m.kind, occurred_at=m.occurred_at)


class Hit(BaseModel):
    memory_id: str
    conversation_id: str
    content: str  # whole, or its passages that match the query cut at "[…]" (then length is set)
    similarity: float | None
    created_at: str
    tags: list[str]
    kind: Literal["note", "message", "summary", "fact"]
    occurred_at: str | None = None  # when it happened, if not when it was stored
    matched: list[MatchReason] | None = None  # why it is a hit (none for a listing)
    length: int | None = None  # the whole memory's characters, when content shows passages of it
    project: str | None = None  # its conversation's project, when it has one
    also_in: list[Place] | None = None  # the same fact said elsewhere, shown once here (the first ALSO_SHOWN)
    also_more: int | None = None  # how many more places said it (beyond also_in)
    via: str | None = None  # a turn found through the turn before it: that turn's words
    # A changed fact: the memory that superseded this one, why, and what holds now.
    superseded_by: str | None = None
    superseded_because: str | None = None
    current: Current | None = None


class Current(BaseModel):
    """What holds now of what a superseded hit said: the newest statement of it (clipped)."""

    memory_id: str
    content: str
    occurred_at: str

    @classmethod
    def of(cls, m: Memory) -> Current:
        text = m.content if len(m.content) <= CURRENT_CHARS else m.content[:CURRENT_CHARS].rstrip() + " […]"
        return cls(memory_id=m.id, content=text, occurred_at=m.occurred_at)


CURRENT_CHARS = 300  # of the current statement a superseded hit carries


class SearchResults(BaseModel):
    results: list[Hit]
    mode: Literal["hybrid", "keyword", "list"]
    searched: Literal["conversation", "related", "all"]  # one, one with its relations, or every one
    search_time_ms: float
    notice: str | None = None

    @classmethod
    def of(cls, outcome: SearchOutcome, query: str, budget: int) -> SearchResults:
        """The hits within ``budget`` characters of memory text (``passages.fit``): a long
        memory by its passages that match ``query``; hits that get no useful share are left out,
        and the notice says so."""
        results = []
        for h, shown in zip(outcome.hits, fit([h.memory.content for h in outcome.hits], query, budget,
                                                         [h.closest for h in outcome.hits]), strict=False):
            results.append(Hit(
                memory_id=h.memory.id, conversation_id=h.memory.conversation_id, content=shown.text,
                similarity=h.similarity, created_at=h.memory.created_at, tags=list(h.memory.tags),
                kind=h.memory.kind,
                occurred_at=None if h.memory.occurred_at == h.memory.created_at else h.memory.occurred_at,
                matched=list(h.matched) or None, length=shown.length if shown.clipped else None,
                project=h.project, also_in=[Place.of(m) for m in h.also[:ALSO_SHOWN]] or None,
                also_more=len(h.also) - ALSO_SHOWN if len(h.also) > ALSO_SHOWN else None, via=h.via,
                **_superseded(h),
            ))
        said = [outcome.notice] if outcome.notice else []
        if any(r.length is not None for r in results):
            said.append("Long memories show the passages that match, cut at […]; read_memory reads one whole.")
        if left_out := len(outcome.hits) - len(results):
            said.append(
                f"{counted(left_out, 'more hit was', 'more hits were')} left out to keep this answer within"
                f" {budget:,} characters of memory text (OLLAMA_MCP_RESPONSE_CHARS); lower top_k or narrow the search."
            )
        return cls(
            results=results, mode=outcome.mode, searched=outcome.searched, search_time_ms=outcome.elapsed_ms,
            notice=" ".join(said) or None,
        )


class MemoryRead(BaseModel):
    memory_id: str
    conversation_id: str
    kind: Literal["note", "message", "summary", "fact"]
    created_at: str
    tags: list[str]
    page: int
    pages: int
    content: str  # this page of the whole text

    @classmethod
    def of(cls, p: MemoryPage) -> MemoryRead:
        m = p.memory
        return cls(
            memory_id=m.id, conversation_id=m.conversation_id, kind=m.kind, created_at=m.created_at,
            tags=list(m.tags), page=p.page, pages=p.pages, content=p.text,
        )


class ConversationEnded(BaseModel):
    conversation_id: str
    status: Literal["completed"] = "completed"
    final_memory_count: int
    ended_at: str
    # given: the summary passed in; pending: the local chat model writes one in the background;
    # none: nothing to summarize, or no chat model configured.
    summary_status: Literal["none", "given", "pending", "done", "failed"]

    @classmethod
    def of(cls, e: EndedConversation) -> ConversationEnded:
        return cls(
            conversation_id=e.conversation.id, final_memory_count=e.final_memory_count,
            ended_at=e.conversation.ended_at or "", summary_status=e.conversation.summary_status,
        )


class MemoryUpdated(BaseModel):
    memory_id: str  # the new version
    previous_id: str
    conversation_id: str
    embedding_status: Literal["embedded", "pending"]
    note: str | None = None

    @classmethod
    def of(cls, old: Memory, new: StoredMemory) -> MemoryUpdated:
        return cls(
            memory_id=new.memory.id, previous_id=old.id, conversation_id=new.memory.conversation_id,
            embedding_status=new.embedding_status, note=new.embedding_note,
        )


class ConversationExport(BaseModel):
    conversation_id: str
    format: Literal["markdown", "json"]
    page: int
    pages: int
    markdown: str | None = None
    data: dict[str, Any] | None = None

    @classmethod
    def of(cls, e: Export) -> ConversationExport:
        return cls(
            conversation_id=e.conversation_id, format=e.format,
            page=e.page, pages=e.pages, markdown=e.markdown, data=e.data,
        )


class ConversationDeleted(BaseModel):
    conversation_id: str
    name: str | None
    memories_deleted: int  # every version, message and summary
    deleted: Literal[True] = True

    @classmethod
    def of(cls, d: DeletedConversation) -> ConversationDeleted:
        return cls(conversation_id=d.conversation.id, name=d.conversation.name, memories_deleted=d.memories)


class MemoryDeleted(BaseModel):
    memory_id: str
    conversation_id: str
    deleted: Literal[True] = True

    @classmethod
    def of(cls, m: Memory) -> MemoryDeleted:
        return cls(memory_id=m.id, conversation_id=m.conversation_id)


class AgentReply(BaseModel):
    conversation_id: str
    response: str
    tools_used: list[str]
    steps: int
    model: str
    note: str | None = None

    @classmethod
    def of(cls, a: AgentAnswer) -> AgentReply:
        return cls(
            conversation_id=a.conversation_id, response=a.response, tools_used=a.tools_used, steps=a.steps,
            model=a.model, note=a.note,
        )


def _superseded(h: SearchHit) -> dict[str, Any]:
    """A superseded hit's fields (none for one that holds)."""
    if h.superseded is None:
        return {}
    return {"superseded_by": h.superseded.by.id, "superseded_because": h.superseded.grounds,
            "current": Current.of(h.superseded.current)}

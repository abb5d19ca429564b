"""The MCP tools: each validates its arguments, makes one service call and shapes the result
(``results``). Who serves the call and how our errors reach the model is ``calls.tool_call``'s
business; what may be shared, ``sharing``'s. Keep each description to one line: tools/list is paid
for on every turn.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Annotated, Any, Literal

import anyio
from mcp.server import MCPServer
from mcp.server.mcpserver import AcceptedElicitation, Context, DeclinedElicitation
from mcp.shared.exceptions import NoBackChannelError
from mcp.types import CallToolResult, ToolAnnotations
from pydantic import BaseModel, Field

from ollama_mcp.errors import InvalidInputError
from ollama_mcp.inputs import fields
from ollama_mcp.inputs.context import agent_question
from ollama_mcp.inputs.conversations import conversation_query, new_conversation
from ollama_mcp.inputs.fields import conversation_id as checked_conversation_id
from ollama_mcp.inputs.memories import note, note_change
from ollama_mcp.inputs.search import search_request
from ollama_mcp.inputs.turns import parse_turns
from ollama_mcp.mcp.calls import begin_search, reply, sharing_of, tool_call
from ollama_mcp.mcp.results import (
    AgentReply,
    ConversationCreated,
    ConversationDeleted,
    ConversationEnded,
    ConversationExport,
    ConversationList,
    ConversationShared,
    CurrentConversation,
    ListedConversation,
    MemoryDeleted,
    MemoryRead,
    MemoryStored,
    MemoryUpdated,
    MessagesAdded,
    SearchResults,
)
from ollama_mcp.mcp.sharing import Sharing

if TYPE_CHECKING:
    from ollama_mcp.services.agent import Confirm, Decision

log = logging.getLogger(__name__)

# Only hints that differ from the spec's defaults (read_only false, destructive true,
# idempotent false, open_world true) are spelled out: they are sent on every tools/list.
_READ = ToolAnnotations(read_only_hint=True, open_world_hint=False)
_WRITE = ToolAnnotations(destructive_hint=False, open_world_hint=False)
_IDEMPOTENT_WRITE = ToolAnnotations(destructive_hint=False, idempotent_hint=True, open_world_hint=False)
_DELETE = ToolAnnotations(idempotent_hint=True, open_world_hint=False)
_AGENT = ToolAnnotations(open_world_hint=False)  # may delete, but only after the human confirms

ConversationId = str | None  # default: the current conversation (init_conversation says so)
Tags = Annotated[list[str] | None, Field(description="Must have all.")]
TopK = int  # 1-100: a bad one is refused saying so
Threshold = float | None  # minimum cosine similarity, 0-1: a bad one is refused saying so
# Every kind is searched unless narrowed to one: notes, recorded and imported turns, summaries, facts.
Kind = Literal["note", "message", "summary", "fact"] | None
# Earlier versions, and each changed fact's earlier statements after it: the name says it, and the
# tools list pays for every description (tests/test_packaging.py's budget).
Superseded = bool
Query = Annotated[str, Field(description='"*" lists them newest first.')]
Project = Annotated[str | None, Field(description="Folder name or path.")]


async def init_conversation(
    ctx: Context,
    name: str | None = None,
    metadata: Annotated[
        dict[str, Any] | None, Field(description="Yours, e.g. project; ttl_hours deletes it after.")
    ] = None,
    follows: Annotated[str | None, Field(description="Conversation it continues.")] = None,
) -> Annotated[CallToolResult, ConversationCreated]:
    """Start a conversation and make it current; returns its id."""
    async with tool_call(ctx) as app:
        new = new_conversation(name, metadata, follows)
        return reply(ConversationCreated.of(await app.conversations.start(new), new.follows))


async def get_conversation_id(ctx: Context) -> Annotated[CallToolResult, CurrentConversation]:
    """The current conversation, or null."""
    async with tool_call(ctx) as app:
        return reply(CurrentConversation.of(await app.conversations.current()))


async def store_memory(
    ctx: Context,
    content: str,
    conversation_id: ConversationId = None,
    tags: list[str] | None = None,
    metadata: dict[str, Any] | None = None,
    embedding: Annotated[list[float] | None, Field(description="From the server's model.")] = None,
    occurred_at: Annotated[str | None, Field(description="ISO 8601.")] = None,
) -> Annotated[CallToolResult, MemoryStored]:
    """Save a fact, decision or preference; storing it again returns the first."""
    async with tool_call(ctx, conversation_id, "write") as app:
        given = note(
            content, conversation_id, tags, metadata, embedding, occurred_at, max_chars=app.settings.max_content_chars
        )
        stored = await app.memories.store(given)
        return reply(MemoryStored.of(stored))


async def update_memory(
    ctx: Context,
    memory_id: str,
    content: str | None = None,
    tags: list[str] | None = None,
    metadata: dict[str, Any] | None = None,
) -> Annotated[CallToolResult, MemoryUpdated]:
    """Correct a memory: a new version, omitted fields kept, the old one as history."""
    async with tool_call(ctx) as app:
        change = note_change(memory_id, content, tags, metadata, max_chars=app.settings.max_content_chars)
        old, new = await app.memories.update(change)
        return reply(MemoryUpdated.of(old, new))


async def add_messages(
    ctx: Context,
    messages: Annotated[list[dict[str, Any]], Field(description=(
        "[{role, content, actor?, to?: [actors], tool_calls?, tool_call_id?, occurred_at?, metadata?}]"
    ))],
    conversation_id: ConversationId = None,
) -> Annotated[CallToolResult, MessagesAdded]:
    """Record chat turns in the transcript, in order; a retried call adds nothing."""
    async with tool_call(ctx, conversation_id, "write") as app:
        turns = parse_turns("messages", messages, app.settings.max_content_chars)
        target = checked_conversation_id("conversation_id", conversation_id)
        added, retry = await app.transcript.add_messages(target, turns)
        return reply(MessagesAdded.of(added, retry))


async def search_memories(
    ctx: Context,
    query: Query,
    conversation_id: Annotated[str | None, Field(description="Default: current, else all.")] = None,
    top_k: TopK = 5,
    threshold: Threshold = None,
    tags: Tags = None,
    since: str | None = None,  # ISO 8601, like until: a bad one is refused saying so
    until: str | None = None,
    kind: Kind = None,
    include_superseded: Superseded = False,
    actor: Annotated[str | None, Field(description="Only this participant's.")] = None,
    reference_time: Annotated[str | None, Field(description="Now, for 'last week' etc.")] = None,
    project: Project = None,
) -> Annotated[CallToolResult, SearchResults]:
    """This conversation's memories by meaning and keywords, best first."""
    begin_search(ctx, query)
    async with tool_call(ctx, conversation_id) as app:
        request = search_request(
            query, conversation_id, top_k, threshold, tags, since, until, kind, include_superseded,
            actor, reference_time=reference_time, project=project,
        )
        return reply(SearchResults.of(await app.recall.search(request), request.query, app.settings.response_chars))


async def search_all_conversations(
    ctx: Context, query: Query, top_k: TopK = 5, threshold: Threshold = None, tags: Tags = None,
    kind: Kind = None,
    related_to: Annotated[str | None, Field(description="This conversation and related ones.")] = None,
    project: Project = None, include_superseded: Superseded = False,
) -> Annotated[CallToolResult, SearchResults]:
    """search_memories across every conversation, ended ones too."""
    begin_search(ctx, query)
    async with tool_call(ctx, related_to) as app:
        request = search_request(
            query, top_k=top_k, threshold=threshold, tags=tags, kinds=kind, everywhere=True,
            related_to=related_to, project=project, include_superseded=include_superseded,
        )
        sharing, principal = sharing_of(ctx)
        outcome = await sharing.search_all(principal, app, request)
        return reply(SearchResults.of(outcome, request.query, app.settings.response_chars))


async def read_memory(ctx: Context, memory_id: str, page: int = 1) -> Annotated[CallToolResult, MemoryRead]:
    """A memory's whole text, paged; searches show long ones by their passages."""
    return await _read_memory(ctx, memory_id, None, page)


async def read_shared_memory(
    ctx: Context,
    memory_id: str,
    conversation_id: Annotated[str | None, Field(description="Needed if shared with you.")] = None,
    page: int = 1,
) -> Annotated[CallToolResult, MemoryRead]:
    """A memory's whole text, paged; searches show long ones by their passages."""
    return await _read_memory(ctx, memory_id, conversation_id, page)


async def _read_memory(ctx: Context, memory_id: str, conversation_id: str | None, page: int) -> CallToolResult:
    """read_memory on any server; ``conversation_id`` names a conversation shared with the caller
    (only a server with tokens has shares, so only its read_memory takes one)."""
    async with tool_call(ctx, conversation_id) as app:
        read = await app.memories.read(
            fields.memory_id("memory_id", memory_id), checked_conversation_id("conversation_id", conversation_id),
            fields.integer("page", page, 1, 1_000_000), page_chars=app.settings.response_chars,
        )
        return reply(MemoryRead.of(read))


async def end_conversation(
    ctx: Context, conversation_id: ConversationId = None, summary: str | None = None
) -> Annotated[CallToolResult, ConversationEnded]:
    """Close a conversation; it stays searchable. Without a summary, the local model writes one."""
    async with tool_call(ctx, conversation_id, "own", "end it") as app:
        target = checked_conversation_id("conversation_id", conversation_id)
        text = None if summary is None else fields.text(
            "summary", summary, app.settings.max_content_chars, what="summary"
        )
        return reply(ConversationEnded.of(await app.conversations.end(target, text)))


async def list_conversations(
    ctx: Context,
    status: Annotated[str | None, Field(description="active or completed.")] = None,
    limit: int = 20,
    name: str | None = None,  # a part of the name
    metadata: dict[str, Any] | None = None,  # values it must hold
    order: Literal["activity", "created"] = "activity",
    project: Project = None,
) -> Annotated[CallToolResult, ConversationList]:
    """Conversations, latest activity first, with counts and metadata."""
    async with tool_call(ctx) as app:
        query = conversation_query(status, limit, name, metadata, order, project)
        sharing, principal = sharing_of(ctx)
        found = await sharing.listed(principal, app, query)
        return reply(ConversationList(conversations=[ListedConversation.of(c, share) for c, share in found]))


async def export_conversation(
    ctx: Context,
    conversation_id: ConversationId = None,
    format: Literal["markdown", "json"] = "markdown",
    page: int = 1,
) -> Annotated[CallToolResult, ConversationExport]:
    """A conversation: summary, memories (all versions) and messages."""
    async with tool_call(ctx, conversation_id) as app:
        target = checked_conversation_id("conversation_id", conversation_id) or await app.current.id()
        if target is None:
            raise InvalidInputError("conversation_id", "is required", "pass the conversation to export")
        if format not in ("markdown", "json"):
            raise InvalidInputError("format", "must be 'markdown' or 'json'", "pass one of them")
        number = fields.integer("page", page, 1, 1_000_000)
        return reply(ConversationExport.of(await app.archive.export_conversation(target, format, number)))


async def delete_conversation(ctx: Context, conversation_id: str) -> Annotated[CallToolResult, ConversationDeleted]:
    """Permanently delete a conversation and everything in it."""
    async with tool_call(ctx, conversation_id, "own", "delete it") as app:
        deleted = await app.conversations.delete(fields.required_conversation_id(
            "conversation_id", conversation_id, "pass the id of the conversation to delete"
        ))
        await sharing_of(ctx)[0].forget(deleted.conversation.id)
        return reply(ConversationDeleted.of(deleted))


async def delete_memory(ctx: Context, memory_id: str) -> Annotated[CallToolResult, MemoryDeleted]:
    """Permanently delete one memory with all its versions."""
    async with tool_call(ctx) as app:
        return reply(MemoryDeleted.of(await app.memories.delete(fields.memory_id("memory_id", memory_id))))


async def ask_agent(
    ctx: Context,
    query: str,
    conversation_id: ConversationId = None,
    scope: Annotated[
        Literal["conversation", "all"] | None, Field(description="Default: conversation if one is given.")
    ] = None,
) -> Annotated[CallToolResult, AgentReply]:
    """Hand a question to the local model: it searches memory itself and returns one answer."""
    async with tool_call(ctx, conversation_id, "own", "ask the agent about it") as app:
        confirm = _confirmer(ctx, app.settings.agent_confirm_timeout)
        asked = agent_question(query, conversation_id, scope)
        answer = await app.agent.ask(asked, confirm=confirm, progress=ctx.report_progress)
        return reply(AgentReply.of(answer))


async def share_conversation(
    ctx: Context,
    conversation_id: str,
    principal: Annotated[str, Field(description="Whose token may use it, such as bob.")],
    access: Annotated[
        Literal["read", "write", "none"], Field(description="write: also store in it; none: stop sharing.")
    ] = "read",
) -> Annotated[CallToolResult, ConversationShared]:
    """Let another person search and read a conversation of yours, or also add to it."""
    async with tool_call(ctx):
        sharing, owner = sharing_of(ctx)
        assert isinstance(sharing, Sharing), "registered only on a server with tokens (register_tools)"
        shared, shares = await sharing.share(owner, conversation_id, principal, access)
        return reply(ConversationShared.of(shared, shares))


class Confirmation(BaseModel):
    confirm: bool = Field(description="Allow it?")


def _confirmer(ctx: Context, timeout: float) -> Confirm | None:
    """Ask the human through MCP elicitation; None when the client cannot ask (high-risk tools
    are then refused, never run unconfirmed)."""
    capabilities = ctx.client_capabilities
    if capabilities is None or capabilities.elicitation is None:
        return None

    async def confirm(tool: str, question: str) -> Decision:
        with anyio.move_on_after(timeout):
            try:
                result = await ctx.elicit(question, Confirmation)
            except NoBackChannelError:
                return "unavailable"
            except Exception:  # the client could not show it: nothing was confirmed
                log.warning("asking the user to confirm %s failed", tool, exc_info=True)
                return "cancel"
            if isinstance(result, AcceptedElicitation):
                return "accept" if result.data.confirm else "decline"
            return "decline" if isinstance(result, DeclinedElicitation) else "cancel"
        return "cancel"

    return confirm


# In the order tools/list shows them.
TOOLS = (
    (init_conversation, _WRITE),
    (get_conversation_id, _READ),
    (store_memory, _IDEMPOTENT_WRITE),
    (update_memory, _WRITE),
    (add_messages, _IDEMPOTENT_WRITE),
    (search_memories, _READ),
    (search_all_conversations, _READ),
    (read_memory, _READ),
    (end_conversation, _WRITE),
    (list_conversations, _READ),
    (export_conversation, _READ),
    (delete_conversation, _DELETE),
    (delete_memory, _DELETE),
    (ask_agent, _AGENT),
)


def register_tools(server: MCPServer, *, sharing: bool, agent: bool) -> None:
    """Every tool on ``server``; ``share_conversation`` (and read_memory's ``conversation_id``)
    only where several people are served (``sharing``: a server with tokens), ``ask_agent`` only
    where a chat model may answer."""
    for tool, hints in TOOLS:
        if tool is read_memory and sharing:  # the same tool, taking the conversation shared with the caller
            server.tool(name="read_memory", annotations=hints)(read_shared_memory)
        elif agent or tool is not ask_agent:
            server.tool(annotations=hints)(tool)
    if sharing:
        server.tool(annotations=_IDEMPOTENT_WRITE)(share_conversation)

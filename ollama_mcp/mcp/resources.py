"""The MCP resources: Markdown pages of the conversation list, a conversation (paged), its
transcript (paged backwards) and its relations. Each reads through the app that serves its caller
(``calls.opened``) and translates errors once (``calls.resource_errors``).
"""

from __future__ import annotations

from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ResourceNotFoundError

from ollama_mcp.domain import Memory, OpenTurn, counted
from ollama_mcp.inputs import fields
from ollama_mcp.inputs.context import history_request
from ollama_mcp.inputs.conversations import conversation_query
from ollama_mcp.inputs.fields import conversation_id as checked_conversation_id
from ollama_mcp.mcp.apps import RunningApps
from ollama_mcp.mcp.calls import opened, resource_errors, sharing_of

RESOURCE_LIST_LIMIT = 100


def register_resources(server: MCPServer, running: RunningApps) -> None:
    """Every resource on ``server``; ``running`` tells the static list whose apps serve it."""

    @server.resource("memory://conversations", mime_type="text/markdown", description="The latest conversations.")
    async def conversations_resource() -> str:
        with resource_errors():
            app = await running.of_request()  # a static resource gets no Context: the request's token tells whose
            found = await app.conversations.listed(conversation_query(None, RESOURCE_LIST_LIMIT))
        lines = ["# Conversations", ""] + [
            f"- [{c.title or 'unnamed'}](memory://conversations/{c.id}) · {c.status}"
            f" · {counted(c.memory_count, 'memory', 'memories')} · {c.created_at[:10]}"
            for c in found
        ]
        return "\n".join(lines) + "\n"

    @server.resource(
        "memory://conversations/{conversation_id}", mime_type="text/markdown",
        description="A conversation as Markdown: summary, memories, transcript (first page).",
    )
    async def conversation_resource(conversation_id: str, ctx: Context) -> str:
        return await _conversation_page(ctx, conversation_id, 1)

    @server.resource(
        "memory://conversations/{conversation_id}/page/{page}", mime_type="text/markdown",
        description="Further pages of a long conversation.",
    )
    async def conversation_page_resource(conversation_id: str, page: str, ctx: Context) -> str:
        if not page.isdigit():
            raise ResourceNotFoundError(f"page must be a page number, got {page!r}")
        return await _conversation_page(ctx, conversation_id, int(page))

    @server.resource(
        "memory://conversations/{conversation_id}/history", mime_type="text/markdown",
        description="A conversation's latest transcript messages, oldest first, with a link to earlier ones.",
    )
    async def history_resource(conversation_id: str, ctx: Context) -> str:
        return await _history_page(ctx, conversation_id, None)

    @server.resource(
        "memory://conversations/{conversation_id}/history/before/{message_id}", mime_type="text/markdown",
        description="The transcript messages before one message.",
    )
    async def history_before_resource(conversation_id: str, message_id: str, ctx: Context) -> str:
        return await _history_page(ctx, conversation_id, message_id)

    @server.resource(
        "memory://conversations/{conversation_id}/relations", mime_type="text/markdown",
        description="Conversations it follows, is followed by, resembles or duplicates (with similarity).",
    )
    async def relations_resource(conversation_id: str, ctx: Context) -> str:
        return await _relations_page(ctx, conversation_id)


async def _conversation_page(ctx: Context, conversation_id: str, page: int) -> str:
    with resource_errors():
        app = await opened(ctx, conversation_id)
        target = fields.required_conversation_id("conversation_id", conversation_id, "pass the conversation to export")
        exported = await app.archive.export_conversation(target, "markdown", fields.integer("page", page, 1, 1_000_000))
    return exported.markdown or ""


HISTORY_PAGE = 50


async def _history_page(ctx: Context, conversation_id: str, before: str | None) -> str:
    """A page of the transcript as Markdown: one line per message, then where earlier ones are."""
    with resource_errors():
        app = await opened(ctx, conversation_id)
        asked = history_request(conversation_id, HISTORY_PAGE, before)
        target, messages, earlier = await app.transcript.history_page(asked)
        participants = await app.transcript.participants(target)
        writing = [] if before is not None else await app.streamed_turns.open_turns(target)
    seen = ", ".join(f"{p.name} ({p.role}, {p.messages})" if p.name != p.role else f"{p.name} ({p.messages})"
                     for p in participants)
    lines = [f"# Transcript of {target}", "", f"Participants: {seen or 'none yet'}", ""] + [
        f"- {m.created_at} · {m.role}{f' ({m.actor})' if m.actor else ''}{_addressed(m)} · {m.id}: {m.content}"
        for m in messages
    ]
    lines += [_being_written(t) for t in writing]  # streamed turns: their text so far, growing
    if earlier:
        lines += ["", f"Earlier: memory://conversations/{target}/history/before/{messages[0].id}"]
    return "\n".join(lines) + "\n"


def _being_written(turn: OpenTurn) -> str:
    """A streamed turn as a transcript line, marked as still being written."""
    actor = turn.fields.get("actor")
    return f"- {turn.created_at} · {turn.fields.get('role')}{f' ({actor})' if actor else ''} · {turn.id} (being " \
           f"written): {turn.content}"


async def _relations_page(ctx: Context, conversation_id: str) -> str:
    """A conversation's relations as Markdown, one line each; on a conversation shared with the
    caller, only those it may read too."""
    with resource_errors():
        app = await opened(ctx, conversation_id)
        key = checked_conversation_id("conversation_id", conversation_id) or ""
        conversation, relations = await app.relations.of(key)
        sharing, principal = sharing_of(ctx)
        allowed = await sharing.readable_beside(principal, key)
        relations = [r for r in relations if allowed is None or r.conversation_id in allowed]
    lines = [f"# Relations of {conversation.name or conversation.id}", ""]
    for r in relations:
        how = {"follow_up": "follows" if r.follows else "followed up by", "related": "related to",
               "duplicate": "duplicate of" if r.follows else "duplicated by"}[r.kind]
        score = "" if r.score is None else f" · similarity {r.score:.2f}"
        lines.append(f"- {how} [{r.name or 'unnamed'}](memory://conversations/{r.conversation_id}) · {r.status}{score}")
    if not relations:
        lines.append(
            "None yet: a conversation started with follows=ID continues that one, and an ended conversation's "
            "summary links it to the conversations it resembles."
        )
    return "\n".join(lines) + "\n"


def _addressed(message: Memory) -> str:
    to = message.metadata.get("to")
    return f" → {', '.join(to)}" if to else ""

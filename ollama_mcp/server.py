"""The MCP surface: ``build_server``, its lifespan, and the tools (thin: validate, call, shape).

Start-up: ``initialize`` must be answered at once (Claude Desktop gives up after 60 s, and users
notice seconds). So this module imports only the SDK and light modules of ours; the app (numpy,
the ollama client, SQLite, migrations) is imported and opened by a background task that starts
with the lifespan, and each tool call waits for it. That deferred import in ``_AppHolder`` is
the one lazy import on the serve path, on purpose.
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import TYPE_CHECKING, Annotated, Any

import anyio
from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import CallToolResult, TextContent, ToolAnnotations
from mcp.types import Tool as MCPTool
from pydantic import BaseModel, Field

from ollama_mcp import __version__
from ollama_mcp.config import Settings
from ollama_mcp.errors import OllamaMcpError
from ollama_mcp.results import (
    ConversationCreated,
    ConversationEnded,
    ConversationInfo,
    ConversationList,
    CurrentConversation,
    MemoryDeleted,
    MemoryStored,
    SearchResults,
)

if TYPE_CHECKING:
    from ollama_mcp.service import MemoryService

log = logging.getLogger(__name__)

INSTRUCTIONS = (
    "Long-term memory kept on this machine. Call init_conversation at the start of a chat, "
    "store_memory for facts worth keeping, search_memories before answering from memory, "
    "search_all_conversations for earlier chats, end_conversation when done."
)

# Only hints that differ from the spec's defaults (read_only false, destructive true,
# idempotent false, open_world true) are spelled out: they are sent on every tools/list.
_READ = ToolAnnotations(read_only_hint=True, open_world_hint=False)
_WRITE = ToolAnnotations(destructive_hint=False, open_world_hint=False)
_IDEMPOTENT_WRITE = ToolAnnotations(destructive_hint=False, idempotent_hint=True, open_world_hint=False)
_DELETE = ToolAnnotations(idempotent_hint=True, open_world_hint=False)

ConversationId = Annotated[str | None, Field(description="Default: the current conversation.")]
Tags = Annotated[list[str] | None, Field(description="Memories must have all of these tags.")]
TopK = Annotated[int, Field(description="1-100.")]
Threshold = Annotated[float | None, Field(description="Minimum cosine similarity, -1 to 1.")]


class _AppHolder:
    """Opens the app in the background and hands it to tool calls once it is ready.

    If opening fails (a folder that is not writable, a database from a newer version), each
    tool call reports why and the next one tries again, so fixing the cause needs no restart.
    """

    def __init__(self, settings: Settings) -> None:
        self._settings = settings
        self._attempt_done = anyio.Event()
        self._retry = anyio.Event()
        self._service: MemoryService | None = None
        self._failure: OllamaMcpError | None = None
        self._failure_reported = False

    async def run(self) -> None:
        while True:
            try:
                # Imported in a worker thread so the event loop keeps answering the handshake.
                app_module = await anyio.to_thread.run_sync(importlib.import_module, "ollama_mcp.app")
                async with app_module.open_app(self._settings) as app:
                    self._service, self._failure = app.service, None
                    self._attempt_done.set()
                    await anyio.sleep_forever()
            except OllamaMcpError as exc:
                log.error("could not open the memory store: %s", exc)
                self._service, self._failure = None, exc
            except Exception:
                log.exception("could not open the memory store")
                self._service = None
                self._failure = OllamaMcpError(
                    "The memory store could not be opened because of an internal error; details are in the server log."
                )
            self._attempt_done.set()
            await self._retry.wait()
            self._retry = anyio.Event()

    async def service(self) -> MemoryService:
        await self._attempt_done.wait()
        if self._service is None and self._failure_reported:
            # A failure was reported by an earlier call: the user may have fixed it since.
            self._attempt_done, self._failure_reported = anyio.Event(), False
            self._retry.set()
            await self._attempt_done.wait()
        if self._service is None:
            self._failure_reported = True
            raise self._failure or OllamaMcpError("The memory store is not open; details are in the server log.")
        return self._service


def _reply(result: BaseModel) -> CallToolResult:
    """The result as structured content, and as compact JSON text without nulls for the model.

    The SDK's default text is indented JSON with every null spelled out; clients that show the
    model the text (most do) would pay for that whitespace on every call.
    """
    text = result.model_dump_json(exclude_none=True)
    return CallToolResult(content=[TextContent(type="text", text=text)], structured_content=result.model_dump(mode="json"))


@contextmanager
def _tool_errors() -> Iterator[None]:
    """Our errors become tool errors the model can read; anything else is a bug, logged with its stack."""
    try:
        yield
    except OllamaMcpError as exc:
        raise ToolError(str(exc)) from exc
    except ToolError:
        raise
    except Exception as exc:
        log.exception("internal error in a tool call")
        raise ToolError(f"internal error ({type(exc).__name__}); details are in the server log.") from exc


class _CompactServer(MCPServer):
    """Publishes tool schemas without pydantic's titles and with short nullable types.

    Every byte of tools/list costs the user's context window on every turn.
    """

    async def list_tools(self) -> list[MCPTool]:
        return [
            tool.model_copy(update={
                "input_schema": compact_schema(tool.input_schema),
                "output_schema": None if tool.output_schema is None else compact_schema(tool.output_schema),
            })
            for tool in await super().list_tools()
        ]


def compact_schema(schema: Any) -> Any:
    """Drop ``title`` keys and rewrite ``anyOf: [{type: T}, {type: null}]`` as ``type: [T, null]``."""
    if isinstance(schema, list):
        return [compact_schema(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    out = {
        key: compact_schema(value)
        for key, value in schema.items()
        if not (key == "title" and isinstance(value, str)) and not (key == "additionalProperties" and value is True)
    }
    options = out.get("anyOf")
    if isinstance(options, list) and len(options) == 2 and {"type": "null"} in options:
        other = options[0] if options[1] == {"type": "null"} else options[1]
        if isinstance(other.get("type"), str):
            del out["anyOf"]
            out = {**other, **out, "type": [other["type"], "null"]}
    if "default" in out and (out["default"] is None or "const" in out):
        del out["default"]
    return out


def build_server(settings: Settings) -> MCPServer:
    """The MCP server with every tool registered; nothing is opened until the lifespan starts."""

    @asynccontextmanager
    async def lifespan(_server: MCPServer) -> AsyncIterator[_AppHolder]:
        holder = _AppHolder(settings)
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(holder.run)
            try:
                yield holder
            finally:
                tasks.cancel_scope.cancel()

    server = _CompactServer("ollama-mcp", version=__version__, instructions=INSTRUCTIONS, lifespan=lifespan)

    async def service(ctx: Context) -> MemoryService:
        holder: _AppHolder = ctx.request_context.lifespan_context
        return await holder.service()

    @server.tool(annotations=_WRITE)
    async def init_conversation(
        ctx: Context, name: str | None = None, metadata: dict[str, Any] | None = None
    ) -> Annotated[CallToolResult, ConversationCreated]:
        """Start a conversation and make it current: later memories go into it. Returns its id."""
        with _tool_errors():
            return _reply(ConversationCreated.of(await (await service(ctx)).init_conversation(name, metadata)))

    @server.tool(annotations=_READ)
    async def get_conversation_id(ctx: Context) -> Annotated[CallToolResult, CurrentConversation]:
        """The current conversation (null if none) with its name, status and memory count."""
        with _tool_errors():
            return _reply(CurrentConversation.of(await (await service(ctx)).get_conversation_id()))

    @server.tool(annotations=_IDEMPOTENT_WRITE)
    async def store_memory(
        ctx: Context,
        content: str,
        conversation_id: ConversationId = None,
        tags: list[str] | None = None,
        metadata: dict[str, Any] | None = None,
        embedding: Annotated[list[float] | None, Field(description="Only a vector from the server's model.")] = None,
    ) -> Annotated[CallToolResult, MemoryStored]:
        """Save a fact, decision or preference. The same text stored again returns the existing memory."""
        with _tool_errors():
            stored = await (await service(ctx)).store_memory(content, conversation_id, tags, metadata, embedding)
            return _reply(MemoryStored.of(stored))

    @server.tool(annotations=_READ)
    async def search_memories(
        ctx: Context,
        query: str,
        conversation_id: Annotated[str | None, Field(description="Default: the current one, else all.")] = None,
        top_k: TopK = 5,
        threshold: Threshold = None,
        tags: Tags = None,
        since: Annotated[str | None, Field(description="ISO 8601 date or time.")] = None,
        until: str | None = None,
    ) -> Annotated[CallToolResult, SearchResults]:
        """Find memories of one conversation by meaning and keywords, best first."""
        with _tool_errors():
            outcome = await (await service(ctx)).search_memories(
                query, conversation_id, top_k, threshold, tags, since, until
            )
            return _reply(SearchResults.of(outcome))

    @server.tool(annotations=_READ)
    async def search_all_conversations(
        ctx: Context, query: str, top_k: TopK = 5, threshold: Threshold = None, tags: Tags = None
    ) -> Annotated[CallToolResult, SearchResults]:
        """Like search_memories, across every conversation, including ended ones and their summaries."""
        with _tool_errors():
            outcome = await (await service(ctx)).search_all_conversations(query, top_k, threshold, tags)
            return _reply(SearchResults.of(outcome))

    @server.tool(annotations=_WRITE)
    async def end_conversation(
        ctx: Context, conversation_id: ConversationId = None, summary: str | None = None
    ) -> Annotated[CallToolResult, ConversationEnded]:
        """Close a conversation; it stays searchable. A given summary is stored as a memory."""
        with _tool_errors():
            return _reply(ConversationEnded.of(await (await service(ctx)).end_conversation(conversation_id, summary)))

    @server.tool(annotations=_READ)
    async def list_conversations(
        ctx: Context,
        status: Annotated[str | None, Field(description="active or completed.")] = None,
        limit: int = 20,
    ) -> Annotated[CallToolResult, ConversationList]:
        """Conversations, newest first, with their ids and memory counts."""
        with _tool_errors():
            found = await (await service(ctx)).list_conversations(status, limit)
            return _reply(ConversationList(conversations=[ConversationInfo.of(c) for c in found]))

    @server.tool(annotations=_DELETE)
    async def delete_memory(ctx: Context, memory_id: str) -> Annotated[CallToolResult, MemoryDeleted]:
        """Permanently delete one memory (its text, keyword entry and vectors)."""
        with _tool_errors():
            return _reply(MemoryDeleted.of(await (await service(ctx)).delete_memory(memory_id)))

    return server


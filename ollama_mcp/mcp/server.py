"""The MCP surface: ``build_server``, its lifespan, and the tools (thin: validate, call, shape).

Start-up: ``initialize`` must be answered at once (Claude Desktop gives up after 60 s, and users
notice seconds). So this module imports only the SDK and light modules of ours; the app (numpy,
the ollama client, SQLite, migrations) is imported and opened by a background task that starts
with the lifespan, and each tool call waits for it. The deferred imports in ``_AppHolder`` (the
app, and before it ``head_start`` with our Ollama client) are the lazy imports on the serve path,
on purpose.
"""

from __future__ import annotations

import gc
import importlib
import logging
import re
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Annotated, Any, Literal, cast

import anyio
from anyio.abc import TaskGroup
from mcp.server import MCPServer
from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.provider import AccessToken
from mcp.server.auth.settings import AuthSettings
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel.server import NotificationOptions
from mcp.server.mcpserver import (
    AcceptedElicitation,
    AssistantMessage,
    Context,
    DeclinedElicitation,
    UserMessage,
)
from mcp.server.mcpserver.exceptions import (
    ResourceError,
    ResourceNotFoundError,
    ToolError,
)
from mcp.server.mcpserver.prompts.base import Message
from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler
from mcp.shared.exceptions import MCPError, NoBackChannelError
from mcp.shared.subscriptions import ResourcesListChanged, ResourceUpdated, ServerEvent
from mcp.types import CallToolResult, TextContent, ToolAnnotations
from mcp.types import Tool as MCPTool
from mcp_types import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    EmptyResult,
    SubscribeRequestParams,
    SubscriptionsListenRequestParams,
    SubscriptionsListenResult,
    UnsubscribeRequestParams,
)
from pydantic import AnyHttpUrl, BaseModel, Field

from ollama_mcp import __version__, audit, caller
from ollama_mcp.config import LOCAL_PRINCIPAL, Settings
from ollama_mcp.errors import ConfigError, InvalidInputError, NotFoundError, OllamaMcpError
from ollama_mcp.inputs import conversation_id as checked_conversation_id
from ollama_mcp.inputs import conversation_query, search_request
from ollama_mcp.mcp.live import Watch, Watches
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
    MemoryStored,
    MemoryUpdated,
    MessagesAdded,
    SearchResults,
)
from ollama_mcp.mcp.sharing import Need, Sharing
from ollama_mcp.mcp.stdio import answering_stdio_server
from ollama_mcp.services import tokens

if TYPE_CHECKING:
    from ollama_mcp.app import App
    from ollama_mcp.domain import AccessToken as Token
    from ollama_mcp.domain import Conversation, ConversationShare, Memory
    from ollama_mcp.head_start import HeadStart
    from ollama_mcp.services.agent import Confirm, Decision
    from ollama_mcp.storage.protocols import Storage

log = logging.getLogger(__name__)

INSTRUCTIONS = (
    "Long-term memory kept on this machine. Call init_conversation at the start of a chat, "
    "store_memory for facts worth keeping, search_memories before answering from memory, "
    "search_all_conversations to recall earlier chats, end_conversation when done."
)

# Only hints that differ from the spec's defaults (read_only false, destructive true,
# idempotent false, open_world true) are spelled out: they are sent on every tools/list.
_READ = ToolAnnotations(read_only_hint=True, open_world_hint=False)
_WRITE = ToolAnnotations(destructive_hint=False, open_world_hint=False)
_IDEMPOTENT_WRITE = ToolAnnotations(destructive_hint=False, idempotent_hint=True, open_world_hint=False)
_DELETE = ToolAnnotations(idempotent_hint=True, open_world_hint=False)
_AGENT = ToolAnnotations(open_world_hint=False)  # may delete, but only after the human confirms

ConversationId = Annotated[str | None, Field(description="Default: the current conversation.")]
Tags = Annotated[list[str] | None, Field(description="Memories must have all of these tags.")]
TopK = Annotated[int, Field(description="1-100.")]
Threshold = Annotated[float | None, Field(description="Minimum cosine similarity, -1 to 1.")]
Messages = Annotated[bool, Field(description="Also transcript messages.")]
Superseded = Annotated[bool, Field(description="Also replaced versions.")]


def imports_done() -> None:
    """The process's imports are over (the app's is the last): what they made (~100k objects: the
    SDK, pydantic, numpy) lives as long as the process, so it is frozen, left out of the
    collector's full passes, each of which would otherwise walk it all (~15 ms; loading 10k vectors
    set off enough to cost the first search 45 ms, and any later one could land inside a search).
    Then collection resumes if ``cli`` paused it for the imports (the little garbage they left,
    ~800 objects, is frozen with them). Once: later principals' apps are not garbage-free."""
    if not gc.get_freeze_count():
        gc.freeze()
    gc.enable()


class _AppHolder:
    """Opens the app in the background and hands it to tool calls once it is ready.

    If opening fails (a folder that is not writable, a database from a newer version), each
    tool call reports why and the next one tries again, so fixing the cause needs no restart.
    Settings that cannot be used (a ``ConfigError`` instead of ``Settings``) are reported the
    same way; they are read once per process, so only a restart with new ones helps.
    """

    def __init__(self, settings: Settings | ConfigError) -> None:
        self._settings = settings
        self._attempt_done = anyio.Event()
        self._retry = anyio.Event()
        self._app: App | None = None
        self._head_start: HeadStart | None = None  # while the app is being opened
        self._failure: OllamaMcpError | None = None
        self._failure_reported = False

    async def run(self) -> None:
        while True:
            try:
                if isinstance(self._settings, ConfigError):
                    raise self._settings
                # Both imported in a worker thread so the event loop keeps answering the handshake
                # (the head start's, with our Ollama client, ~5 ms; the app's, ~110 ms).
                head_start_module = await anyio.to_thread.run_sync(importlib.import_module, "ollama_mcp.head_start")
                async with head_start_module.HeadStart.running(self._settings) as head_start:
                    self._head_start = head_start
                    # (``ollama`` is not imported: embeddings go through our own client, and the
                    # ollama client, for chats, is imported on first use in a thread of its own.)
                    app_module = await anyio.to_thread.run_sync(importlib.import_module, "ollama_mcp.app")
                    imports_done()
                    async with app_module.open_app(self._settings, head_start=head_start) as app:
                        self._app, self._failure, self._head_start = app, None, None
                        self._attempt_done.set()
                        await anyio.sleep_forever()
            except OllamaMcpError as exc:
                log.error("could not open the memory store: %s", exc)
                self._app, self._failure = None, exc
            except Exception:
                log.exception("could not open the memory store")
                self._app = None
                self._failure = OllamaMcpError(
                    "The memory store could not be opened because of an internal error; details are in the server log."
                )
            finally:
                self._head_start = None  # (its requests ended with its block)
                imports_done()  # (also when the app could not be imported or opened)
            self._attempt_done.set()
            await self._retry.wait()
            self._retry = anyio.Event()

    def begin_search(self, query: object) -> None:
        """A search arrived while the app is being opened: its query goes to Ollama now
        (``head_start``), so that its embedding is computed while the app opens."""
        if self._head_start is not None and isinstance(query, str):
            self._head_start.search(query)

    async def app(self) -> App:
        await self._attempt_done.wait()
        if self._app is None and self._failure_reported:
            # A failure was reported by an earlier call: the user may have fixed it since.
            self._attempt_done, self._failure_reported = anyio.Event(), False
            self._retry.set()
            await self._attempt_done.wait()
        if self._app is None:
            self._failure_reported = True
            raise self._failure or OllamaMcpError("The memory store is not open; details are in the server log.")
        return self._app


class _Principals:
    """One app per principal that has made a request, each opened (by its ``_AppHolder``) on first
    use and run in the lifespan's task group. A stdio server has one: the settings' principal.
    ``sharing`` (a server with tokens only) routes a call on a shared conversation to its owner's."""

    def __init__(self, settings: Settings | ConfigError, tasks: TaskGroup, *, sharing: bool) -> None:
        self._settings = settings
        self._tasks = tasks
        self._holders: dict[str, _AppHolder] = {}
        self.sharing = Sharing(lambda principal: self.holder(principal).app()) if sharing else None

    def holder(self, principal: str) -> _AppHolder:
        found = self._holders.get(principal)
        if found is None:
            settings = self._settings if isinstance(self._settings, ConfigError) else self._settings.for_principal(principal)
            found = self._holders[principal] = _AppHolder(settings)
            self._tasks.start_soon(found.run)
        return found

    def begin_search(self, principal: str, query: object) -> None:
        """A search's query for ``principal``'s app if it is being opened (``_AppHolder.begin_search``)."""
        holder = self._holders.get(principal)
        if holder is not None:
            holder.begin_search(query)

    def own(self) -> _AppHolder:
        """The app of the principal the settings name (stdio's, the CLI's, a tokenless HTTP server's)."""
        return self.holder(self.default_principal)

    @property
    def default_principal(self) -> str:
        return LOCAL_PRINCIPAL if isinstance(self._settings, ConfigError) else self._settings.principal


@dataclass(frozen=True)
class _Caller:
    """Who a request comes from: whose memory (principal), which client's current conversation
    (the MCP session over HTTP, else the token, else the process), and its name in the audit."""

    principal: str
    client: str
    actor: str | None


def _caller(ctx: Context | None, default_principal: str) -> _Caller:
    # The SDK's auth context holds the request's token; a session keeps the token it began with
    # (the SDK refuses a session's requests from any other principal).
    token = get_access_token()
    headers = None if ctx is None else ctx.headers
    session = None if headers is None else headers.get("mcp-session-id")
    if token is None:
        return _Caller(default_principal, f"session:{session}" if session else caller.PROCESS, None)
    principal = token.subject or default_principal
    return _Caller(principal, f"session:{session}" if session else f"{caller.TOKEN}{token.client_id}", token.client_id)


def _reply(result: BaseModel) -> CallToolResult:
    """The result as structured content, and as compact JSON text without nulls for the model.

    The SDK's default text is indented JSON with every null spelled out; clients that show the
    model the text (most do) would pay for that whitespace on every call.
    """
    text = result.model_dump_json(exclude_none=True)
    return CallToolResult(content=[TextContent(type="text", text=text)], structured_content=result.model_dump(mode="json"))


async def _serving(
    principals: _Principals, principal: str, conversation_id: object, need: Need, doing: str = "do that"
) -> App:
    """The app that serves ``principal``'s call on ``conversation_id``: its own, or the owner's
    of a conversation shared with it (``sharing``), once it is open (else why it is not)."""
    if principals.sharing is not None and conversation_id is not None:
        principal = await principals.sharing.serving(principal, conversation_id, need, doing)
    return await principals.holder(principal).app()


def _principals_of(ctx: Context) -> tuple[_Principals, str]:
    """The lifespan's principals, and the one the caller acts for."""
    principals = cast(_Principals, ctx.request_context.lifespan_context)
    return principals, _caller(ctx, principals.default_principal).principal


def _begin_search(ctx: Context, query: object) -> None:
    """Before waiting for the app: a search's query goes to Ollama at once if the app is still
    being opened (``head_start``: its embedding is then computed meanwhile)."""
    principals, principal = _principals_of(ctx)
    principals.begin_search(principal, query)


async def _opened(ctx: Context, conversation_id: str | None = None) -> App:
    """For resources and prompts: the app that serves the caller (on ``conversation_id``, to read);
    each translates what this raises as it translates its own errors."""
    return await _serving(*_principals_of(ctx), conversation_id, "read")


@asynccontextmanager
async def _tool_call(
    ctx: Context, conversation_id: object = None, need: Need = "read", doing: str = "do that"
) -> AsyncIterator[App]:
    """A tool body's app (its caller's principal's, or on a conversation shared with it the
    owner's for ``need``), acting as its client, and its one error translation: our errors
    become tool errors the model can read; anything else is a bug, logged with its stack and
    reported by type only."""
    principals = cast(_Principals, ctx.request_context.lifespan_context)
    who = _caller(ctx, principals.default_principal)
    try:
        with audit.through("tool"), caller.acting(who.client, who.actor):
            yield await _serving(principals, who.principal, conversation_id, need, doing)
    except OllamaMcpError as exc:
        raise ToolError(str(exc)) from exc
    except ToolError:
        raise
    except Exception as exc:
        log.exception("internal error in a tool call")
        raise ToolError(f"internal error ({type(exc).__name__}); details are in the server log.") from exc


class _CompactServer(MCPServer):
    """Publishes tool schemas without pydantic's titles, with short nullable types, and without
    output schemas; over stdio, answers request lines the SDK cannot parse (``stdio``).

    Every byte of tools/list costs the user's context window on every turn. Output schemas were
    half of it (3.5 of 7.2 KB for eight tools), and the results they describe are small JSON
    objects whose keys say what they are; results still carry ``structuredContent``.
    """

    apps: RunningApps  # set by build_server

    async def list_tools(self) -> list[MCPTool]:
        return [
            tool.model_copy(update={"input_schema": compact_schema(tool.input_schema), "output_schema": None})
            for tool in await super().list_tools()
        ]

    async def run_stdio_async(self) -> None:
        async with answering_stdio_server() as (read_stream, write_stream):
            lowlevel = self._lowlevel_server  # what MCPServer.run_stdio_async runs, on our streams
            await lowlevel.run(read_stream, write_stream, lowlevel.create_initialization_options())


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
            if isinstance(out.get("enum"), list) and None not in out["enum"]:
                out["enum"] = [*out["enum"], None]  # else a validating client refuses the null it may send
    if "default" in out and (out["default"] is None or "const" in out):
        del out["default"]
    return out


def build_server(settings: Settings | ConfigError, *, public_url: str | None = None) -> _CompactServer:
    """The MCP server with every tool, resource and prompt registered; nothing is opened until the
    lifespan starts. Given a ConfigError, it still answers ``initialize`` and lists its tools, and
    every call returns that error's message.

    With ``public_url`` (the HTTP server with tokens: ``http``), every request must carry a bearer
    token, and the server publishes its protected-resource metadata for that URL."""
    running = RunningApps()  # the lifespan's apps, for the static resource, the token check and /ui
    watches = Watches()  # the subscribers to resources, and the loop that tells them what changed

    @asynccontextmanager
    async def lifespan(_server: MCPServer) -> AsyncIterator[_Principals]:
        async with anyio.create_task_group() as tasks:
            principals = _Principals(settings, tasks, sharing=public_url is not None)
            principals.own()  # opened now, not at the first call
            running.started(principals)
            tasks.start_soon(watches.run)
            try:
                yield principals
            finally:
                tasks.cancel_scope.cancel()
                running.stopped(principals)

    auth = None if public_url is None else AuthSettings(
        issuer_url=AnyHttpUrl(public_url), resource_server_url=AnyHttpUrl(public_url), validate_token_resource=False,
    )
    verifier = None if public_url is None else _TokenVerifier(running)
    server = _CompactServer(
        "ollama-mcp", version=__version__, instructions=INSTRUCTIONS, lifespan=lifespan, auth=auth,
        token_verifier=verifier,
    )
    server.apps = running
    _serve_live_updates(server, watches)
    confirm_timeout = settings.agent_confirm_timeout if isinstance(settings, Settings) else CONFIRM_TIMEOUT

    @server.tool(annotations=_WRITE)
    async def init_conversation(
        ctx: Context,
        name: str | None = None,
        metadata: Annotated[dict[str, Any] | None, Field(description="ttl_hours: delete after.")] = None,
        follows: Annotated[str | None, Field(description="Id of the conversation it continues.")] = None,
    ) -> Annotated[CallToolResult, ConversationCreated]:
        """Start a conversation and make it current: later memories go into it. Returns its id."""
        async with _tool_call(ctx) as app:
            created = await app.service.init_conversation(name, metadata, follows)
            return _reply(ConversationCreated.of(created, checked_conversation_id("follows", follows)))

    @server.tool(annotations=_READ)
    async def get_conversation_id(ctx: Context) -> Annotated[CallToolResult, CurrentConversation]:
        """The current conversation (null if none) with its name, status and memory count."""
        async with _tool_call(ctx) as app:
            return _reply(CurrentConversation.of(await app.service.get_conversation_id()))

    @server.tool(annotations=_IDEMPOTENT_WRITE)
    async def store_memory(
        ctx: Context,
        content: str,
        conversation_id: ConversationId = None,
        tags: list[str] | None = None,
        metadata: dict[str, Any] | None = None,
        embedding: Annotated[list[float] | None, Field(description="Only a vector from the server's model.")] = None,
        occurred_at: Annotated[str | None, Field(description="ISO 8601; default now.")] = None,
    ) -> Annotated[CallToolResult, MemoryStored]:
        """Save a fact, decision or preference. The same text stored again returns the existing memory."""
        async with _tool_call(ctx, conversation_id, "write") as app:
            stored = await app.service.store_memory(content, conversation_id, tags, metadata, embedding, occurred_at)
            return _reply(MemoryStored.of(stored))

    @server.tool(annotations=_WRITE)
    async def update_memory(
        ctx: Context,
        memory_id: str,
        content: str | None = None,
        tags: list[str] | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> Annotated[CallToolResult, MemoryUpdated]:
        """Correct a memory: saves a new version (omitted fields kept) and keeps the old one as history."""
        async with _tool_call(ctx) as app:
            old, new = await app.service.update_memory(memory_id, content, tags, metadata)
            return _reply(MemoryUpdated.of(old, new))

    @server.tool(annotations=_IDEMPOTENT_WRITE)
    async def add_messages(
        ctx: Context,
        messages: Annotated[list[dict[str, Any]], Field(description=(
            "[{role: user|assistant|system|tool, content, actor?, to?: [actors], tool_calls?, tool_call_id?,"
            " occurred_at?}]"
        ))],
        conversation_id: ConversationId = None,
    ) -> Annotated[CallToolResult, MessagesAdded]:
        """Record chat turns in the transcript, in order; a retried call adds nothing."""
        async with _tool_call(ctx, conversation_id, "write") as app:
            added, retry = await app.lifecycle.add_messages(conversation_id, messages)
            return _reply(MessagesAdded.of(added, retry))

    @server.tool(annotations=_READ)
    async def search_memories(
        ctx: Context,
        query: str,
        conversation_id: Annotated[
            str | None, Field(description="Default: the one init_conversation started, else all.")
        ] = None,
        top_k: TopK = 5,
        threshold: Threshold = None,
        tags: Tags = None,
        since: Annotated[str | None, Field(description="ISO 8601 date or time.")] = None,
        until: str | None = None,
        include_messages: Messages = False,
        include_superseded: Superseded = False,
        actor: Annotated[str | None, Field(description="Only this participant's turns.")] = None,
        reference_time: Annotated[str | None, Field(description="Read 'last week' etc. from; default now.")] = None,
    ) -> Annotated[CallToolResult, SearchResults]:
        """Find memories of this conversation by meaning and keywords, best first; earlier chats: search_all_conversations."""
        _begin_search(ctx, query)
        async with _tool_call(ctx, conversation_id) as app:
            request = search_request(
                query, conversation_id, top_k, threshold, tags, since, until, include_messages, include_superseded,
                actor, reference_time=reference_time,
            )
            return _reply(SearchResults.of(await app.service.search(request)))

    @server.tool(annotations=_READ)
    async def search_all_conversations(
        ctx: Context, query: str, top_k: TopK = 5, threshold: Threshold = None, tags: Tags = None,
        include_messages: Messages = False,
        related_to: Annotated[str | None, Field(description="Only this id and related conversations.")] = None,
    ) -> Annotated[CallToolResult, SearchResults]:
        """Like search_memories, across every conversation, including ended ones and their summaries."""
        _begin_search(ctx, query)
        async with _tool_call(ctx, related_to) as app:
            request = search_request(
                query, top_k=top_k, threshold=threshold, tags=tags, include_messages=include_messages, everywhere=True,
                related_to=related_to,
            )
            principals, principal = _principals_of(ctx)
            if request.related_to is not None:
                # In the store that holds it (its owner's when shared), and only what the caller may read there.
                allowed = None if principals.sharing is None else await principals.sharing.readable_beside(
                    principal, request.related_to
                )
                request = replace(request, filters=replace(request.filters, conversation_ids=allowed))
                return _reply(SearchResults.of(await app.service.search(request)))
            if principals.sharing is None:
                return _reply(SearchResults.of(await app.service.search(request)))
            return _reply(SearchResults.of(await principals.sharing.search_everywhere(principal, app, request)))

    @server.tool(annotations=_WRITE)
    async def end_conversation(
        ctx: Context, conversation_id: ConversationId = None, summary: str | None = None
    ) -> Annotated[CallToolResult, ConversationEnded]:
        """Close a conversation; it stays searchable. Without a summary, the local model writes one."""
        async with _tool_call(ctx, conversation_id, "own", "end it") as app:
            return _reply(ConversationEnded.of(await app.service.end_conversation(conversation_id, summary)))

    @server.tool(annotations=_READ)
    async def list_conversations(
        ctx: Context,
        status: Annotated[str | None, Field(description="active or completed.")] = None,
        limit: int = 20,
        name: Annotated[str | None, Field(description="Part of the name.")] = None,
        metadata: Annotated[dict[str, Any] | None, Field(description="Values it must hold.")] = None,
        order: Literal["activity", "created"] = "activity",
    ) -> Annotated[CallToolResult, ConversationList]:
        """Conversations, latest activity first, with ids, counts, metadata and summary status."""
        async with _tool_call(ctx) as app:
            query = conversation_query(status, limit, name, metadata, order)
            principals, principal = _principals_of(ctx)
            found: list[tuple[Conversation, ConversationShare | None]]
            if principals.sharing is None:
                found = [(c, None) for c in await app.service.conversations(query)]
            else:
                found = await principals.sharing.listed(principal, app, query)
            return _reply(ConversationList(conversations=[ListedConversation.of(c, share) for c, share in found]))

    @server.tool(annotations=_READ)
    async def export_conversation(
        ctx: Context,
        conversation_id: ConversationId = None,
        format: Literal["markdown", "json"] = "markdown",
        page: Annotated[int, Field(description="100 items a page.")] = 1,
    ) -> Annotated[CallToolResult, ConversationExport]:
        """A conversation with its summary, memories (every version) and messages."""
        async with _tool_call(ctx, conversation_id) as app:
            target = conversation_id or await app.service.current_conversation_id()
            return _reply(ConversationExport.of(await app.lifecycle.export_conversation(target, format, page)))

    @server.tool(annotations=_DELETE)
    async def delete_conversation(ctx: Context, conversation_id: str) -> Annotated[CallToolResult, ConversationDeleted]:
        """Permanently delete a conversation with all its memories, messages and summaries."""
        async with _tool_call(ctx, conversation_id, "own", "delete it") as app:
            deleted = await app.service.delete_conversation(conversation_id)
            principals, _ = _principals_of(ctx)
            if principals.sharing is not None:
                await principals.sharing.forget(deleted.conversation.id)
            return _reply(ConversationDeleted.of(deleted))

    @server.tool(annotations=_DELETE)
    async def delete_memory(ctx: Context, memory_id: str) -> Annotated[CallToolResult, MemoryDeleted]:
        """Permanently delete one memory with all its versions."""
        async with _tool_call(ctx) as app:
            return _reply(MemoryDeleted.of(await app.service.delete_memory(memory_id)))

    @server.tool(annotations=_AGENT)
    async def ask_agent(
        ctx: Context,
        query: str,
        conversation_id: ConversationId = None,
        scope: Annotated[
            Literal["conversation", "all"] | None, Field(description="Default: conversation if its id is given.")
        ] = None,
    ) -> Annotated[CallToolResult, AgentReply]:
        """Hand a question to the local model: it searches memory itself and returns one answer."""
        async with _tool_call(ctx, conversation_id, "own", "ask the agent about it") as app:
            answer = await app.agent.ask(
                query, conversation_id, scope, confirm=_confirmer(ctx, confirm_timeout), progress=ctx.report_progress
            )
            return _reply(AgentReply.of(answer))

    if public_url is not None:  # only a server with tokens serves several principals

        @server.tool(annotations=_IDEMPOTENT_WRITE)
        async def share_conversation(
            ctx: Context,
            conversation_id: str,
            principal: Annotated[str, Field(description="Whose token may use it, such as bob.")],
            access: Annotated[
                Literal["read", "write", "none"], Field(description="write: also store in it; none: stop sharing.")
            ] = "read",
        ) -> Annotated[CallToolResult, ConversationShared]:
            """Let another person search and read a conversation of yours, or also add to it."""
            async with _tool_call(ctx):
                principals, owner = _principals_of(ctx)
                assert principals.sharing is not None
                shared, shares = await principals.sharing.share(owner, conversation_id, principal, access)
                return _reply(ConversationShared.of(shared, shares))

    if isinstance(settings, Settings) and not settings.agent_available:
        server.remove_tool("ask_agent")  # OLLAMA_MCP_AGENT=off, or no chat model: not offered at all

    @server.resource("memory://conversations", mime_type="text/markdown", description="The latest conversations.")
    async def conversations_resource() -> str:
        with _resource_errors():
            app = await running.of_request()  # a static resource gets no Context: the request's token tells whose
            found = await app.service.list_conversations(None, RESOURCE_LIST_LIMIT)
        lines = ["# Conversations", ""] + [
            f"- [{c.name or 'unnamed'}](memory://conversations/{c.id}) · {c.status} · {c.memory_count} memories"
            f" · {c.created_at[:10]}"
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
        description="Further pages of a long conversation, 100 items each.",
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

    @server.prompt(description=(
        "Summary, recent messages and recalled memories of a conversation, within a token budget; "
        "participants (comma-separated names) gives their view of a shared transcript; facts=true adds "
        "extracted facts."
    ))
    async def build_context(
        conversation_id: str, ctx: Context, token_budget: str = "4000", query: str = "", participants: str = "",
        facts: str = "",
    ) -> list[Message]:
        if not token_budget.strip().isdigit():
            raise MCPError(INVALID_PARAMS, "token_budget: must be a whole number of tokens; pass e.g. 4000")
        if facts.strip().lower() not in ("", "true", "false", "yes", "no"):
            raise MCPError(INVALID_PARAMS, "facts: must be true or false; pass true to add the facts extracted")
        names = [name.strip() for name in participants.split(",") if name.strip()] or None
        with _prompt_errors():
            app = await _opened(ctx, conversation_id)
            built = await app.lifecycle.build_context(
                conversation_id, int(token_budget), query=query or None, participants=names,
                facts=facts.strip().lower() in ("true", "yes"),
            )
        return [
            AssistantMessage(m["content"]) if m["role"] == "assistant"
            else UserMessage(m["content"] if m["role"] == "user" else f"[{m['role']}] {m['content']}")
            for m in built.messages
        ]

    return server


class RunningApps:
    """The apps the running lifespan has opened, one per principal, for the other doors of the
    same process: the token check, the static resource, the browser view under ``/ui``."""

    def __init__(self) -> None:
        self._running: list[_Principals] = []

    def started(self, principals: _Principals) -> None:
        self._running.append(principals)

    def stopped(self, principals: _Principals) -> None:
        self._running.remove(principals)

    def _principals(self) -> _Principals:
        if not self._running:
            raise OllamaMcpError("The server is not running.")
        return self._running[-1]

    async def of(self, principal: str) -> App:
        """The app of ``principal``, opened on first use."""
        return await self._principals().holder(principal).app()

    async def own(self) -> App:
        """The app of the settings' principal (a tokenless server acts for it)."""
        return await self._principals().own().app()

    async def of_request(self) -> App:
        """The app of the principal whose token the current request carries (else the own one)."""
        principals = self._principals()
        return await principals.holder(_caller(None, principals.default_principal).principal).app()

    async def token(self, secret: str) -> Token | None:
        """The active token ``secret`` is, checked in the local principal's store; None if not one."""
        return await tokens.verify((await self.of(LOCAL_PRINCIPAL)).store, secret)


class _TokenVerifier:
    """The SDK's token-verifier hook: a bearer token is one of ours when the local principal's
    store holds its hash, not revoked; it then acts for its principal, named by the token."""

    def __init__(self, running: RunningApps) -> None:
        self._running = running

    async def verify_token(self, token: str) -> AccessToken | None:
        try:
            found = await self._running.token(token)
        except OllamaMcpError as exc:  # the request is refused (401); the reason is for the log
            log.error("could not check a bearer token: %s", exc)
            return None
        if found is None:
            return None
        return AccessToken(token=token, client_id=found.name, scopes=[], subject=found.principal)


RESOURCE_LIST_LIMIT = 100
CONFIRM_TIMEOUT = 30.0  # a human who does not answer has said no (OLLAMA_MCP_AGENT_CONFIRM_TIMEOUT)


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


async def _conversation_page(ctx: Context, conversation_id: str, page: int) -> str:
    with _resource_errors():
        app = await _opened(ctx, conversation_id)
        exported = await app.lifecycle.export_conversation(conversation_id, "markdown", page)
    return exported.markdown or ""


HISTORY_PAGE = 50


async def _history_page(ctx: Context, conversation_id: str, before: str | None) -> str:
    """A page of the transcript as Markdown: one line per message, then where earlier ones are."""
    with _resource_errors():
        app = await _opened(ctx, conversation_id)
        target, messages, earlier = await app.lifecycle.history_page(conversation_id, HISTORY_PAGE, before)
        participants = await app.lifecycle.participants(target)
    seen = ", ".join(f"{p.name} ({p.role}, {p.messages})" if p.name != p.role else f"{p.name} ({p.messages})"
                     for p in participants)
    lines = [f"# Transcript of {target}", "", f"Participants: {seen or 'none yet'}", ""] + [
        f"- {m.created_at} · {m.role}{f' ({m.actor})' if m.actor else ''}{_addressed(m)} · {m.id}: {m.content}"
        for m in messages
    ]
    if earlier:
        lines += ["", f"Earlier: memory://conversations/{target}/history/before/{messages[0].id}"]
    return "\n".join(lines) + "\n"


async def _relations_page(ctx: Context, conversation_id: str) -> str:
    """A conversation's relations as Markdown, one line each; on a conversation shared with the
    caller, only those it may read too."""
    with _resource_errors():
        app = await _opened(ctx, conversation_id)
        key = checked_conversation_id("conversation_id", conversation_id) or ""
        conversation, relations = await app.relations.of(key)
        principals, principal = _principals_of(ctx)
        if principals.sharing is not None:
            allowed = await principals.sharing.readable_beside(principal, key)
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


@contextmanager
def _prompt_errors() -> Iterator[None]:
    """Prompts and subscriptions: the SDK turns any exception but an MCPError into "Internal
    server error", so ours become MCPErrors that carry their text (bad input and a missing item:
    invalid params)."""
    try:
        yield
    except (InvalidInputError, NotFoundError) as exc:
        raise MCPError(INVALID_PARAMS, str(exc)) from exc
    except OllamaMcpError as exc:
        raise MCPError(INTERNAL_ERROR, str(exc)) from exc


@contextmanager
def _resource_errors() -> Iterator[None]:
    """Resource reads: a missing item is 'not found', other failures say why."""
    try:
        yield
    except NotFoundError as exc:
        raise ResourceNotFoundError(str(exc)) from exc
    except OllamaMcpError as exc:
        raise ResourceError(str(exc)) from exc


# -- live updates: resource subscriptions of both protocol eras over ``live.Watches`` ---------------

LIST_URI = "memory://conversations"
_CONVERSATION_URI = re.compile(r"memory://conversations/([^/]+)(?:/.*)?")  # a conversation, its pages, its history


def _serve_live_updates(server: _CompactServer, watches: Watches) -> None:
    """Serve ``resources/subscribe`` and ``resources/unsubscribe`` (2025 protocol: notifications
    on the session) and ``subscriptions/listen`` (2026: a stream per listen request), each as
    watches of the conversations the subscribed URIs show; and announce ``listChanged``."""
    lowlevel = server._lowlevel_server  # noqa: SLF001 - the SDK's documented seam for raw handlers
    legacy: dict[tuple[object, str], Watch] = {}  # (client connection, uri) -> its watch

    async def subscribe(ctx: ServerRequestContext[Any, Any], params: SubscribeRequestParams) -> EmptyResult:
        uri, session = str(params.uri), ctx.session
        for key in [k for k, w in legacy.items() if w not in watches]:  # dropped: its client went away
            del legacy[key]
        if (_connection_of(session), uri) in legacy:
            return EmptyResult()
        with _prompt_errors():
            app, conversation = await _watch_target(cast(_Principals, ctx.lifespan_context), uri, "uri")

            async def send(target: str | None) -> None:
                if target is None:
                    await session.send_resource_list_changed()
                await session.send_resource_updated(uri)

            watch = Watch(app.store, frozenset([conversation] if conversation else []), conversation is None, send)
            await watches.add(watch)
        legacy[(_connection_of(session), uri)] = watch
        return EmptyResult()

    async def unsubscribe(ctx: ServerRequestContext[Any, Any], params: UnsubscribeRequestParams) -> EmptyResult:
        watch = legacy.pop((_connection_of(ctx.session), str(params.uri)), None)
        if watch is not None:
            watches.remove(watch)
        return EmptyResult()

    async def listen(
        ctx: ServerRequestContext[Any, Any], params: SubscriptionsListenRequestParams
    ) -> SubscriptionsListenResult:
        principals = cast(_Principals, ctx.lifespan_context)
        wanted = params.notifications
        uris = list(wanted.resource_subscriptions or ())
        bus = _StreamBus()
        uris_of: dict[str | None, list[str]] = {}  # a conversation (None: the list) -> the URIs showing it
        ids_of: dict[Storage, set[str]] = {}  # the watched conversations, by the store holding them
        listing: set[Storage] = set()  # the stores whose conversation list is watched
        added: list[Watch] = []
        try:
            with _prompt_errors():
                for i, uri in enumerate(uris):
                    app, conversation = await _watch_target(principals, uri, f"notifications.resourceSubscriptions[{i}]")
                    uris_of.setdefault(conversation, []).append(uri)
                    ids = ids_of.setdefault(app.store, set())
                    if conversation is None:
                        listing.add(app.store)
                    else:
                        ids.add(conversation)
                if wanted.resources_list_changed:
                    own = await principals.holder(_caller(None, principals.default_principal).principal).app()
                    ids_of.setdefault(own.store, set())
                    listing.add(own.store)

                async def send(target: str | None) -> None:
                    for uri in uris_of.get(target, ()):
                        await bus.publish(ResourceUpdated(uri=uri))
                    if target is None and wanted.resources_list_changed:
                        await bus.publish(ResourcesListChanged())

                for store, ids in ids_of.items():
                    watch = Watch(store, frozenset(ids), store in listing, send)
                    await watches.add(watch)
                    added.append(watch)
            return await ListenHandler(bus)(ctx, params)
        finally:
            for watch in added:
                watches.remove(watch)

    lowlevel.add_request_handler("resources/subscribe", SubscribeRequestParams, subscribe)
    lowlevel.add_request_handler("resources/unsubscribe", UnsubscribeRequestParams, unsubscribe)
    lowlevel.add_request_handler("subscriptions/listen", SubscriptionsListenRequestParams, listen)
    # The 2025 handshake announces resources' listChanged only when told to; every transport
    # (stdio, HTTP, the in-memory client) builds its options through this method.
    plain_options = lowlevel.create_initialization_options

    def announce_list_changed(notification_options: NotificationOptions | None = None, *args: Any, **kwargs: Any) -> Any:
        return plain_options(notification_options or NotificationOptions(resources_changed=True), *args, **kwargs)

    lowlevel.create_initialization_options = announce_list_changed  # type: ignore[method-assign]


def _connection_of(session: Any) -> object:
    """The client connection a request's session belongs to: the SDK makes a session per request
    (its notifications without a request id go out on the connection's own channel)."""
    return getattr(session, "_connection", session)


async def _watch_target(principals: _Principals, uri: str, field: str) -> tuple[App, str | None]:
    """The app whose store holds what ``uri`` shows and its conversation (None: the list), once
    the caller may read it: a subscription to what one may not read, or what does not exist, is
    refused as a read would be."""
    principal = _caller(None, principals.default_principal).principal
    if uri == LIST_URI:
        return await principals.holder(principal).app(), None
    match = _CONVERSATION_URI.fullmatch(uri)
    if match is None:
        raise InvalidInputError(
            field, f"is {uri!r}, which this server does not serve",
            f"subscribe to {LIST_URI} (the list) or {LIST_URI}/{{conversation_id}}",
        )
    conversation = checked_conversation_id(field, match[1])
    assert conversation is not None, "the pattern matched a non-empty id"
    try:
        app = await _serving(principals, principal, conversation, "read", "subscribe to it")
        await app.store.get_conversation(conversation)
    except NotFoundError:
        raise InvalidInputError(
            field, f"names no conversation that exists ({conversation})", "call list_conversations to see the ids"
        ) from None
    return app, conversation


class _StreamBus(InMemorySubscriptionBus):
    """One listen stream's bus: what is published before the SDK's handler subscribes to it
    (between the watch's first read and the acknowledgement) is kept and handed over then."""

    def __init__(self) -> None:
        super().__init__()
        self._early: list[ServerEvent] | None = []

    async def publish(self, event: ServerEvent) -> None:
        if self._early is not None:
            self._early.append(event)
            return
        await super().publish(event)

    def subscribe(self, listener: Callable[[ServerEvent], None]) -> Callable[[], None]:
        unsubscribe = super().subscribe(listener)
        early, self._early = self._early or [], None
        for event in early:
            listener(event)
        return unsubscribe

"""The MCP server: ``build_server`` puts together the tools (``tools``), resources (``resources``),
the prompt (``prompt``) and live updates (``subscriptions``) over one lifespan that opens an app per
principal (``apps``).

Start-up: ``initialize`` must be answered at once (Claude Desktop gives up after 60 s, and users
notice seconds). So this package imports only the SDK and light modules of ours; the app (numpy,
the ollama client, SQLite, migrations) is imported and opened by a background task that starts
with the lifespan (``apps.AppHolder``), and each call waits for it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio
from mcp.server import MCPServer
from mcp.server.auth.settings import AuthSettings
from pydantic import AnyHttpUrl

from ollama_mcp import __version__
from ollama_mcp.config import Settings
from ollama_mcp.errors import ConfigError
from ollama_mcp.mcp.apps import Principals, RunningApps, TokenVerifier
from ollama_mcp.mcp.compact import CompactServer
from ollama_mcp.mcp.live import Watches
from ollama_mcp.mcp.prompt import register_prompt
from ollama_mcp.mcp.resources import register_resources
from ollama_mcp.mcp.subscriptions import serve_live_updates
from ollama_mcp.mcp.tools import register_tools

INSTRUCTIONS = (
    "Long-term memory kept on this machine. Call init_conversation at the start of a chat, "
    "store_memory for facts worth keeping, search_memories before answering from memory, "
    "search_all_conversations to recall earlier chats, end_conversation when done. A tool's "
    "conversation_id, left out, is the current conversation's. ask_agent can also summarize, compact "
    "or extract the facts of a conversation now."
)


def build_server(settings: Settings | ConfigError, *, public_url: str | None = None) -> CompactServer:
    """The MCP server with every tool, resource and prompt registered; nothing is opened until the
    lifespan starts. Given a ConfigError, it still answers ``initialize`` and lists its tools, and
    every call returns that error's message.

    With ``public_url`` (the HTTP server with tokens: ``http``), every request must carry a bearer
    token (``http_app`` puts our 401 in place of the SDK's)."""
    running = RunningApps()  # the lifespan's apps, for the static resource, the token check and /ui
    watches = Watches()  # the subscribers to resources, and the loop that tells them what changed

    @asynccontextmanager
    async def lifespan(_server: MCPServer) -> AsyncIterator[Principals]:
        async with anyio.create_task_group() as tasks:
            principals = Principals(settings, tasks, sharing=public_url is not None)
            principals.own()  # opened now, not at the first call
            running.started(principals)
            tasks.start_soon(watches.run)
            try:
                yield principals
            finally:
                tasks.cancel_scope.cancel()
                running.stopped(principals)

    # The SDK's bearer check with our verifier. No resource_server_url: no OAuth metadata is
    # published, as there is no authorization server (ollama_mcp.mcp.unauthorized says what is).
    auth = None if public_url is None else AuthSettings(
        issuer_url=AnyHttpUrl(public_url), resource_server_url=None, validate_token_resource=False,
    )
    verifier = None if public_url is None else TokenVerifier(running)
    server = CompactServer(
        "ollama-mcp", version=__version__, instructions=INSTRUCTIONS, lifespan=lifespan, auth=auth,
        token_verifier=verifier,
    )
    server.apps = running
    # OLLAMA_MCP_AGENT=off, or no chat model: ask_agent is not offered at all.
    register_tools(server, sharing=public_url is not None,
                   agent=not isinstance(settings, Settings) or settings.agent_available)
    register_resources(server, running)
    register_prompt(server)
    serve_live_updates(server, watches)
    return server

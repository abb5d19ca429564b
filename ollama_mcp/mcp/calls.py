"""One MCP call, as every tool, resource and prompt makes it: the app that serves its caller
(``tool_call``, ``opened``), the reply's two forms (``reply``), and the one place each kind of
handler translates our errors (``tool_call`` for tools, ``resource_errors``, ``prompt_errors``).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import TYPE_CHECKING, cast

from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ResourceError, ResourceNotFoundError, ToolError
from mcp.shared.exceptions import MCPError
from mcp.types import CallToolResult, TextContent
from mcp_types import INTERNAL_ERROR, INVALID_PARAMS
from pydantic import BaseModel

from ollama_mcp import audit, caller
from ollama_mcp.errors import InvalidInputError, NotFoundError, OllamaMcpError
from ollama_mcp.mcp.apps import Principals, caller_of, serving
from ollama_mcp.mcp.sharing import Need, Sharing, Solo

if TYPE_CHECKING:
    from ollama_mcp.app import App

log = logging.getLogger(__name__)


def reply(result: BaseModel) -> CallToolResult:
    """The result as structured content, and as compact JSON text without nulls for the model.

    The SDK's default text is indented JSON with every null spelled out; clients that show the
    model the text (most do) would pay for that whitespace on every call.
    """
    text = result.model_dump_json(exclude_none=True)
    if text == "{}":  # every field null (no current conversation): the null is the answer
        text = result.model_dump_json()
    return CallToolResult(
        content=[TextContent(type="text", text=text)], structured_content=result.model_dump(mode="json")
    )


def principals_of(ctx: Context) -> tuple[Principals, str]:
    """The lifespan's principals, and the one the caller acts for."""
    principals = cast(Principals, ctx.request_context.lifespan_context)
    return principals, caller_of(ctx, principals.default_principal).principal


def sharing_of(ctx: Context) -> tuple[Sharing | Solo, str]:
    """What may be shared with the caller (``Solo`` on a server with one person), and the
    principal it acts for: the tools ask it, never whether sharing is on."""
    principals, principal = principals_of(ctx)
    return principals.sharing, principal


def begin_search(ctx: Context, query: object) -> None:
    """Before waiting for the app: a search's query goes to Ollama at once if the app is still
    being opened (``head_start``: its embedding is then computed meanwhile)."""
    principals, principal = principals_of(ctx)
    principals.begin_search(principal, query)


async def opened(ctx: Context, conversation_id: str | None = None) -> App:
    """For resources and prompts: the app that serves the caller (on ``conversation_id``, to read);
    each translates what this raises as it translates its own errors."""
    return await serving(*principals_of(ctx), conversation_id, "read")


@asynccontextmanager
async def tool_call(
    ctx: Context, conversation_id: object = None, need: Need = "read", doing: str = "do that"
) -> AsyncIterator[App]:
    """A tool body's app (its caller's principal's, or on a conversation shared with it the
    owner's for ``need``), acting as its client, and its one error translation: our errors
    become tool errors the model can read; anything else is a bug, logged with its stack and
    reported by type only."""
    principals = cast(Principals, ctx.request_context.lifespan_context)
    who = caller_of(ctx, principals.default_principal)
    try:
        with audit.through("tool"), caller.acting(who.client, who.actor):
            yield await serving(principals, who.principal, conversation_id, need, doing)
    except OllamaMcpError as exc:
        raise ToolError(str(exc)) from exc
    except ToolError:
        raise
    except Exception as exc:
        log.exception("internal error in a tool call")
        raise ToolError(f"internal error ({type(exc).__name__}); details are in the server log.") from exc


@contextmanager
def prompt_errors() -> Iterator[None]:
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
def resource_errors() -> Iterator[None]:
    """Resource reads: a missing item is 'not found', other failures say why."""
    try:
        yield
    except NotFoundError as exc:
        raise ResourceNotFoundError(str(exc)) from exc
    except OllamaMcpError as exc:
        raise ResourceError(str(exc)) from exc

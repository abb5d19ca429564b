"""The stdio transport: the SDK's, with every request line answered.

The SDK's stdio reader parses each line with pydantic; a line it cannot parse (an unpaired
surrogate escape such as ``"\\ud800"``, nesting deeper than its parser's ~200 levels, broken
JSON, a request without a method) becomes an ``Exception`` on the read stream, which the
dispatcher logs at DEBUG and drops. The client then waits until its own timeout, and Claude
Desktop shows a hung tool. This module wraps the SDK's transport (it does not fork it): between
its read stream and the server sits a filter that answers such a line with a JSON-RPC error
carrying the request's id where it can be recovered (``null`` otherwise, as JSON-RPC 2.0 asks),
and the server keeps running.

Upstream: the SDK's ``JSONRPCDispatcher`` has an ``on_stream_exception`` hook that its client
session uses but its server never sets; a default server-side observer that answers parse
failures with ``-32700``/``-32600`` (the raw line is in the pydantic error) would make this
module unnecessary.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
from mcp.server.stdio import stdio_server
from mcp.shared._context_streams import ContextReceiveStream, ContextSendStream, create_context_streams
from mcp.shared.message import SessionMessage
from mcp_types import INVALID_REQUEST, PARSE_ERROR, ErrorData, JSONRPCError
from pydantic import ValidationError

log = logging.getLogger(__name__)

# The id of a request whose JSON cannot be decoded at all (too deep for Python's parser too):
# looked for before the first nested object or array, where clients put it.
_ID_BEFORE_NESTING = re.compile(r'^\s*\{[^{\[]*?"id"\s*:\s*(-?\d+|"(?:[^"\\]|\\.)*")')


@asynccontextmanager
async def answering_stdio_server() -> AsyncIterator[
    tuple[ContextReceiveStream[SessionMessage | Exception], ContextSendStream[SessionMessage]]
]:
    """``mcp.server.stdio.stdio_server()`` whose unreadable request lines are answered, not dropped."""
    async with stdio_server() as (read_stream, write_stream):
        send, receive = create_context_streams[SessionMessage | Exception](0)

        async def forward() -> None:
            async with send:
                async for item in read_stream:
                    if isinstance(item, Exception):
                        answer = unreadable_answer(item)
                        if answer is not None:
                            await write_stream.send(SessionMessage(answer))
                        continue
                    await send.send(item)

        async with anyio.create_task_group() as tasks:
            tasks.start_soon(forward)
            try:
                yield receive, write_stream
            finally:
                tasks.cancel_scope.cancel()


def unreadable_answer(exc: Exception) -> JSONRPCError | None:
    """The error response owed for a line the SDK could not parse, or None when none is owed
    (a malformed notification: JSON-RPC never answers those)."""
    if not isinstance(exc, ValidationError):
        log.warning("the stdio transport reported %s; no request to answer", type(exc).__name__)
        return None
    errors: list[Any] = list(exc.errors(include_url=False))
    first: dict[str, Any] = dict(errors[0]) if errors else {}
    raw = first.get("input")
    if first.get("type") == "json_invalid" and isinstance(raw, str):
        answer = JSONRPCError(
            jsonrpc="2.0",
            id=_recover_id(raw),
            error=ErrorData(
                code=PARSE_ERROR,
                message=(
                    f"The request could not be parsed: {_parser_reason(first, raw)}; nothing was done. "
                    "Send one JSON-RPC message per line as valid UTF-8 JSON."
                ),
            ),
        )
        size = len(raw.encode("utf-8", "surrogatepass"))
    elif isinstance(raw, dict):
        if "id" not in raw and "method" in raw:
            log.warning("dropped a malformed notification (%s)", _fields(errors))
            return None
        request_id = raw.get("id")
        answer = JSONRPCError(
            jsonrpc="2.0",
            id=request_id if isinstance(request_id, str | int) and not isinstance(request_id, bool) else None,
            error=ErrorData(
                code=INVALID_REQUEST,
                message=(
                    f"The message is not a valid JSON-RPC request ({_fields(errors)}); nothing was done. "
                    'A request needs "jsonrpc": "2.0", an "id" (a string or an integer) and a "method".'
                ),
            ),
        )
        size = len(json.dumps(raw, default=str))
    else:
        answer = JSONRPCError(
            jsonrpc="2.0",
            id=None,
            error=ErrorData(code=INVALID_REQUEST, message="The message is not a JSON-RPC request; nothing was done."),
        )
        size = 0
    # The line itself is the client's text (it may quote memories): only its size is logged.
    log.warning("answered an unreadable request line (%d bytes) with JSON-RPC error %d", size, answer.error.code)
    return answer


def _recover_id(raw: str) -> str | int | None:
    """The request id of a line our own parser may still read (Python's json accepts lone
    surrogates and deeper nesting than the SDK's), else the id written before any nesting."""
    try:
        decoded: Any = json.loads(raw)
    except (ValueError, RecursionError):
        match = _ID_BEFORE_NESTING.match(raw)
        if match is None:
            return None
        try:
            decoded = {"id": json.loads(match.group(1))}
        except ValueError:
            return None
    if not isinstance(decoded, dict):
        return None
    request_id = decoded.get("id")
    if isinstance(request_id, bool) or not isinstance(request_id, str | int):
        return None
    return request_id


_LONE_SURROGATE = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")


def _parser_reason(error: Any, raw: str) -> str:
    """What is wrong, in the parser's words where they are clear, never quoting the input."""
    message = str(error.get("msg", "invalid JSON")).removeprefix("Invalid JSON: ")
    if message.startswith("recursion limit exceeded"):
        return "it nests deeper than the limit of about 200 levels"
    if "escape" in message and _LONE_SURROGATE.search(raw):
        return r"it holds a UTF-16 surrogate escape (\ud800-\udfff) without its pair, which is not valid Unicode"
    return message


def _fields(errors: list[Any]) -> str:
    """Which fields failed, e.g. 'method: Field required' — names from the schema, never values."""
    seen: list[str] = []
    for error in errors:
        loc = [str(part) for part in error.get("loc", ())[1:]] or ["message"]
        text = f"{'.'.join(loc)}: {error.get('msg', 'invalid')}"
        if text not in seen:
            seen.append(text)
    return "; ".join(seen[:3])

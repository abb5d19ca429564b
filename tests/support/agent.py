"""The chat model's side of an ask_agent conversation: tool calls and a person answering."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, Literal, cast

from mcp import Client, types

from ollama_mcp.config import Settings
from ollama_mcp.mcp.server import build_server


def tool_call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"role": "assistant", "content": "", "tool_calls": [{"function": {"name": name, "arguments": arguments}}]}


@asynccontextmanager
async def human(
    settings: Settings, answer: str | None, mode: str = "legacy"
) -> AsyncIterator[tuple[Client, list[str]]]:
    """A client whose user answers every confirmation with ``answer`` (accept, decline, cancel);
    ``None``: a client that cannot ask (declares no elicitation), like Claude Desktop chat."""
    asked: list[str] = []

    async def elicit(_context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params.message)
        action = cast(Literal["accept", "decline", "cancel"], answer)
        return types.ElicitResult(action=action, content={"confirm": True} if answer == "accept" else None)

    callback: Any = None if answer is None else elicit
    async with Client(build_server(settings), mode=mode, elicitation_callback=callback) as client:
        yield client, asked

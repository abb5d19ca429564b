"""Calling a tool through the real MCP client and reading its structured result or error."""

from __future__ import annotations

from typing import Any

from mcp import Client


async def call(client: Client, tool: str, **args: Any) -> dict[str, Any]:
    result = await client.call_tool(tool, args)
    assert not result.is_error, result.content[0].text
    assert result.structured_content is not None
    return result.structured_content


async def error(client: Client, tool: str, **args: Any) -> str:
    result = await client.call_tool(tool, args)
    assert result.is_error, result.structured_content
    return result.content[0].text

"""The published shape of the tools: schemas without pydantic's titles, with short nullable
types and no output schemas (``compact_schema``); calls to tools, prompts and resources held to
what is published, refused in our words (``argument_checks``); and stdio request lines the SDK
cannot parse answered (``stdio``). Every byte of tools/list is paid for in the user's context
window on every turn; ``tests/test_packaging.py`` holds its budget.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from mcp.server import MCPServer
from mcp.server.lowlevel.helper_types import ReadResourceContents
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ResourceNotFoundError, ToolError, UnexpectedToolError
from mcp.shared.exceptions import MCPError
from mcp.types import CallToolResult, GetPromptResult, InputRequiredResult
from mcp.types import Tool as MCPTool
from mcp_types import INVALID_PARAMS
from pydantic import ValidationError

from ollama_mcp.mcp import argument_checks
from ollama_mcp.mcp.stdio import answering_stdio_server

if TYPE_CHECKING:
    from ollama_mcp.mcp.apps import RunningApps


class CompactServer(MCPServer):
    """Publishes tool schemas without pydantic's titles, with short nullable types, and without
    output schemas; holds calls to them (``argument_checks``); over stdio, answers request lines
    the SDK cannot parse (``stdio``).

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

    async def call_tool(
        self, name: str, arguments: dict[str, Any], context: Context[Any, Any] | None = None
    ) -> CallToolResult | InputRequiredResult:
        """The SDK's call, with an argument the tool does not take refused before anything runs,
        and the SDK's refusals of the arguments (and of an unknown tool) in our words."""
        tool = self._tool_manager.get_tool(name)
        if tool is None:
            raise ToolError(_refused(name, argument_checks.unknown_name(
                name, [t.name for t in self._tool_manager.list_tools()], "tool")))
        refusal = argument_checks.unknown_arguments(name, list(tool.parameters.get("properties") or {}), arguments)
        if refusal is not None:
            raise ToolError(_refused(name, refusal))
        try:
            return await super().call_tool(name, arguments, context)
        except UnexpectedToolError:
            raise
        except ToolError as exc:
            cause = exc.__cause__
            if isinstance(cause, ValidationError) and cause.title == tool.fn_metadata.arg_model.__name__:
                # (the cause kept: the SDK logs the refused fields' names from it)
                refusal = argument_checks.plain_refusal(compact_schema(tool.parameters), cause)
                raise ToolError(_refused(name, refusal)) from cause
            raise

    async def get_prompt(
        self, name: str, arguments: dict[str, Any] | None = None, context: Context[Any, Any] | None = None
    ) -> GetPromptResult | InputRequiredResult:
        """The SDK's prompt, with an unknown name, an argument it does not take or a required one
        missing refused in our words as invalid params (the SDK made each an internal error, its
        stack in the log, saying "Missing required arguments: {'conversation_id'}")."""
        prompt = self._prompt_manager.get_prompt(name)
        if prompt is None:
            raise MCPError(INVALID_PARAMS, argument_checks.unknown_name(
                name, [p.name for p in self._prompt_manager.list_prompts()], "prompt"))
        takes = [argument.name for argument in prompt.arguments or ()]
        refusal = argument_checks.unknown_arguments(name, takes, arguments or {})
        missing = [a.name for a in prompt.arguments or () if a.required and (arguments or {}).get(a.name) is None]
        if refusal is None and missing:
            verb, them = ("is", "it") if len(missing) == 1 else ("are", "them")
            refusal = f"{', '.join(missing)}: {verb} required by {name}; pass {them}."
        if refusal is not None:
            raise MCPError(INVALID_PARAMS, refusal)
        return await super().get_prompt(name, arguments, context)

    async def read_resource(
        self, uri: Any, context: Context[Any, Any] | None = None
    ) -> Iterable[ReadResourceContents] | InputRequiredResult:
        """The SDK's read, with an address no resource has answered by the addresses there are."""
        try:
            return await super().read_resource(uri, context)
        except ResourceNotFoundError as exc:
            if not str(exc).startswith("Unknown resource:"):
                raise  # (ours: a conversation that does not exist, said by ``resource_errors``)
            known = [str(r.uri) for r in self._resource_manager.list_resources()]
            known += [t.uri_template for t in self._resource_manager.list_templates()]
            raise ResourceNotFoundError(
                f"{uri} is not a resource of this server; its resources are {', '.join(known)}."
            ) from exc

    async def run_stdio_async(self) -> None:
        async with answering_stdio_server() as (read_stream, write_stream):
            lowlevel = self._lowlevel_server  # what MCPServer.run_stdio_async runs, on our streams
            await lowlevel.run(read_stream, write_stream, lowlevel.create_initialization_options())


def _refused(tool: str, why: str) -> str:
    return f"Error executing tool {tool}: {why}"  # (the SDK's prefix, as on every other tool error)


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

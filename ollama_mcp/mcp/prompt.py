"""The MCP prompt ``build_context``: a conversation's summary, recent messages and recalled
memories within a token budget, as the messages a model is handed."""

from __future__ import annotations

from mcp.server import MCPServer
from mcp.server.mcpserver import AssistantMessage, Context, UserMessage
from mcp.server.mcpserver.prompts.base import Message
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS

from ollama_mcp.mcp.calls import opened, prompt_errors


def register_prompt(server: MCPServer) -> None:
    """The ``build_context`` prompt on ``server``."""

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
        with prompt_errors():
            app = await opened(ctx, conversation_id)
            built = await app.lifecycle.build_context(
                conversation_id, int(token_budget), query=query or None, participants=names,
                facts=facts.strip().lower() in ("true", "yes"),
            )
        return [
            AssistantMessage(m["content"]) if m["role"] == "assistant"
            else UserMessage(m["content"] if m["role"] == "user" else f"[{m['role']}] {m['content']}")
            for m in built.messages
        ]

"""The MCP prompt ``build_context``: a conversation's summary, recent messages and recalled
memories within a token budget, as the messages a model is handed."""

from __future__ import annotations

from mcp.server import MCPServer
from mcp.server.mcpserver import AssistantMessage, Context, UserMessage
from mcp.server.mcpserver.prompts.base import Message
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS

from ollama_mcp.inputs.context import context_request
from ollama_mcp.mcp.calls import opened, prompt_errors
from ollama_mcp.services.context import as_text


def register_prompt(server: MCPServer) -> None:
    """The ``build_context`` prompt on ``server``."""

    @server.prompt(description=(
        "Summary, recent messages and recalled memories of a conversation, within a token budget; "
        "participants (comma-separated names) gives their view of a shared transcript; facts=true adds "
        "extracted facts; recent_turns, recall_k and recall_threshold size the parts."
    ))
    async def build_context(
        conversation_id: str, ctx: Context, token_budget: str = "4000", query: str = "", participants: str = "",
        facts: str = "", recent_turns: str = "20", recall_k: str = "5", recall_threshold: str = "",
    ) -> list[Message]:
        for name, value, unit, example in (
            ("token_budget", token_budget, "tokens", 4000), ("recent_turns", recent_turns, "turns", 20),
            ("recall_k", recall_k, "memories", 5),
        ):
            if not value.strip().isdigit():
                raise MCPError(INVALID_PARAMS, f"{name}: must be a whole number of {unit}; pass e.g. {example}")
        try:
            threshold = float(recall_threshold) if recall_threshold.strip() else None
        except ValueError:
            raise MCPError(INVALID_PARAMS, "recall_threshold: must be a number from -1 to 1; pass e.g. 0.3") from None
        if facts.strip().lower() not in ("", "true", "false", "yes", "no"):
            raise MCPError(INVALID_PARAMS, "facts: must be true or false; pass true to add the facts extracted")
        names = [name.strip() for name in participants.split(",") if name.strip()] or None
        with prompt_errors():
            app = await opened(ctx, conversation_id)
            built = await app.context.build(context_request(
                conversation_id, int(token_budget), int(recent_turns), int(recall_k), query=query or None,
                participants=names, facts=facts.strip().lower() in ("true", "yes"), recall_threshold=threshold,
            ))
        return [
            AssistantMessage(as_text(m)) if m["role"] == "assistant"
            else UserMessage(as_text(m) if m["role"] == "user" else f"[{m['role']}] {as_text(m)}")
            for m in built.messages
        ]

"""The message memory a checked turn (``inputs.turns.Turn``) becomes. No I/O: the transcript
stores what this returns."""

from __future__ import annotations

import uuid
from datetime import timedelta

from ollama_mcp.domain import Memory
from ollama_mcp.inputs.turns import Turn

RETRY_WINDOW = timedelta(minutes=10)  # the same turns again within this are a client's retry
# The app's own metadata of a turn, kept under this key of the message's metadata: apart from the
# keys the product itself keeps there (to, tokens, source_id, redacted...), so none can collide.
APP_METADATA = "app"


def message_of(conversation_id: str, turn: Turn, created_at: str) -> Memory:
    """A transcript message of ``turn``, ready to insert."""
    return Memory(
        id=str(uuid.uuid4()), seq=0, conversation_id=conversation_id, kind="message", content=turn.content, tags=(),
        metadata={**({"to": list(turn.to)} if turn.to else {}), **dict(turn.produced),
                  **({APP_METADATA: turn.metadata} if turn.metadata else {})}, created_at=created_at,
        role=turn.role, actor=turn.actor,
        tool_calls=turn.tool_calls, tool_call_id=turn.tool_call_id, occurred_at=turn.occurred_at,
    )

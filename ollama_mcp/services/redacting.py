"""Whether a write's text has its secrets replaced, and the replacing: the one place every path that
writes text asks (a note stored or corrected, turns recorded by a client, a hook, the REST API or
the agent, a streamed turn at its commit, a turn edited, every import), before the text is
embedded, indexed, stored or digested for the audit.

On unless ``OLLAMA_MCP_REDACT=off``; a conversation whose metadata says ``redact_secrets: false``
keeps its text verbatim. What is a secret is ``ollama_mcp.redaction``'s.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from ollama_mcp import redaction
from ollama_mcp.domain import Conversation, Memory
from ollama_mcp.inputs.conversations import ConversationSettings
from ollama_mcp.redaction import Found, Redacted


@dataclass(frozen=True)
class Redacting:
    enabled: bool = True

    def applies(self, conversation: Conversation | None) -> bool:
        """Whether text written into ``conversation`` (None: one not yet known) is redacted."""
        if not self.enabled:
            return False
        return conversation is None or ConversationSettings.of(conversation.metadata).redact_secrets is not False

    def text(self, conversation: Conversation | None, text: str) -> Redacted:
        return redaction.redact(text) if self.applies(conversation) else Redacted(text)

    def texts(self, conversation: Conversation | None, texts: Sequence[str]) -> tuple[list[str], Found]:
        """The texts with their secrets replaced, and how many of each kind were."""
        if not self.applies(conversation):
            return list(texts), ()
        done = [redaction.redact(text) for text in texts]
        return [d.text for d in done], redaction.merged(*(d.found for d in done))

    def memories(self, conversation: Conversation | None, memories: Sequence[Memory]) -> tuple[list[Memory], Found]:
        """The memories about to be written with the secrets of their text and tool calls replaced,
        and how many of each kind were."""
        if not self.applies(conversation):
            return list(memories), ()
        out: list[Memory] = []
        founds: list[tuple[tuple[str, int], ...]] = []
        for memory in memories:
            content = redaction.redact(memory.content)
            calls, in_calls = redaction.redact_json(list(memory.tool_calls))
            founds += [content.found, in_calls]
            changed = content.found or in_calls
            out.append(replace(memory, content=content.text, tool_calls=tuple(calls)) if changed else memory)
        return out, redaction.merged(*founds)


"""Whether a write's text has its secrets replaced, and the replacing: the one place every path that
writes text asks (a note stored or corrected, turns recorded by a client, a hook, the REST API or
the agent, a streamed turn at its commit, a turn edited, every import), before the text is
embedded, indexed, stored or digested for the audit.

On unless ``OLLAMA_MCP_REDACT=off``; a conversation whose metadata says ``redact_secrets: false``
keeps its text verbatim. What is a secret is ``ollama_mcp.redaction``'s.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import TypeVar

import anyio

from ollama_mcp import redaction
from ollama_mcp.domain import Conversation, Memory
from ollama_mcp.inputs.conversations import ConversationSettings
from ollama_mcp.redaction import Found, Redacted

T = TypeVar("T")


# Text longer than this (in one write) is read in a worker thread: about 1 ms a KB, and a shared
# server's event loop must not stop for a 200 KB upload (bench/README.md, "Secrets never stored").
IN_THREAD_CHARS = 16_000


@dataclass(frozen=True)
class Redacting:
    enabled: bool = True

    def applies(self, conversation: Conversation | None) -> bool:
        """Whether text written into ``conversation`` (None: one not yet known) is redacted."""
        return self.applies_to(None if conversation is None else ConversationSettings.of(conversation.metadata))

    def applies_to(self, settings: ConversationSettings | None) -> bool:
        """Whether text written into a conversation of these settings (None: not yet known) is redacted."""
        return self.enabled and (settings is None or settings.redact_secrets is not False)

    async def text(self, conversation: Conversation | None, text: str) -> Redacted:
        if not self.applies(conversation):
            return Redacted(text)
        return await _run(lambda: redaction.redact(text), len(text))

    async def texts(self, conversation: Conversation | None, texts: Sequence[str]) -> tuple[list[str], Found]:
        """The texts with their secrets replaced, and how many of each kind were."""
        if not self.applies(conversation):
            return list(texts), ()
        done = await _run(lambda: [redaction.redact(text) for text in texts], sum(map(len, texts)))
        return [d.text for d in done], redaction.merged(*(d.found for d in done))

    async def memories(
        self, conversation: Conversation | None, memories: Sequence[Memory]
    ) -> tuple[list[Memory], Found]:
        """The memories about to be written with the secrets of their text and tool calls replaced,
        and how many of each kind were."""
        if not self.applies(conversation):
            return list(memories), ()
        return await _run(lambda: _memories(memories), sum(len(m.content) for m in memories))


def _memories(memories: Sequence[Memory]) -> tuple[list[Memory], Found]:
    out: list[Memory] = []
    founds: list[Found] = []
    for memory in memories:
        content = redaction.redact(memory.content)
        calls, in_calls = redaction.redact_json(list(memory.tool_calls))
        founds += [content.found, in_calls]
        changed = content.found or in_calls
        out.append(replace(memory, content=content.text, tool_calls=tuple(calls)) if changed else memory)
    return out, redaction.merged(*founds)


async def _run(work: Callable[[], T], chars: int) -> T:
    """``work()``, in a worker thread when the text it reads is long."""
    return await anyio.to_thread.run_sync(work) if chars > IN_THREAD_CHARS else work()

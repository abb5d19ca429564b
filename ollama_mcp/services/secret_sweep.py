"""Secrets already in a store, from before redaction (or from a time it was off): found, counted
and, when asked, replaced in place (``ollama-mcp redact --scan [--apply]``).

Every memory is read (notes, turns, summaries, facts; every version, and the earlier texts an
edited turn keeps in its metadata; the tool calls), then the conversations' names and summaries
and the turns still being streamed. What ``redaction`` finds is replaced as a write would have
replaced it, in place: the memory keeps its id, time and place; its vectors go and the backfill
computes them from the new text; its keyword entries follow. Then the backend makes the old text
unrecoverable from its files (``purge_removed_text``). A conversation whose metadata says
``redact_secrets: false`` is left as its owner asked. Each batch rewritten is one write-audit row
(action ``redact``) with the kinds and counts."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from ollama_mcp import audit, redaction
from ollama_mcp.domain import Memory
from ollama_mcp.errors import ConversationNotFoundError
from ollama_mcp.services.indexer import Indexer
from ollama_mcp.services.redacting import Redacting
from ollama_mcp.storage.protocols import Storage
from ollama_mcp.storage.secret_storage import OtherText

BATCH = 500  # memories read, and rewritten in one transaction


@dataclass
class SweepReport:
    applied: bool
    memories: int = 0  # read
    with_secrets: int = 0  # memories whose text held a secret
    other_texts: int = 0  # conversation names, summaries and open turns that held one
    found: Counter[str] = field(default_factory=Counter)  # secrets, by kind
    purged: str | None = None  # what the backend did to its files, once rewritten


class SecretSweep:
    def __init__(self, store: Storage, indexer: Indexer) -> None:
        self._store = store
        self._indexer = indexer
        self._verbatim: dict[str, bool] = {}  # the sweep's answers of ``_kept_verbatim``, by conversation

    async def sweep(self, apply: bool, progress: Callable[[int, int], None] | None = None) -> SweepReport:
        """Count the secrets of the whole store, and replace them when ``apply``. ``progress(seq,
        newest)``: called after each batch, with how far through the store's seqs it is."""
        report = SweepReport(applied=apply)
        self._verbatim = {}  # a conversation's opt-out may have changed since the last sweep
        newest = await self._store.newest_seq()
        after = 0
        while batch := await self._store.memories_after(after, BATCH):
            after = batch[-1].seq
            report.memories += len(batch)
            changed: list[Memory] = []
            founds: list[redaction.Found] = []
            for memory in batch:
                if await self._kept_verbatim(memory.conversation_id):
                    continue
                content = redaction.redact(memory.content)
                metadata, in_metadata = redaction.redact_json(memory.metadata)
                calls, in_calls = redaction.redact_json(list(memory.tool_calls))
                found = redaction.merged(content.found, in_metadata, in_calls)
                if found:
                    founds.append(found)
                    changed.append(replace(memory, content=content.text, metadata=metadata, tool_calls=tuple(calls)))
            total = redaction.merged(*founds)
            report.with_secrets += len(changed)
            report.found.update(dict(total))
            if apply and changed:
                with audit.recording("redact", arguments=[m.id for m in changed], redacted=total):
                    gone, contexts = await self._store.rewrite_texts(changed)
                await self._indexer.removed(gone, contexts=contexts)
            if progress is not None:
                progress(min(after, newest), newest)
        await self._other_texts(report, apply)
        if apply and (report.with_secrets or report.other_texts):
            self._indexer.added()
            report.purged = await self._store.purge_removed_text()
        return report

    async def _other_texts(self, report: SweepReport, apply: bool) -> None:
        rewritten: list[OtherText] = []
        founds: list[redaction.Found] = []
        for table, row_id, column, text in await self._store.other_texts():
            if table == "conversations" and await self._kept_verbatim(row_id):
                continue
            done = redaction.redact(text)
            if done.found:
                founds.append(done.found)
                rewritten.append((table, row_id, column, done.text))
        total = redaction.merged(*founds)
        report.other_texts = len(rewritten)
        report.found.update(dict(total))
        if apply and rewritten:
            with audit.recording("redact", arguments=[(t, i, c) for t, i, c, _ in rewritten], redacted=total):
                await self._store.rewrite_other_texts(rewritten)

    async def _kept_verbatim(self, conversation_id: str) -> bool:
        """Whether the conversation's owner asked for its text verbatim (``redact_secrets: false``)."""
        if conversation_id not in self._verbatim:
            try:
                conversation = await self._store.get_conversation(conversation_id)
            except ConversationNotFoundError:
                self._verbatim[conversation_id] = False
            else:  # the command is explicit: OLLAMA_MCP_REDACT=off does not stop it, an opt-out does
                self._verbatim[conversation_id] = not Redacting(enabled=True).applies(conversation)
        return self._verbatim[conversation_id]

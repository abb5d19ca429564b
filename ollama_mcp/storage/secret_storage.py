"""The part of the storage seam (``protocols.Storage``) that reads every text a store holds and
rewrites it in place: what ``ollama-mcp redact --scan --apply`` needs for secrets stored before
redaction existed (``services/redacting.py``). Its own file, as it is its own concept."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal, Protocol

from ollama_mcp.domain import Memory

# The texts outside memories a secret can be in: (table, column). Conversations' names and the
# summaries the chat model wrote; the text of a turn still being streamed, or aborted.
OtherText = tuple[Literal["conversations", "open_turns"], str, Literal["name", "summary", "rolling_summary",
                                                                      "content"], str]


class SecretStorage(Protocol):
    async def memories_after(self, after_seq: int, limit: int) -> list[Memory]:
        """Up to ``limit`` memories of every kind and version after ``after_seq``, by seq."""

    async def rewrite_texts(self, memories: Sequence[Memory]) -> tuple[list[int], list[int]]:
        """Give each memory (by seq) the content, metadata and tool calls given, in place, in one
        transaction: its keyword entries follow, its vectors go (the backfill computes them again),
        the memories whose context held its text get theirs rewritten. Returns (the seqs whose
        vectors went, the seqs whose context changed)."""

    async def other_texts(self) -> list[OtherText]:
        """Every non-empty text of ``OtherText``'s columns: (table, row id, column, text)."""

    async def rewrite_other_texts(self, texts: Sequence[OtherText]) -> None:
        """Give each (table, row id, column) the text given, in one transaction."""

    async def purge_removed_text(self) -> str:
        """Make the text just rewritten unrecoverable from the store's files where the backend
        allows it; what was done, for the user."""

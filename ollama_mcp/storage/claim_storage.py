"""The part of the storage seam (``protocols.Storage``) that keeps what memories state about
whom and the user's word on a supersession (``statements``): its own file, as it is its own concept."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from ollama_mcp.domain import WriteRecord
from ollama_mcp.statements.chains import Review, Statement


class ClaimStorage(Protocol):
    """Statements (a memory's claims, kept with its row) and supersession reviews."""

    async def statements_about(
        self, seqs: Sequence[int], conversation_ids: Sequence[str] | None = None, until: str | None = None,
    ) -> tuple[list[Statement], list[Review]]:
        """Every current statement of the slots (a subject's attribute) the memories ``seqs`` speak
        of (only in ``conversation_ids``, and about a time before ``until``, when given), and their
        reviews."""

    async def all_statements(self, limit: int) -> tuple[list[Statement], list[Review]]:
        """The ``limit`` newest statements of the store that claim something, and their reviews."""

    async def review_supersession(self, older_id: str, newer_id: str, verdict: str, now: str) -> tuple[int, int]:
        """Keep the user's word (``undone``, ``confirmed``) on ``newer_id`` superseding ``older_id``;
        their seqs. ``MemoryNotFoundError`` when either is gone."""

    async def read_claims(self, limit: int) -> int:
        """Read the claims of up to ``limit`` memories stored before they were kept; how many."""

    async def record_supersessions(self, records: Sequence[WriteRecord]) -> None:
        """Keep in the write audit the supersessions a write led to (door ``background``)."""

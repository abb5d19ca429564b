"""Taking the next due job, SQLite's way (the rest of the jobs table: ``storage/sql/jobs.py``)."""

from __future__ import annotations

from collections.abc import Sequence

from ollama_mcp.domain import Job, JobKind
from ollama_mcp.storage.sql import jobs
from ollama_mcp.storage.sqlite.base import StoreBase


class JobStore(jobs.JobStore, StoreBase):
    """The jobs table (``storage/sql/jobs.py``), claimed after a look that takes no lock."""

    async def claim_job(self, now: str, lease_until: str, paused: Sequence[JobKind] = ()) -> Job | None:
        """Take the next due job (or one whose worker's lease lapsed: it died) under a lease, of
        a kind not ``paused``.

        Looked for first without the write lock: the loop asks often, and a process that took the
        lock just to find nothing would hold up the stores of every other process on the file."""
        due = "((state = 'queued' AND run_after <= ?1) OR (state = 'running' AND lease_until <= ?1))"
        if paused:
            due += f" AND NOT {self._dialect.in_list('kind', '?3')}"
        listed = self._dialect.listed(paused)
        found = await self._fetchall(
            f"SELECT 1 FROM jobs WHERE {due} LIMIT 1", (now, None, listed) if paused else (now,), "read background work"
        )
        if not found:
            return None
        async with self._transaction("claim background work") as conn:
            rows = list(await (await conn.execute(
                "UPDATE jobs SET state = 'running', attempts = attempts + 1, lease_until = ?2"
                f" WHERE id = (SELECT id FROM jobs WHERE {due} ORDER BY run_after, id LIMIT 1)"
                f" RETURNING {jobs.CLAIMED_COLUMNS}",
                (now, lease_until, listed) if paused else (now, lease_until),
            )).fetchall())
        return jobs.claimed(rows[0] if rows else None)

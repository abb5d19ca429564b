"""Taking the next due job, PostgreSQL's way (the rest of the jobs table: ``storage/sql/jobs.py``).

Several instances share the jobs: a claim takes the next due job with ``FOR UPDATE SKIP LOCKED``,
so two instances never take the same one, and neither waits for the other.
"""

from __future__ import annotations

from collections.abc import Sequence

from ollama_mcp.domain import Job, JobKind
from ollama_mcp.storage.postgres.base import PgStoreBase
from ollama_mcp.storage.sql import jobs


class JobStore(jobs.JobStore, PgStoreBase):
    """The jobs table (``storage/sql/jobs.py``), claimed by SKIP LOCKED across instances."""

    async def claim_job(self, now: str, lease_until: str, paused: Sequence[JobKind] = ()) -> Job | None:
        """The next due job not ``paused`` (or one whose worker's lease lapsed), claimed under a
        lease; another instance's claim in progress is skipped, not waited for."""
        async with self._transaction("claim background work") as conn:
            cursor = await conn.execute(
                "UPDATE jobs SET state = 'running', attempts = attempts + 1, lease_until = %(lease)s"
                " WHERE id = (SELECT id FROM jobs WHERE ((state = 'queued' AND run_after <= %(now)s)"
                " OR (state = 'running' AND lease_until <= %(now)s)) AND NOT kind = ANY(%(paused)s)"
                " ORDER BY run_after, id LIMIT 1 FOR UPDATE SKIP LOCKED)"
                f" RETURNING {jobs.CLAIMED_COLUMNS}",
                {"now": now, "lease": lease_until, "paused": list(paused)},
            )
            row = await cursor.fetchone()
        return jobs.claimed(row)

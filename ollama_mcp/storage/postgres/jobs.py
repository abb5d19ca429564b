"""Deferred work (the jobs table) and the agent's audit trail.

Several instances share the jobs: a claim takes the next due job with ``FOR UPDATE SKIP LOCKED``,
so two instances never take the same one, and neither waits for the other.
"""

from __future__ import annotations

from collections.abc import Sequence

from ollama_mcp.domain import AuditRow, Job, JobKind, JobRecord, Memory, WriteRecord
from ollama_mcp.storage.postgres.base import PgStoreBase
from ollama_mcp.storage.postgres.rows import enqueue_job_row, execute_many, insert_memory_row, retire_turns


class JobStore(PgStoreBase):
    """Deferred work (the jobs table) and the agent's audit trail."""

    async def enqueue_job(self, kind: JobKind, conversation_id: str, now: str) -> bool:
        """Queue a job unless one of that kind is already open for the conversation."""
        async with self._transaction("queue background work") as conn:
            return await enqueue_job_row(conn, kind, conversation_id, now)

    async def claim_job(self, now: str, lease_until: str) -> Job | None:
        """Take the next due job (or one whose worker's lease lapsed: it died) under a lease."""
        async with self._transaction("claim background work") as conn:
            cursor = await conn.execute(
                "UPDATE jobs SET state = 'running', attempts = attempts + 1, lease_until = %(lease)s"
                " WHERE id = (SELECT id FROM jobs WHERE (state = 'queued' AND run_after <= %(now)s)"
                " OR (state = 'running' AND lease_until <= %(now)s) ORDER BY run_after, id LIMIT 1"
                " FOR UPDATE SKIP LOCKED)"
                " RETURNING id, kind, conversation_id, attempts, last_error",
                {"now": now, "lease": lease_until},
            )
            row = await cursor.fetchone()
        return None if row is None else Job(int(row[0]), row[1], row[2], int(row[3]), row[4])

    async def renew_job(self, job_id: int, lease_until: str) -> None:
        async with self._transaction("renew background work") as conn:
            await conn.execute(
                "UPDATE jobs SET lease_until = %s WHERE id = %s AND state = 'running'", (lease_until, job_id)
            )

    async def next_job_time(self) -> str | None:
        """When the next job falls due (a queued job's run_after or a running job's lease end)."""
        rows = await self._fetchall(
            "SELECT min(CASE state WHEN 'queued' THEN run_after ELSE lease_until END) FROM jobs"
            " WHERE state IN ('queued', 'running')", (), "read background work",
        )
        return rows[0][0] if rows else None

    async def retry_job(self, job_id: int, run_after: str, error: str) -> None:
        async with self._transaction("reschedule background work") as conn:
            await conn.execute(
                "UPDATE jobs SET state = 'queued', run_after = %s, lease_until = NULL, last_error = %s WHERE id = %s",
                (run_after, error, job_id),
            )

    async def fail_job(self, job: Job, error: str, now: str) -> None:
        """Give up on a job, keeping the reason; a summary that will not come is marked failed."""
        async with self._transaction("record failed background work") as conn:
            await conn.execute(
                "UPDATE jobs SET state = 'failed', lease_until = NULL, last_error = %s, finished_at = %s WHERE id = %s",
                (error, now, job.id),
            )
            if job.kind == "summarize":
                await conn.execute(
                    "UPDATE conversations SET summary_status = 'failed' WHERE id = %s AND summary_status = 'pending'",
                    (job.conversation_id,),
                )

    async def finish_job(
        self, job: Job, now: str, *, summary: Memory | None = None, rolling: tuple[Memory, int] | None = None,
        retire: tuple[str, int] | None = None,
    ) -> tuple[list[int], list[int]]:
        """Mark a job done in one transaction with what it produced (a conversation summary, or a
        rolling summary reaching a message seq, which replaces the previous rolling summary's
        memory), and with ``retire`` the covered turns redacted or deleted. Returns the seqs of
        memories that went (or lost their text) and those whose context was rewritten."""
        gone: list[int] = []
        contexts: list[int] = []
        async with self._transaction("store the result of background work") as conn:
            # Locked like every write to a conversation's memories (it may be gone: then nothing is).
            await conn.execute("SELECT 1 FROM conversations WHERE id = %s FOR UPDATE", (job.conversation_id,))
            covered = summary is not None
            if summary is not None:
                await insert_memory_row(conn, summary)
                await conn.execute(
                    "UPDATE conversations SET summary = %s, summary_status = 'done' WHERE id = %s",
                    (summary.content, job.conversation_id),
                )
                await enqueue_job_row(conn, "relate", job.conversation_id, now)  # link it to ones like it
            if rolling is not None:
                memory, through = rolling
                advanced = await conn.execute(
                    "UPDATE conversations SET rolling_summary = %s, summarized_through = %s"
                    " WHERE id = %s AND summarized_through < %s",
                    (memory.content, through, job.conversation_id, through),
                )
                if advanced.rowcount:  # else a newer compaction got there first: keep its memory
                    cursor = await conn.execute(
                        "DELETE FROM memories WHERE conversation_id = %s AND kind = 'summary'"
                        " AND metadata ->> 'rolling' = 'true' RETURNING seq",
                        (job.conversation_id,),
                    )
                    gone = [int(row[0]) for row in await cursor.fetchall()]
                    await insert_memory_row(conn, memory)
                    covered = True
            if retire is not None and covered:
                retired, contexts = await retire_turns(conn, job.conversation_id, *retire)
                gone += retired
            await conn.execute(
                "UPDATE jobs SET state = 'done', lease_until = NULL, finished_at = %s WHERE id = %s", (now, job.id)
            )
        return gone, contexts

    async def write_records(self, since: str | None, limit: int) -> list[WriteRecord]:
        rows = await self._fetchall(
            "SELECT at, door, action, conversation_id, memory_id, arguments_digest, principal FROM write_audit"
            " WHERE %(since)s::text IS NULL OR at >= %(since)s ORDER BY id DESC LIMIT %(limit)s",
            {"since": since, "limit": limit}, "read the write audit",
        )
        return [WriteRecord(*row) for row in rows]

    async def insert_audit(self, rows: Sequence[AuditRow]) -> None:
        if not rows:
            return
        async with self._transaction("write the agent audit") as conn:
            await execute_many(
                conn,
                "INSERT INTO agent_audit (request_id, conversation_id, step, tool, arguments_digest, risk, decision,"
                " outcome, duration_ms, created_at) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
                [(r.request_id, r.conversation_id, r.step, r.tool, r.arguments_digest, r.risk, r.decision,
                  r.outcome, r.duration_ms, r.created_at) for r in rows],
            )

    async def conversation_extras(self, conversation_id: str) -> tuple[list[JobRecord], list[AuditRow]]:
        """The conversation's jobs and audit rows, oldest first."""
        async with self._transaction("read the conversation's jobs") as conn:
            cursor = await conn.execute(
                "SELECT kind, state, attempts, run_after, lease_until, last_error, created_at, finished_at FROM jobs"
                " WHERE conversation_id = %s ORDER BY id", (conversation_id,),
            )
            jobs = [JobRecord(*row) for row in await cursor.fetchall()]
            cursor = await conn.execute(
                "SELECT request_id, conversation_id, step, tool, arguments_digest, risk, decision, outcome,"
                " duration_ms, created_at FROM agent_audit WHERE conversation_id = %s ORDER BY id", (conversation_id,),
            )
            audit = [AuditRow(*row) for row in await cursor.fetchall()]
        return jobs, audit

    async def import_extras(self, conversation_id: str, jobs: Sequence[JobRecord], audit: Sequence[AuditRow]) -> bool:
        """Insert them in one transaction unless the conversation has jobs or audit rows already."""
        async with self._transaction("copy the conversation's jobs") as conn:
            await conn.execute("SELECT 1 FROM conversations WHERE id = %s FOR UPDATE", (conversation_id,))
            cursor = await conn.execute(
                "SELECT (SELECT count(*) FROM jobs WHERE conversation_id = %(c)s)"
                " + (SELECT count(*) FROM agent_audit WHERE conversation_id = %(c)s)", {"c": conversation_id},
            )
            present = await cursor.fetchone()
            if present and present[0]:
                return False
            await execute_many(
                conn,
                "INSERT INTO jobs (kind, conversation_id, state, attempts, run_after, lease_until, last_error,"
                " created_at, finished_at) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)",
                [(j.kind, conversation_id, j.state, j.attempts, j.run_after, j.lease_until, j.last_error,
                  j.created_at, j.finished_at) for j in jobs],
            )
            await execute_many(
                conn,
                "INSERT INTO agent_audit (request_id, conversation_id, step, tool, arguments_digest, risk, decision,"
                " outcome, duration_ms, created_at) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
                [(r.request_id, conversation_id, r.step, r.tool, r.arguments_digest, r.risk, r.decision,
                  r.outcome, r.duration_ms, r.created_at) for r in audit],
            )
        return bool(jobs or audit)

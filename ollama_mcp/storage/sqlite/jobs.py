"""Deferred work (the jobs table) and the agent's audit trail."""

from __future__ import annotations

from collections.abc import Sequence

from ollama_mcp.domain import AuditRow, Job, JobKind, JobRecord, Memory, WriteRecord
from ollama_mcp.storage.sqlite.base import StoreBase
from ollama_mcp.storage.sqlite.rows import enqueue_job_row, insert_memory_row, retire_turns


class JobStore(StoreBase):
    """Deferred work (the jobs table) and the agent's audit trail."""

    async def enqueue_job(self, kind: JobKind, conversation_id: str, now: str) -> bool:
        """Queue a job unless one of that kind is already open for the conversation."""
        async with self._transaction("queue background work") as conn:
            return await enqueue_job_row(conn, kind, conversation_id, now)

    async def claim_job(self, now: str, lease_until: str) -> Job | None:
        """Take the next due job (or one whose worker's lease lapsed: it died) under a lease.

        Looked for first without the write lock: the loop asks often, and a process that took the
        lock just to find nothing would hold up the stores of every other process on the file."""
        due = "(state = 'queued' AND run_after <= ?1) OR (state = 'running' AND lease_until <= ?1)"
        if not await self._fetchall(f"SELECT 1 FROM jobs WHERE {due} LIMIT 1", (now,), "read background work"):
            return None
        async with self._transaction("claim background work") as conn:
            row = await (await conn.execute(
                "UPDATE jobs SET state = 'running', attempts = attempts + 1, lease_until = ?2"
                f" WHERE id = (SELECT id FROM jobs WHERE {due} ORDER BY run_after, id LIMIT 1)"
                " RETURNING id, kind, conversation_id, attempts, last_error",
                (now, lease_until),
            )).fetchone()
        return None if row is None else Job(int(row[0]), row[1], row[2], int(row[3]), row[4])

    async def renew_job(self, job_id: int, lease_until: str) -> None:
        async with self._transaction("renew background work") as conn:
            await conn.execute(
                "UPDATE jobs SET lease_until = ? WHERE id = ? AND state = 'running'", (lease_until, job_id)
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
                "UPDATE jobs SET state = 'queued', run_after = ?, lease_until = NULL, last_error = ? WHERE id = ?",
                (run_after, error, job_id),
            )

    async def fail_job(self, job: Job, error: str, now: str) -> None:
        """Give up on a job, keeping the reason; a summary that will not come is marked failed."""
        async with self._transaction("record failed background work") as conn:
            await conn.execute(
                "UPDATE jobs SET state = 'failed', lease_until = NULL, last_error = ?, finished_at = ? WHERE id = ?",
                (error, now, job.id),
            )
            if job.kind == "summarize":
                await conn.execute(
                    "UPDATE conversations SET summary_status = 'failed' WHERE id = ? AND summary_status = 'pending'",
                    (job.conversation_id,),
                )

    async def finish_job(
        self, job: Job, now: str, *, summary: Memory | None = None, rolling: tuple[Memory, int] | None = None,
        retire: tuple[str, int] | None = None,
    ) -> tuple[list[int], list[int]]:
        """Mark a job done with what it produced, in one transaction: a conversation summary
        (stored as a memory too) or a rolling summary reaching a message seq, which replaces the
        previous rolling summary's memory; with ``retire`` (a retention mode and the seq the new
        summary covers turns through), the covered turns are redacted or deleted. Returns the seqs
        of memories that went (or lost their text) and those whose context was rewritten."""
        gone: list[int] = []
        contexts: list[int] = []
        async with self._transaction("store the result of background work") as conn:
            covered = summary is not None
            if summary is not None:
                await insert_memory_row(conn, summary)
                await conn.execute(
                    "UPDATE conversations SET summary = ?, summary_status = 'done' WHERE id = ?",
                    (summary.content, job.conversation_id),
                )
                await enqueue_job_row(conn, "relate", job.conversation_id, now)  # link it to ones like it
            if rolling is not None:
                memory, through = rolling
                advanced = await conn.execute(
                    "UPDATE conversations SET rolling_summary = ?, summarized_through = ?"
                    " WHERE id = ? AND summarized_through < ?",
                    (memory.content, through, job.conversation_id, through),
                )
                if advanced.rowcount:  # else a newer compaction got there first: keep its memory
                    rows = await (await conn.execute(
                        "DELETE FROM memories WHERE conversation_id = ? AND kind = 'summary'"
                        " AND json_extract(metadata, '$.rolling') = 1 RETURNING seq",
                        (job.conversation_id,),
                    )).fetchall()
                    gone = [int(row[0]) for row in rows]
                    await insert_memory_row(conn, memory)
                    covered = True
            if retire is not None and covered:
                retired, contexts = await retire_turns(conn, job.conversation_id, *retire)
                gone += retired
            await conn.execute(
                "UPDATE jobs SET state = 'done', lease_until = NULL, finished_at = ? WHERE id = ?", (now, job.id)
            )
        return gone, contexts

    async def write_records(self, since: str | None, limit: int) -> list[WriteRecord]:
        rows = await self._fetchall(
            "SELECT at, door, action, conversation_id, memory_id, arguments_digest, principal FROM write_audit"
            " WHERE ?1 IS NULL OR at >= ?1 ORDER BY id DESC LIMIT ?2", (since, limit), "read the write audit",
        )
        return [WriteRecord(*row) for row in rows]

    async def insert_audit(self, rows: Sequence[AuditRow]) -> None:
        if not rows:
            return
        async with self._transaction("write the agent audit") as conn:
            await conn.executemany(
                "INSERT INTO agent_audit (request_id, conversation_id, step, tool, arguments_digest, risk, decision,"
                " outcome, duration_ms, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [(r.request_id, r.conversation_id, r.step, r.tool, r.arguments_digest, r.risk, r.decision,
                  r.outcome, r.duration_ms, r.created_at) for r in rows],
            )

    async def conversation_extras(self, conversation_id: str) -> tuple[list[JobRecord], list[AuditRow]]:
        """The conversation's jobs and audit rows, oldest first."""
        async with self._transaction("read the conversation's jobs", write=False) as conn:
            jobs = await (await conn.execute(
                "SELECT kind, state, attempts, run_after, lease_until, last_error, created_at, finished_at FROM jobs"
                " WHERE conversation_id = ? ORDER BY id", (conversation_id,),
            )).fetchall()
            audit = await (await conn.execute(
                "SELECT request_id, conversation_id, step, tool, arguments_digest, risk, decision, outcome,"
                " duration_ms, created_at FROM agent_audit WHERE conversation_id = ? ORDER BY id", (conversation_id,),
            )).fetchall()
        return [JobRecord(*row) for row in jobs], [AuditRow(*row) for row in audit]

    async def import_extras(self, conversation_id: str, jobs: Sequence[JobRecord], audit: Sequence[AuditRow]) -> bool:
        """Insert them in one transaction unless the conversation has jobs or audit rows already."""
        async with self._transaction("copy the conversation's jobs") as conn:
            present = await (await conn.execute(
                "SELECT (SELECT count(*) FROM jobs WHERE conversation_id = ?1)"
                " + (SELECT count(*) FROM agent_audit WHERE conversation_id = ?1)", (conversation_id,),
            )).fetchone()
            if present and present[0]:
                return False
            await conn.executemany(
                "INSERT INTO jobs (kind, conversation_id, state, attempts, run_after, lease_until, last_error,"
                " created_at, finished_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [(j.kind, conversation_id, j.state, j.attempts, j.run_after, j.lease_until, j.last_error,
                  j.created_at, j.finished_at) for j in jobs],
            )
            await conn.executemany(
                "INSERT INTO agent_audit (request_id, conversation_id, step, tool, arguments_digest, risk, decision,"
                " outcome, duration_ms, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [(r.request_id, conversation_id, r.step, r.tool, r.arguments_digest, r.risk, r.decision,
                  r.outcome, r.duration_ms, r.created_at) for r in audit],
            )
        return bool(jobs or audit)

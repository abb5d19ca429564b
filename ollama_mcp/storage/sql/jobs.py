"""Deferred work (the jobs table) and the agent's audit trail, on either SQL backend. Taking the
next due job is the backend's own (``claim_job``: PostgreSQL skips rows another instance locked;
SQLite looks before it takes the file's write lock)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from ollama_mcp.domain import AuditRow, CompactAt, Job, JobKind, JobRecord, JobStatus, Memory, WriteRecord
from ollama_mcp.errors import JobBusyError, JobNotFoundError
from ollama_mcp.storage.sql.parts import SqlParts
from ollama_mcp.storage.sql.rows import (
    compact_if_due,
    enqueue_job_row,
    execute,
    fetchall,
    fetchone,
    insert_memory_row,
    retire_turns,
)

AUDIT_COLUMNS = (
    "request_id, conversation_id, step, tool, arguments_digest, risk, decision, outcome, duration_ms, created_at"
)
JOB_COLUMNS = "kind, state, attempts, run_after, lease_until, last_error, created_at, finished_at"
STATUS_COLUMNS = "id, kind, conversation_id, state, attempts, last_error, created_at, finished_at, options"
# What a claim returns, for ``claimed``.
CLAIMED_COLUMNS = "id, kind, conversation_id, attempts, last_error, options"


def _status(row: Sequence[Any]) -> JobStatus:
    """A JobStatus from STATUS_COLUMNS."""
    return JobStatus(
        int(row[0]), row[1], str(row[2]), str(row[3]), int(row[4]), row[5], str(row[6]), row[7], _options(row[8])
    )


def claimed(row: Sequence[Any] | None) -> Job | None:
    """The Job a claim's CLAIMED_COLUMNS row describes (None: nothing was due)."""
    if row is None:
        return None
    return Job(int(row[0]), row[1], str(row[2]), int(row[3]), row[4], _options(row[5]))


def _options(cell: str | None) -> dict[str, Any]:
    """The options column (JSON text in both backends) as a dict; NULL is none."""
    return dict(json.loads(cell)) if cell else {}


class JobStore(SqlParts):
    """Deferred work (the jobs table) and the agent's audit trail."""

    async def enqueue_job(self, kind: JobKind, conversation_id: str, now: str) -> bool:
        """Queue a job unless one of that kind is already open for the conversation."""
        async with self._transaction("queue background work") as conn:
            return await enqueue_job_row(conn, self._dialect, kind, conversation_id, now)

    async def request_job(
        self, kind: JobKind, conversation_id: str, now: str, options: dict[str, Any] | None = None
    ) -> JobStatus:
        """Queue a job of ``kind`` for the conversation unless one is open already; the open one,
        in one transaction (asking twice does not run it twice).

        ``options`` given, a queued one takes them (the latest request is what runs); a running
        one with other options is refused (``JobBusyError``): it cannot be changed, and returning
        it would look as if the request had been taken."""
        d = self._dialect
        wanted = json.dumps(options, sort_keys=True) if options else None
        async with self._transaction("queue background work") as conn:
            await enqueue_job_row(conn, d, kind, conversation_id, now, wanted)
            row = await fetchone(
                conn, d, f"SELECT {STATUS_COLUMNS} FROM jobs WHERE kind = ? AND conversation_id = ?"
                " AND state IN ('queued', 'running') ORDER BY id DESC LIMIT 1", (kind, conversation_id),
            )
            status = _status(row)
            if options and status.options != options:
                if status.state == "running":
                    raise JobBusyError(status.id, status.kind)
                await execute(conn, d, "UPDATE jobs SET options = ? WHERE id = ?", (wanted, status.id))
                status = replace(status, options=dict(options))
        return status

    async def job_status(self, job_id: int) -> JobStatus:
        rows = await self._fetchall(
            self._dialect.sql(f"SELECT {STATUS_COLUMNS} FROM jobs WHERE id = ?"), (job_id,), "read background work"
        )
        if not rows:
            raise JobNotFoundError(str(job_id))
        return _status(rows[0])

    async def renew_job(self, job_id: int, lease_until: str) -> None:
        async with self._transaction("renew background work") as conn:
            await execute(
                conn, self._dialect, "UPDATE jobs SET lease_until = ? WHERE id = ? AND state = 'running'",
                (lease_until, job_id),
            )

    async def next_job_time(self, paused: Sequence[JobKind] = ()) -> str | None:
        """When the next job not ``paused`` falls due (a queued job's run_after or a running
        job's lease end)."""
        d = self._dialect
        skip = f" AND NOT {d.in_list('kind')}" if paused else ""
        rows = await self._fetchall(
            d.sql(
                "SELECT min(CASE state WHEN 'queued' THEN run_after ELSE lease_until END) FROM jobs"
                f" WHERE state IN ('queued', 'running'){skip}"
            ),
            (d.listed(paused),) if paused else (), "read background work",
        )
        return rows[0][0] if rows else None

    async def defer_job(self, job_id: int, run_after: str, reason: str) -> None:
        """Put a claimed job back to wait until ``run_after``, its claim not counted as an attempt
        (it waited for something outside it, such as the chat-model budget)."""
        async with self._transaction("reschedule background work") as conn:
            await execute(
                conn, self._dialect,
                "UPDATE jobs SET state = 'queued', run_after = ?, lease_until = NULL, last_error = ?,"
                " attempts = attempts - 1 WHERE id = ? AND state = 'running'",
                (run_after, reason, job_id),
            )

    async def open_jobs(self, kinds: Sequence[JobKind]) -> int:
        """How many jobs of these kinds are queued or running."""
        d = self._dialect
        rows = await self._fetchall(
            d.sql(f"SELECT count(*) FROM jobs WHERE state IN ('queued', 'running') AND {d.in_list('kind')}"),
            (d.listed(kinds),), "read background work",
        )
        return int(rows[0][0])

    async def retry_job(self, job_id: int, run_after: str, error: str) -> None:
        async with self._transaction("reschedule background work") as conn:
            await execute(
                conn, self._dialect,
                "UPDATE jobs SET state = 'queued', run_after = ?, lease_until = NULL, last_error = ? WHERE id = ?",
                (run_after, error, job_id),
            )

    async def fail_job(self, job: Job, error: str, now: str) -> None:
        """Give up on a job, keeping the reason; a summary that will not come is marked failed."""
        async with self._transaction("record failed background work") as conn:
            await execute(
                conn, self._dialect,
                "UPDATE jobs SET state = 'failed', lease_until = NULL, last_error = ?, finished_at = ? WHERE id = ?",
                (error, now, job.id),
            )
            if job.kind == "summarize":
                await execute(
                    conn, self._dialect,
                    "UPDATE conversations SET summary_status = 'failed' WHERE id = ? AND summary_status = 'pending'",
                    (job.conversation_id,),
                )

    async def finish_job(
        self, job: Job, now: str, *, summary: Memory | None = None, rolling: tuple[Memory, int] | None = None,
        retire: tuple[str, int] | None = None, then: Sequence[tuple[JobKind, dict[str, Any]]] = (),
        compact: CompactAt | None = None,
    ) -> tuple[list[int], list[int]]:
        """Mark a job done with what it produced, in one transaction: a conversation summary
        (stored as a memory too) or a rolling summary reaching a message seq, which replaces the
        previous rolling summary's memory; with ``retire`` (a retention mode and the seq the new
        summary covers turns through), the covered turns are redacted or deleted. The jobs it leads
        to are queued in the same transaction: ``then`` (kinds with their options), and with
        ``compact`` a compaction if the transcript is still past it. Returns the seqs of memories
        that went (or lost their text) and those whose context was rewritten."""
        d = self._dialect
        gone: list[int] = []
        contexts: list[int] = []
        async with self._transaction("store the result of background work") as conn:
            # Locked like every write to a conversation's memories (it may be gone: then nothing is).
            await fetchone(conn, d, f"SELECT 1 FROM conversations WHERE id = ?{d.for_update}", (job.conversation_id,))
            covered = summary is not None
            if summary is not None:
                await insert_memory_row(conn, d, summary)
                await execute(
                    conn, d, "UPDATE conversations SET summary = ?, summary_status = 'done' WHERE id = ?",
                    (summary.content, job.conversation_id),
                )
                await enqueue_job_row(conn, d, "relate", job.conversation_id, now)  # link it to ones like it
            if rolling is not None:
                memory, through = rolling
                advanced = await execute(
                    conn, d,
                    "UPDATE conversations SET rolling_summary = ?, summarized_through = ?"
                    " WHERE id = ? AND summarized_through < ?",
                    (memory.content, through, job.conversation_id, through),
                )
                if advanced:  # else a newer compaction got there first: keep its memory
                    rows = await fetchall(
                        conn, d,
                        f"DELETE FROM memories WHERE {d.of_conversation('')} AND kind = 'summary'"
                        f" AND {d.json_true('metadata', 'rolling')} RETURNING seq",
                        (job.conversation_id,),
                    )
                    gone = [int(row[0]) for row in rows]
                    await insert_memory_row(conn, d, memory)
                    covered = True
            if retire is not None and covered:
                retired, contexts = await retire_turns(conn, d, job.conversation_id, *retire)
                gone += retired
            await execute(
                conn, d, "UPDATE jobs SET state = 'done', lease_until = NULL, finished_at = ? WHERE id = ?",
                (now, job.id),
            )
            for kind, options in then:
                wanted = json.dumps(options, sort_keys=True) if options else None
                await enqueue_job_row(conn, d, kind, job.conversation_id, now, wanted)
            if compact is not None:
                await compact_if_due(conn, d, job.conversation_id, compact, now)
        return gone, contexts

    async def write_records(self, since: str | None, limit: int) -> list[WriteRecord]:
        rows = await self._fetchall(
            self._dialect.sql(
                "SELECT at, door, action, conversation_id, memory_id, arguments_digest, principal, redacted"
                " FROM write_audit"
                " WHERE CAST(? AS TEXT) IS NULL OR at >= ? ORDER BY id DESC LIMIT ?"
            ),
            (since, since, limit), "read the write audit",
        )
        return [WriteRecord(*row) for row in rows]

    async def insert_audit(self, rows: Sequence[AuditRow]) -> None:
        if not rows:
            return
        async with self._transaction("write the agent audit") as conn:
            d = self._dialect
            await d.execute_many(
                conn, d.sql(f"INSERT INTO agent_audit ({AUDIT_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"),
                [(r.request_id, r.conversation_id, r.step, r.tool, r.arguments_digest, r.risk, r.decision,
                  r.outcome, r.duration_ms, r.created_at) for r in rows],
            )

    async def conversation_extras(self, conversation_id: str) -> tuple[list[JobRecord], list[AuditRow]]:
        """The conversation's jobs and audit rows, oldest first."""
        d = self._dialect
        async with self._transaction("read the conversation's jobs", write=False) as conn:
            jobs = await fetchall(
                conn, d, f"SELECT {JOB_COLUMNS} FROM jobs WHERE conversation_id = ? ORDER BY id", (conversation_id,)
            )
            audit = await fetchall(
                conn, d, f"SELECT {AUDIT_COLUMNS} FROM agent_audit WHERE conversation_id = ? ORDER BY id",
                (conversation_id,),
            )
        return [JobRecord(*row) for row in jobs], [AuditRow(*row) for row in audit]

    async def import_extras(self, conversation_id: str, jobs: Sequence[JobRecord], audit: Sequence[AuditRow]) -> bool:
        """Insert them in one transaction unless the conversation has jobs or audit rows already."""
        d = self._dialect
        async with self._transaction("copy the conversation's jobs") as conn:
            await fetchone(conn, d, f"SELECT 1 FROM conversations WHERE id = ?{d.for_update}", (conversation_id,))
            present = await fetchone(
                conn, d,
                "SELECT (SELECT count(*) FROM jobs WHERE conversation_id = ?)"
                " + (SELECT count(*) FROM agent_audit WHERE conversation_id = ?)", (conversation_id, conversation_id),
            )
            if present and present[0]:
                return False
            await d.execute_many(
                conn, d.sql(f"INSERT INTO jobs (conversation_id, {JOB_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"),
                [(conversation_id, j.kind, j.state, j.attempts, j.run_after, j.lease_until, j.last_error,
                  j.created_at, j.finished_at) for j in jobs],
            )
            await d.execute_many(
                conn, d.sql(f"INSERT INTO agent_audit ({AUDIT_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"),
                [(r.request_id, conversation_id, r.step, r.tool, r.arguments_digest, r.risk, r.decision,
                  r.outcome, r.duration_ms, r.created_at) for r in audit],
            )
        return bool(jobs or audit)

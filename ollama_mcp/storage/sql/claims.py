"""What notes and turns state about whom (``memories.claims``, ``memory_claims``), read back for
working out which statement is current (``statements.chains``), and the user's word on a
supersession (``supersession_reviews``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ollama_mcp.domain import WriteRecord
from ollama_mcp.statements.chains import Review, Statement
from ollama_mcp.statements.reading import claims_from_json, claims_read
from ollama_mcp.storage.sql.parts import SqlParts
from ollama_mcp.storage.sql.placing import placed_json
from ollama_mcp.storage.sql.rows import execute, memory_by_id

# A memory's claims are read if it is current (not an edited version's old text) and its text kept.
_CURRENT = "m.superseded_by IS NULL AND m.claims IS NOT NULL AND m.claims <> ''"
SUBJECT_MEMBERS = 20_000  # statements read for the slots of one search at most (newest kept)


class ClaimStore(SqlParts):
    """Claims and supersession reviews, on either backend."""

    async def statements_about(
        self, seqs: Sequence[int], conversation_ids: Sequence[str] | None = None, until: str | None = None,
    ) -> tuple[list[Statement], list[Review]]:
        """Every current statement of the slots (a subject's attribute) the memories ``seqs`` speak
        of (only in ``conversation_ids``, and only those about a time before ``until``, when
        given), and the reviews among them."""
        if not seqs:
            return [], []
        d = self._dialect
        where = [_CURRENT]
        params: list[object] = [d.listed(list(seqs))]
        if conversation_ids is not None:
            where.append(d.in_list("m.conversation_id"))
            params.append(d.listed(list(conversation_ids)))
        if until is not None:
            where.append("m.occurred_at < ?")
            params.append(until)
        rows = await self._fetchall(
            d.sql(
                "SELECT m.seq, m.id, m.occurred_at, m.claims FROM memories m WHERE m.seq IN ("
                " SELECT c.memory_seq FROM memory_claims c WHERE c.key IN ("
                f"  SELECT s.key FROM memory_claims s WHERE {d.in_list('s.memory_seq')} AND s.key LIKE 'a:%'))"
                f" AND {' AND '.join(where)} ORDER BY m.occurred_at DESC, m.seq DESC LIMIT {SUBJECT_MEMBERS}"
            ),
            params, "read the statements of the slots the hits speak of",
        )
        return await self._statements(rows)

    async def all_statements(self, limit: int) -> tuple[list[Statement], list[Review]]:
        """The ``limit`` newest statements of the store that claim something, and their reviews."""
        rows = await self._fetchall(
            self._dialect.sql(
                f"SELECT m.seq, m.id, m.occurred_at, m.claims FROM memories m WHERE {_CURRENT}"
                " ORDER BY m.occurred_at DESC, m.seq DESC LIMIT ?"
            ),
            (limit,), "read the statements of the store",
        )
        return await self._statements(rows)

    async def _statements(self, rows: list[Any]) -> tuple[list[Statement], list[Review]]:
        statements = [
            Statement(int(seq), str(id_), str(at), tuple(claims_from_json(claims)))
            for seq, id_, at, claims in rows
        ]
        if not statements:
            return [], []
        d = self._dialect
        reviews = await self._fetchall(
            d.sql(
                "SELECT older_seq, newer_seq, verdict FROM supersession_reviews"
                f" WHERE {d.in_list('older_seq')} OR {d.in_list('newer_seq')}"
            ),
            (d.listed([s.seq for s in statements]), d.listed([s.seq for s in statements])),
            "read the reviews of supersessions",
        )
        return statements, [Review(int(o), int(n), str(v)) for o, n, v in reviews]

    async def review_supersession(self, older_id: str, newer_id: str, verdict: str, now: str) -> tuple[int, int]:
        """Keep the user's word (``undone`` or ``confirmed``) on ``newer_id`` superseding
        ``older_id``, replacing an earlier word on the same pair; their seqs.
        ``MemoryNotFoundError`` when either memory is gone."""
        async with self._transaction("keep the review of a supersession") as conn:
            seqs = [(await memory_by_id(conn, self._dialect, memory_id)).seq for memory_id in (older_id, newer_id)]
            await execute(
                conn, self._dialect,
                "INSERT INTO supersession_reviews (older_seq, newer_seq, verdict, decided_at) VALUES (?, ?, ?, ?)"
                " ON CONFLICT (older_seq, newer_seq) DO UPDATE SET verdict = excluded.verdict,"
                " decided_at = excluded.decided_at",
                (seqs[0], seqs[1], verdict, now),
            )
        return seqs[0], seqs[1]

    async def read_claims(self, limit: int) -> int:
        """Read the claims of up to ``limit`` memories stored before they were kept (oldest
        first); how many were read (fewer than ``limit``: none are left)."""
        rows = await self._fetchall(
            self._dialect.sql(
                "SELECT seq, kind, role, actor, content FROM memories WHERE claims IS NULL ORDER BY seq LIMIT ?"
            ),
            (limit,), "read the memories whose claims are not kept yet",
        )
        if rows:
            async with self._transaction("keep the claims memories state") as conn:
                for seq, kind, role, actor, content in rows:
                    kept = await placed_json(conn, self._dialect, claims_read(kind, role, actor, content))
                    await execute(
                        conn, self._dialect, "UPDATE memories SET claims = ? WHERE seq = ? AND claims IS NULL",
                        (kept, seq),
                    )
        return len(rows)

    async def record_supersessions(self, records: Sequence[WriteRecord]) -> None:
        """Keep in the write audit the supersessions a write led to (the store's own decisions:
        door ``background``), each naming the superseded memory."""
        if not records:
            return
        async with self._transaction("record the supersessions in the write audit") as conn:
            for r in records:
                await execute(
                    conn, self._dialect,
                    "INSERT INTO write_audit (at, door, principal, action, conversation_id, memory_id,"
                    " arguments_digest) VALUES (?, ?, ?, ?, ?, ?, ?)",
                    (r.at, r.door, r.principal, r.action, r.conversation_id, r.memory_id, r.arguments_digest),
                )

"""Vector rows: insert, pending memories per model (leased to one instance at a time), and the
HNSW index of each (model, dimension)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from ollama_mcp.domain import Facet, Memory, format_timestamp
from ollama_mcp.storage.postgres.base import HOLDER_ALIVE, PgStoreBase
from ollama_mcp.storage.postgres.dialect import POSTGRES
from ollama_mcp.storage.sql.rows import memory_columns
from ollama_mcp.storage.sql.vectors import VectorRows, missing_vector, pending_from_rows

# How long a memory handed to one instance's backfill stays reserved for it: long enough to embed
# a batch on a slow machine; if the instance dies, another takes the memory over after this.
EMBEDDING_LEASE = timedelta(minutes=2)


class VectorStore(VectorRows, PgStoreBase):
    """Vector rows: insert, pending memories per model, and per-model HNSW indexes."""

    async def pending_memories(
        self, model: str, limit: int, after_seq: int = 0, through_seq: int | None = None
    ) -> list[tuple[Memory, tuple[Facet, ...]]]:
        """Up to ``limit`` memories after ``after_seq`` (and up to ``through_seq``) lacking a vector
        of ``model``, oldest first, each with the facets it lacks; each is leased to this caller
        for EMBEDDING_LEASE, so the backfills of several instances never embed the same memory at
        the same time."""
        now = datetime.now(UTC)
        content, context = (missing_vector(POSTGRES, facet, "%(model)s") for facet in ("content", "context"))
        params = {
            "model": model, "limit": limit, "after": after_seq, "through": through_seq,
            "now": format_timestamp(now), "until": format_timestamp(now + EMBEDDING_LEASE), "holder": self.holder,
        }
        through = "" if through_seq is None else " AND m.seq <= %(through)s"  # (a range the index reads)
        async with self._transaction("find memories awaiting embeddings") as conn:
            # Three statements, each reading what is committed when it starts (READ COMMITTED):
            # candidates; then the leases, decided by the lease rows themselves (a row another
            # instance holds is kept from us, even one it took a moment ago); then the claimed
            # memories read again, which drops those another instance embedded meanwhile.
            cursor = await conn.execute(
                f"SELECT m.seq FROM memories m WHERE m.seq > %(after)s{through} AND ({content} OR {context})"
                " AND NOT EXISTS (SELECT 1 FROM embedding_leases l WHERE l.memory_seq = m.seq"
                " AND l.model = %(model)s AND l.until > %(now)s AND l.holder <> %(holder)s AND"
                f" {HOLDER_ALIVE.format(lease='l')})"
                " ORDER BY m.seq LIMIT %(limit)s",
                params,
            )
            candidates = [row[0] for row in await cursor.fetchall()]
            if not candidates:
                return []
            cursor = await conn.execute(
                "INSERT INTO embedding_leases (memory_seq, model, holder, until)"
                " SELECT c.seq, %(model)s, %(holder)s, %(until)s FROM unnest(%(seqs)s::bigint[]) AS c(seq)"
                " WHERE EXISTS (SELECT 1 FROM memories m WHERE m.seq = c.seq)"  # not deleted meanwhile
                " ON CONFLICT (memory_seq, model) DO UPDATE SET holder = excluded.holder, until = excluded.until"
                " WHERE embedding_leases.until <= %(now)s OR embedding_leases.holder = %(holder)s"
                f" OR NOT {HOLDER_ALIVE.format(lease='embedding_leases')}"
                " RETURNING memory_seq",
                {**params, "seqs": candidates},
            )
            claimed = [row[0] for row in await cursor.fetchall()]
            cursor = await conn.execute(
                f"SELECT {memory_columns(POSTGRES)}, {content}, {context} FROM memories m"
                f" WHERE m.seq = ANY(%(claimed)s) AND ({content} OR {context}) ORDER BY m.seq",
                {**params, "claimed": claimed},
            )
            rows = await cursor.fetchall()
        return pending_from_rows(POSTGRES, rows)

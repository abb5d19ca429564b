"""Facts (memories of kind 'fact'): see the SQLite store's ``facts``. Facts about one subject and
predicate are placed under an advisory lock of their key, so that two conversations' facts jobs
cannot both leave a current one."""

from __future__ import annotations

from collections.abc import Sequence

from ollama_mcp.domain import Memory
from ollama_mcp.errors import ConversationNotFoundError
from ollama_mcp.storage.postgres.base import PgStoreBase
from ollama_mcp.storage.postgres.rows import (
    MEMORY_COLUMNS,
    insert_memory_row,
    lock_conversation,
    memory_by_seq,
    memory_from_row,
)
from ollama_mcp.storage.records import FACT_KEY, fact_source, place_fact

CURRENT_FACT = "m.kind = 'fact' AND m.superseded_by IS NULL"
FACT_LOCKS = 0x66616374  # the advisory lock space of fact keys ("fact")


class FactStore(PgStoreBase):
    """Facts the chat model extracted, kept beside the memories they came from."""

    async def facts_through(self, conversation_id: str) -> int:
        rows = await self._fetchall(
            "SELECT facts_through FROM conversations WHERE id = %s", (conversation_id,), "read the conversation"
        )
        if not rows:
            raise ConversationNotFoundError(conversation_id)
        return int(rows[0][0])

    async def store_facts(
        self, conversation_id: str, facts: Sequence[Memory], *, since: int, through: int
    ) -> tuple[list[Memory], list[str]]:
        async with self._transaction("store the facts") as conn:
            try:
                await lock_conversation(conn, conversation_id)
            except ConversationNotFoundError:
                return [], []
            moved = await conn.execute(
                "UPDATE conversations SET facts_through = %s WHERE id = %s AND facts_through = %s",
                (through, conversation_id, since),
            )
            if moved.rowcount == 0:  # another run got there first
                return [], []
            stored: list[Memory] = []
            superseded: list[str] = []
            for key in sorted({fact.metadata[FACT_KEY] for fact in facts}):  # one lock order
                await conn.execute("SELECT pg_advisory_xact_lock(%s, hashtext(%s))", (FACT_LOCKS, key))
            for fact in facts:
                cursor = await conn.execute(
                    "SELECT 1 FROM memories WHERE id = %s AND conversation_id = %s",
                    (fact_source(fact), conversation_id),
                )
                if await cursor.fetchone() is None:
                    continue  # deleted while the chat model read it: its facts go with it
                key = fact.metadata[FACT_KEY]
                cursor = await conn.execute(
                    f"SELECT {MEMORY_COLUMNS} FROM memories m WHERE {CURRENT_FACT} AND m.metadata ->> '{FACT_KEY}' ="
                    " %s",
                    (key,),
                )
                placed, replaced = place_fact(fact, [memory_from_row(row) for row in await cursor.fetchall()])
                if placed is None:
                    continue
                if replaced:
                    await conn.execute(
                        "UPDATE memories SET superseded_by = %s WHERE id = ANY(%s)", (placed.id, replaced)
                    )
                    superseded += replaced
                seq = await insert_memory_row(conn, placed)
                assert seq is not None, "only notes are de-duplicated by the insert"
                stored.append(await memory_by_seq(conn, seq))
        return stored, superseded

    async def current_facts(self, conversation_id: str, limit: int) -> list[Memory]:
        rows = await self._fetchall(
            f"SELECT {MEMORY_COLUMNS} FROM memories m WHERE m.conversation_id = %s AND {CURRENT_FACT}"
            " ORDER BY m.seq DESC LIMIT %s",
            (conversation_id, limit), "read the conversation's facts",
        )
        return [memory_from_row(row) for row in rows]

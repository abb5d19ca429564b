"""Facts (memories of kind 'fact'): how far a conversation's were extracted, storing a batch of
them against the current ones (duplicates skipped, contradicted ones superseded), and reading them."""

from __future__ import annotations

import json
from collections.abc import Sequence

from ollama_mcp.domain import Memory
from ollama_mcp.errors import ConversationNotFoundError
from ollama_mcp.storage.records import FACT_KEY, fact_source, place_fact
from ollama_mcp.storage.sqlite.base import StoreBase
from ollama_mcp.storage.sqlite.rows import MEMORY_COLUMNS, insert_memory_row, memory_by_seq, memory_from_row

CURRENT_FACT = "m.kind = 'fact' AND m.superseded_by IS NULL"


class FactStore(StoreBase):
    """Facts the chat model extracted, kept beside the memories they came from."""

    async def facts_through(self, conversation_id: str) -> int:
        rows = await self._fetchall(
            "SELECT facts_through FROM conversations WHERE id = ?", (conversation_id,), "read the conversation"
        )
        if not rows:
            raise ConversationNotFoundError(conversation_id)
        return int(rows[0][0])

    async def store_facts(
        self, conversation_id: str, facts: Sequence[Memory], *, since: int, through: int
    ) -> tuple[list[Memory], list[str]]:
        async with self._transaction("store the facts") as conn:
            moved = await conn.execute(
                "UPDATE conversations SET facts_through = ? WHERE id = ? AND facts_through = ?",
                (through, conversation_id, since),
            )
            if moved.rowcount == 0:  # another run got there first, or the conversation is gone
                return [], []
            stored: list[Memory] = []
            superseded: list[str] = []
            for fact in facts:
                source = await (await conn.execute(
                    "SELECT 1 FROM memories WHERE id = ? AND conversation_id = ?", (fact_source(fact), conversation_id)
                )).fetchone()
                if source is None:
                    continue  # deleted while the chat model read it: its facts go with it
                rows = await (await conn.execute(
                    f"SELECT {MEMORY_COLUMNS} FROM memories m WHERE {CURRENT_FACT}"
                    f" AND json_extract(m.metadata, '$.{FACT_KEY}') = ?",
                    (fact.metadata[FACT_KEY],),
                )).fetchall()
                placed, replaced = place_fact(fact, [memory_from_row(row) for row in rows])
                if placed is None:
                    continue
                if replaced:
                    await conn.execute(
                        "UPDATE memories SET superseded_by = ? WHERE id IN (SELECT value FROM json_each(?))",
                        (placed.id, json.dumps(replaced)),
                    )
                    superseded += replaced
                seq = await insert_memory_row(conn, placed)
                assert seq is not None, "only notes are de-duplicated by the insert"
                stored.append(await memory_by_seq(conn, seq))
        return stored, superseded

    async def current_facts(self, conversation_id: str, limit: int) -> list[Memory]:
        rows = await self._fetchall(
            f"SELECT {MEMORY_COLUMNS} FROM memories m WHERE m.conversation_id = ? AND {CURRENT_FACT}"
            " ORDER BY m.seq DESC LIMIT ?",
            (conversation_id, limit), "read the conversation's facts",
        )
        return [memory_from_row(row) for row in rows]

"""Facts (memories of kind 'fact'), on either SQL backend: how far a conversation's were
extracted, storing a batch of them against the current ones (duplicates skipped, contradicted
ones superseded), and reading them."""

from __future__ import annotations

from collections.abc import Sequence

from ollama_mcp.domain import Memory
from ollama_mcp.errors import ConversationNotFoundError
from ollama_mcp.storage.fact_rules import FACT_KEY, fact_source, place_fact
from ollama_mcp.storage.sql.parts import SqlParts
from ollama_mcp.storage.sql.rows import (
    execute,
    fetchall,
    fetchone,
    insert_memory_row,
    lock_conversation,
    memory_by_seq,
    memory_columns,
    memory_from_row,
)

CURRENT_FACT = "m.kind = 'fact' AND m.superseded_by IS NULL"


class FactStore(SqlParts):
    """Facts the chat model extracted, kept beside the memories they came from."""

    async def facts_through(self, conversation_id: str) -> int:
        rows = await self._fetchall(
            self._dialect.sql("SELECT facts_through FROM conversations WHERE id = ?"), (conversation_id,),
            "read the conversation",
        )
        if not rows:
            raise ConversationNotFoundError(conversation_id)
        return int(rows[0][0])

    async def store_facts(
        self, conversation_id: str, facts: Sequence[Memory], *, since: int, through: int
    ) -> tuple[list[Memory], list[str]]:
        d = self._dialect
        async with self._transaction("store the facts") as conn:
            try:
                await lock_conversation(conn, d, conversation_id)
            except ConversationNotFoundError:
                return [], []
            moved = await execute(
                conn, d, "UPDATE conversations SET facts_through = ? WHERE id = ? AND facts_through = ?",
                (through, conversation_id, since),
            )
            if moved == 0:  # another run got there first
                return [], []
            # Facts about one subject and predicate are placed one run at a time, so that two
            # conversations' facts jobs cannot both leave a current one.
            await d.lock_fact_keys(conn, sorted({fact.metadata[FACT_KEY] for fact in facts}))
            stored: list[Memory] = []
            superseded: list[str] = []
            for fact in facts:
                if await fetchone(
                    conn, d, "SELECT 1 FROM memories WHERE id = ? AND conversation_id = ?",
                    (fact_source(fact), conversation_id),
                ) is None:
                    continue  # deleted while the chat model read it: its facts go with it
                rows = await fetchall(
                    conn, d,
                    f"SELECT {memory_columns(self._dialect)} FROM memories m WHERE {CURRENT_FACT}"
                    f" AND {d.json_text('m.metadata', FACT_KEY)} = ?",
                    (fact.metadata[FACT_KEY],),
                )
                placed, replaced = place_fact(fact, [memory_from_row(d, row) for row in rows])
                if placed is None:
                    continue
                if replaced:
                    await execute(
                        conn, d, f"UPDATE memories SET superseded_by = ? WHERE {d.in_list('id')}",
                        (placed.id, d.listed(replaced)),
                    )
                    superseded += replaced
                seq = await insert_memory_row(conn, d, placed)
                assert seq is not None, "only notes are de-duplicated by the insert"
                stored.append(await memory_by_seq(conn, d, seq))
        return stored, superseded

    async def current_facts(self, conversation_id: str, limit: int) -> list[Memory]:
        rows = await self._fetchall(
            self._dialect.sql(
                f"SELECT {memory_columns(self._dialect)} FROM memories m"
                f" WHERE {self._dialect.of_conversation('m')} AND {CURRENT_FACT}"
                " ORDER BY m.seq DESC LIMIT ?"
            ),
            (conversation_id, limit), "read the conversation's facts",
        )
        return [memory_from_row(self._dialect, row) for row in rows]

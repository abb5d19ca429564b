"""Edited and regenerated turns, on either SQL backend: the message keeps its id and its place in
the transcript and takes the new text in place (its keyword entries follow by trigger; its vectors
go, for the backfill to compute again; the turns after it get contexts with the new text), and the
text it replaces goes into its metadata's ``earlier_versions``, which the export carries: the chain
of what was said before, oldest first."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from ollama_mcp.domain import Memory
from ollama_mcp.errors import ConversationClosedError, InvalidInputError
from ollama_mcp.storage.memory_rules import compose_context, content_hash, is_redacted
from ollama_mcp.storage.sql.parts import SqlParts
from ollama_mcp.storage.sql.placing import claims_to_keep
from ollama_mcp.storage.sql.rows import (
    context_assignment,
    context_followers,
    earlier_contents,
    execute,
    facts_from,
    lock_conversation,
    memory_by_id,
    memory_by_seq,
    rewrite_followers,
)
from ollama_mcp.when import times_named

EARLIER = "earlier_versions"
KEPT_CHARS = 32_000  # earlier texts kept whole up to this in all; older ones beyond keep their digest


class RevisionStore(SqlParts):
    """Turns revised in place, their earlier texts kept in their metadata."""

    async def revise_turn(
        self, turn_id: str, content: str, how: str, now: str, produced: dict[str, Any]
    ) -> tuple[Memory, list[int], list[int]]:
        """Give the message ``turn_id`` the text ``content`` (``how``: edited or regenerated;
        ``produced``: the new model and tokens, replacing the old ones). Returns the message, the
        seqs whose vectors or rows went (it, and the facts drawn from its old text), and the seqs
        whose context was rewritten."""
        d = self._dialect
        async with self._transaction("revise the turn") as conn:
            old = await memory_by_id(conn, d, turn_id)
            if old.kind != "message":
                raise InvalidInputError("turn_id", "names a note, summary or fact, not a turn",
                                        "use update_memory for a note; pass the id of a transcript turn")
            if await lock_conversation(conn, d, old.conversation_id) != "active":
                raise ConversationClosedError(old.conversation_id)
            if is_redacted(old):
                raise InvalidInputError("turn_id", "names a turn whose text a retention mode removed",
                                        "it can no longer be edited")
            facts = await facts_from(conn, d, [old.seq])
            if facts:
                await execute(conn, d, f"DELETE FROM memories WHERE {d.in_list('seq')}", (d.listed(facts),))
            metadata = {k: v for k, v in old.metadata.items() if k not in ("tokens", "model", "adapter")}
            metadata[EARLIER] = _kept([*old.metadata.get(EARLIER, []), {
                "content": old.content, "written_at": old.metadata.get("revised_at", old.created_at),
                **{k: old.metadata[k] for k in ("model", "tokens") if k in old.metadata},
            }])
            metadata.update({**produced, "revised": how, "revised_at": now})
            context = compose_context(await earlier_contents(conn, d, old.conversation_id, old.seq), content)
            followers = await context_followers(conn, d, old.conversation_id, [old.seq])
            set_context, context_param = context_assignment(d, context)
            await execute(
                conn, d, f"UPDATE memories SET content = ?{set_context}, spoken_of = ?, claims = ?, metadata = ?"
                " WHERE seq = ?",
                (content, *context_param, times_named(content, old.occurred_at),
                 await claims_to_keep(conn, d, replace(old, content=content)),
                 d.json(metadata), old.seq),
            )
            await execute(conn, d, "DELETE FROM memory_embeddings WHERE memory_seq = ?", (old.seq,))
            changed = await rewrite_followers(conn, d, followers)
            revised = await memory_by_seq(conn, d, old.seq)
        return revised, [old.seq, *facts], changed


def _kept(versions: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The earlier versions, the newest kept whole within KEPT_CHARS; older ones past it keep
    their digest instead of their text."""
    budget = KEPT_CHARS
    kept: list[dict[str, Any]] = []
    for version in reversed(versions):
        text = version.get("content")
        if isinstance(text, str) and len(text) <= budget:
            budget -= len(text)
            kept.insert(0, version)
        elif isinstance(text, str):
            kept.insert(0, {**{k: v for k, v in version.items() if k != "content"},
                            "content_sha256": content_hash(text)})
        else:
            kept.insert(0, version)
    return kept

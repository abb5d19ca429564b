"""The claims a memory's row keeps (``memories.claims``), placed when it is written: a claim no word
placed ("Ottilie is enjoying life in Trieste": no cue names an attribute) takes the attribute its
subject already holds that value under (Trieste is where Ottilie lives: said again, in any tense),
else the one attribute that value has anywhere in the store (Utrecht is a place people live),
else stays unplaced and counts for nothing. Only a claim that says what holds is placed by the
kind of its value (``Claim.placeable``): "I met Anna in Paris" is a story, never a move to Paris.

Placing here, once, in the write's own transaction, is what keeps a search's reading small: it
reads the statements of the slots its hits speak of (``memory_claims``' ``a:`` keys), never every
statement about a subject (a person's thousands of notes in the first person)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from ollama_mcp.domain import Memory
from ollama_mcp.statements.reading import WEEKDAYS, Claim, claims_json, claims_read
from ollama_mcp.storage.sql.dialect import Dialect


async def claims_to_keep(conn: Any, d: Dialect, memory: Memory) -> str:
    """``memory``'s claims as its row keeps them (``claims_json``), each one placed if it can be."""
    return await placed_json(conn, d, claims_read(memory.kind, memory.role, memory.actor, memory.content))


async def placed_json(conn: Any, d: Dialect, claims: list[Claim]) -> str:
    placed = [await _placed(conn, d, c) if c.attribute is None else c for c in claims]
    return claims_json(placed)


async def _placed(conn: Any, d: Dialect, claim: Claim) -> Claim:
    said = [v for v in (claim.value, *claim.ends) if v]
    # A fact that never changes is no slot to join ("Priya is in Bergen, not Seville" where she
    # was born in Bergen and lived in Seville: a correction of where she lives).
    held = {a for a in await _attributes(conn, d, [f"sv:{claim.subject}|{v}" for v in said])
            if not a.startswith("stable:")}
    if not held and claim.placeable:
        held = {a for a in await _attributes(conn, d, [f"va:{v}" for v in said]) if not a.startswith("stable:")}
    if not held and claim.placeable and said and all(v in WEEKDAYS for v in said):
        # "Actually it's Tuesday now": a day joins the one recurring event its subject has a day for.
        days = await _attributes(conn, d, [f"sv:{claim.subject}|{day}" for day in WEEKDAYS])
        held = {a for a in days if a.startswith("schedule:")}
    if len(held) != 1:
        return claim
    return replace(claim, attribute=held.pop(), placed=True)


async def _attributes(conn: Any, d: Dialect, keys: list[str]) -> set[str]:
    """The attributes ``memory_claims`` holds under ``keys`` (a few: a value is of one kind or two)."""
    cursor = await conn.execute(
        d.sql(f"SELECT DISTINCT attribute FROM memory_claims WHERE {d.in_list('key')} LIMIT 20"), (d.listed(keys),),
    )
    return {str(row[0]) for row in await cursor.fetchall()}

"""Which statement is current (no I/O): everything said about one subject's attribute (a slot),
in the order of the times it is about, and who superseded whom.

The newest statement of a slot by ``occurred_at`` (never by arrival: an old chat imported today
is older than what was said last week) holds its value; every earlier one of another value is
superseded by the first later statement that displaced it, its direct successor, so a chain
reads Lisbon → Porto → Oslo and a question about the past finds the one before. The same value
said again joins the statement that holds it ("Maren still loves Oslo" is current with "Maren
moved to Oslo"); an additive one ("also") displaces nothing; one that ends a value ("no longer
lives in Oslo") supersedes its holders and has no value of its own.

Worked out from the claims kept with the rows each time a search asks (``settle``), not stored:
a memory deleted from the middle of a chain mends it (its predecessors are then superseded by its
successor), and an undone supersession (``Review``) takes effect at once. Two values of a slot
within ``SAME_MOMENT`` of each other, neither told as a correction, are a conflict: the later
still wins the ranking, and the pair is listed for review with a low confidence.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime

from ollama_mcp.statements.reading import Claim

SAME_MOMENT = 60.0  # seconds: two values said this close together are a conflict, not a change
ENDED = "\x00ended"  # a slot's value after a statement ended it

# How sure a supersession is, by what it rests on.
EXPLICIT = 0.9  # told as a change or a correction: "moved to", "now", "not Lisbon", "no longer"
NAMED = 0.7  # the attribute named by a cue word ("lives", "works", "standup"), the value new
BY_VALUE = 0.6  # the attribute read from the value alone (a known product, a value held before)
CONFLICT = 0.3  # two values at the same moment: which one is true is the user's to say
REVIEW_BELOW = 0.65  # supersessions less sure than this are listed for review


@dataclass(frozen=True)
class Statement:
    """A memory as the chains see it: its seq, id, when it is about and what it claims."""

    seq: int
    id: str
    at: str  # occurred_at
    claims: tuple[Claim, ...]


@dataclass(frozen=True)
class Link:
    """``older`` superseded by ``newer`` on one slot, and why."""

    older: int  # seq
    newer: int  # seq
    subject: str
    attribute: str
    old_value: str | None  # None: the older statement only ended a value
    new_value: str | None  # None: the newer one ends the old value without a successor
    cue: str
    confidence: float
    conflict: bool  # the two were said at the same moment

    @property
    def grounds(self) -> str:
        """Why, in words a hit can show."""
        who = self.subject.removeprefix("speaker:")
        what = self.attribute.replace("schedule:", "") + (" day" if self.attribute.startswith("schedule:") else "")
        old = self.old_value or "none"
        if self.new_value is None:
            said = f"{who}'s {what} {old!r} ended by a later statement"
        else:
            said = f"{who}'s {what} is {self.new_value!r} in a later statement (was {old!r})"
        how = f" (read from {self.cue!r})" if self.cue else ""
        if self.conflict:
            return f"{said}{how}; both were said at the same moment, so this is a conflict to review"
        return f"{said}{how}"


@dataclass(frozen=True)
class Review:
    """The user's word on one supersession: undone (both hold) or confirmed."""

    older: int
    newer: int
    verdict: str  # "undone" | "confirmed"


@dataclass
class Chains:
    """The supersessions among a set of statements."""

    links: list[Link] = field(default_factory=list)
    superseded: dict[int, Link] = field(default_factory=dict)  # seq → the link that superseded it
    head: dict[int, int] = field(default_factory=dict)  # a superseded seq → the seq now holding its slot
    before: dict[int, list[int]] = field(default_factory=dict)  # seq → the seqs it displaced, newest first
    confirmed: set[tuple[int, int]] = field(default_factory=set)
    # What each statement speaks of, placed: seq → its (subject, attribute) slots; and each slot's values.
    slots_of: dict[int, set[tuple[str, str]]] = field(default_factory=dict)
    values: dict[tuple[str, str], set[str]] = field(default_factory=dict)
    changed: set[tuple[str, str]] = field(default_factory=set)  # the slots where something was superseded

    def open_conflicts(self) -> list[Link]:
        """The supersessions a user should look at: conflicts and unsure ones not yet confirmed."""
        return [link for link in self.links if (link.conflict or link.confidence < REVIEW_BELOW)
                and (link.older, link.newer) not in self.confirmed]


def settle(statements: Sequence[Statement], reviews: Sequence[Review] = ()) -> Chains:
    """The chains of every slot among ``statements`` (all those of the slots in question). A claim
    the store placed by its value when it was written (``Claim.placed``) counts as less sure; one
    nothing placed counts for nothing."""
    undone = {(r.older, r.newer) for r in reviews if r.verdict == "undone"}
    pinned = {older for older, _ in undone}
    chains = Chains(confirmed={(r.older, r.newer) for r in reviews if r.verdict == "confirmed"})
    slots: dict[tuple[str, str], list[tuple[Statement, Claim, float]]] = defaultdict(list)
    for statement in statements:
        for claim in statement.claims:
            if claim.attribute is None:
                continue
            if claim.attribute.startswith("stable:"):
                chains.slots_of.setdefault(statement.seq, set()).add((claim.subject, claim.attribute))
                chains.values.setdefault((claim.subject, claim.attribute), set()).add(claim.value or "")
                continue
            if not claim.additive:
                slots[claim.subject, claim.attribute].append((statement, claim, BY_VALUE if claim.placed else NAMED))
    per_memory: dict[int, list[bool]] = defaultdict(list)  # seq → superseded in each of its slots
    for (subject, attribute), members in slots.items():
        for statement, claim, _ in members:
            chains.slots_of.setdefault(statement.seq, set()).add((subject, attribute))
            chains.values.setdefault((subject, attribute), set()).update(v for v in (claim.value, *claim.ends) if v)
        _settle_slot(subject, attribute, [m for m in members if m[0].seq not in pinned], undone, chains, per_memory)
    # A memory is superseded when every slot it speaks of has moved on.
    for seq, flags in per_memory.items():
        if not all(flags):
            chains.superseded.pop(seq, None)
            chains.head.pop(seq, None)
    return chains


def _settle_slot(
    subject: str, attribute: str, members: list[tuple[Statement, Claim, float]], undone: set[tuple[int, int]],
    chains: Chains, per_memory: dict[int, list[bool]],
) -> None:
    members.sort(key=lambda m: (_moment(m[0].at), m[0].seq))
    current: str | None = None
    holders: list[tuple[Statement, Claim]] = []
    superseded_here: set[int] = set()
    seen: set[str] = set()
    for statement, claim, sureness in members:
        # An attribute named and a value ended that this slot never held ("no longer lives in
        # Porto" where Porto was only implied): what held is over too, less surely.
        unheard = bool(claim.value is None and claim.ends and sureness == NAMED and current not in (None, ENDED)
                       and not seen.intersection(claim.ends))
        if claim.value is not None:
            seen.add(claim.value)
        if unheard:
            sureness = BY_VALUE
        if claim.value is not None and claim.value == current:
            holders.append((statement, claim))
            continue
        displaces = claim.value is not None or (current is not None and current in claim.ends) or unheard
        if current == ENDED and claim.value is None:
            holders.append((statement, claim))  # the end said again
            continue
        if not displaces:
            continue  # it ends a value that no longer holds: history, nothing to change
        for old, old_claim in holders:
            if old.seq == statement.seq or (old.seq, statement.seq) in undone:
                continue
            conflict = abs(_moment(statement.at) - _moment(old.at)) < SAME_MOMENT and not claim.explicit
            confidence = CONFLICT if conflict else BY_VALUE if unheard else EXPLICIT if claim.explicit else sureness
            link = Link(old.seq, statement.seq, subject, attribute, old_claim.value, claim.value, claim.cue,
                        confidence, conflict)
            chains.links.append(link)
            chains.changed.add((subject, attribute))
            if old.seq not in chains.superseded:
                chains.superseded[old.seq] = link
            chains.before.setdefault(statement.seq, []).insert(0, old.seq)
            superseded_here.add(old.seq)
        holders = [(statement, claim)]
        current = claim.value if claim.value is not None else ENDED
    if holders:
        head = max(holders, key=lambda h: (_moment(h[0].at), h[0].seq))[0].seq
        for seq in superseded_here:
            chains.head.setdefault(seq, head)
    for statement, _, _ in members:
        per_memory[statement.seq].append(statement.seq in superseded_here)


def _moment(at: str) -> float:
    try:
        return datetime.fromisoformat(at.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return 0.0

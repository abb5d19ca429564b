"""Memory that stays true: a search's hits as they stand now, the supersessions a write led to,
and the user's review of them (undo, confirm).

Which statement supersedes which is ``statements.chains``' (worked out from the claims kept with
the rows, each time: nothing derived is stored). Here it meets the searches: where a superseded
statement ranked, the statement now holding its subject's attribute takes its place and the stale
one follows, marked (``SearchHit.superseded``: by which memory, the current one, on what
grounds); a question about the past ("before", "used to") or ``include_superseded`` puts each
hit's predecessors right after it. The rank-1 hit does not depend on ``top_k``: the current
statement is put where its best-ranked stale statement was.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from ollama_mcp import audit, caller
from ollama_mcp.domain import Memory, SearchFilters, SearchHit, Superseded, WriteRecord, utc_now
from ollama_mcp.errors import InvalidInputError
from ollama_mcp.statements.chains import Chains, Link, Review, Statement, settle
from ollama_mcp.statements.reading import ANY_SPEAKER, asked_of, asks_about_the_past
from ollama_mcp.storage.protocols import Storage

# Candidates a search ranks for a question about someone's attribute: the statement of exactly
# that is moved first from among them, whatever top_k is (so rank 1 does not depend on it).
FOCUS = 30
REVIEWED = 5_000
# Memories stored before claims were kept are read this many at a time in the background, with a
# pause for the calls someone waits for (a sentence reads in ~50 µs: 100k memories in a minute or two).
CLAIMS_BATCH = 200
CLAIMS_PAUSE_SECONDS = 0.05  # statements the review lists read (the newest): a bounded read of a large store


@dataclass(frozen=True)
class Supersession:
    """One supersession as the review lists show it."""

    older: Memory
    newer: Memory
    grounds: str
    confidence: float
    conflict: bool
    state: str  # "open" (to review), "settled" (sure, or confirmed), "undone"


class Superseding:
    """Changed facts: the searches' view of them, the audit of them, their review."""

    def __init__(self, store: Storage) -> None:
        self._store = store

    async def arrange(
        self, hits: list[SearchHit], query: str, filters: SearchFilters, top_k: int, *, everything: bool = False,
    ) -> list[SearchHit]:
        """The ``top_k`` best of ``hits`` (``pool(top_k)`` of them, ranked) as they stand now: the
        statements about exactly whom and what the query asks first (``reading.asked_of``), each
        superseded one marked and preceded by the current statement of its subject's attribute;
        with ``everything`` (include_superseded) or a question about the past, each hit followed
        by the statements it superseded."""
        if not hits:
            return hits
        scope = filters.conversation_ids if filters.conversation_ids is not None else (
            (filters.conversation_id,) if filters.conversation_id is not None else None)
        statements, reviews = await self._store.statements_about(
            [h.memory.seq for h in hits], scope, filters.until)
        if not statements:
            return hits[:top_k]
        chains = settle(statements, reviews)
        hits = _focused(hits, query, chains)
        if not chains.superseded:
            return hits[:top_k]
        history = everything or asks_about_the_past(query)
        seqs = {h.memory.seq for h in hits}
        wanted: set[int] = set()
        for seq in seqs:
            if seq in chains.superseded:
                wanted.update((chains.superseded[seq].newer, chains.head[seq]))
            if history:
                wanted.update(chains.before.get(seq, ()))
        by_seq = {h.memory.seq: h for h in hits}
        fetched = await self._store.memories_by_seq(wanted - seqs)
        memories = {**{s: h.memory for s, h in by_seq.items()}, **fetched}
        allowed = set(filters.kinds) if filters.kinds else None
        arranged: list[SearchHit] = []
        placed: set[int] = set()

        def put(hit: SearchHit) -> None:
            if hit.memory.seq not in placed:
                placed.add(hit.memory.seq)
                arranged.append(_marked(hit, chains, memories))

        for hit in hits:
            seq = hit.memory.seq
            head = chains.head.get(seq)
            if head is not None and head in memories and not history and (
                    allowed is None or memories[head].kind in allowed):
                put(by_seq.get(head) or SearchHit(memories[head], hit.score, None, ("newer",)))
            put(hit)
            if history:
                for older in chains.before.get(seq, ()):
                    if older in memories and (allowed is None or memories[older].kind in allowed):
                        put(by_seq.get(older) or SearchHit(memories[older], hit.score, None, ("earlier",)))
        return arranged[:top_k]

    async def superseded_among(self, memories: Sequence[Memory]) -> dict[str, Superseded]:
        """Which of ``memories`` a later statement superseded (by memory id): what an export shows."""
        if not memories:
            return {}
        statements, reviews = await self._store.statements_about([m.seq for m in memories])
        chains = settle(statements, reviews)
        wanted = {m.seq for m in memories} & set(chains.superseded)
        if not wanted:
            return {}
        newer = await self._store.memories_by_seq(
            {chains.superseded[s].newer for s in wanted} | {chains.head[s] for s in wanted if s in chains.head})
        by_seq = {m.seq: m for m in memories}
        return {by_seq[seq].id: why for seq in wanted if (why := _why(seq, chains, newer)) is not None}

    async def claims_step(self) -> float | None:
        """One round of reading the claims of memories stored before they were kept with the row
        (a store made before #82); None when none are left, for good."""
        read = await self._store.read_claims(CLAIMS_BATCH)
        return CLAIMS_PAUSE_SECONDS if read == CLAIMS_BATCH else None

    async def written(self, seqs: Sequence[int]) -> int:
        """Record in the write audit (door ``background``) the supersessions the memories ``seqs``
        just written led to; how many."""
        if not seqs:
            return 0
        statements, reviews = await self._store.statements_about(list(seqs))
        chains = settle(statements, reviews)
        new = set(seqs)
        links = [link for link in chains.links if link.newer in new or link.older in new]
        if not links:
            return 0
        ids = {s.seq: s.id for s in statements}
        now = utc_now()
        await self._store.record_supersessions([
            WriteRecord(at=now, door="background", principal=caller.actor(), action="supersede",
                        memory_id=ids[link.older],
                        arguments_digest=audit.digest({"older": ids[link.older], "newer": ids[link.newer],
                                                       "grounds": link.grounds}))
            for link in links
        ])
        return len(links)

    async def review(self, older_id: str, newer_id: str, verdict: str) -> Supersession:
        """The user's word on ``newer_id`` superseding ``older_id``: ``undo`` (the older still holds)
        or ``confirm`` (off the review list). Refused, changing nothing, when the newer one does
        not supersede the older."""
        if verdict not in ("undo", "confirm"):
            raise InvalidInputError("verdict", f"is {verdict!r}", "use 'undo' or 'confirm'")
        older = await self._store.get_memory(older_id)
        newer = await self._store.get_memory(newer_id)
        statements, reviews = await self._store.statements_about([older.seq, newer.seq])
        chains = settle(statements, [r for r in reviews if (r.older, r.newer) != (older.seq, newer.seq)])
        link = next((k for k in chains.links if (k.older, k.newer) == (older.seq, newer.seq)), None)
        if link is None:
            raise InvalidInputError(
                "newer_id", f"{newer_id} does not supersede {older_id}",
                "pass a pair the review list shows (ollama-mcp conflicts, or the browser view's Changed facts)",
            )
        stored = "undone" if verdict == "undo" else "confirmed"
        with audit.recording(f"{verdict}_supersession", older.conversation_id, older.id,
                             arguments={"older": older_id, "newer": newer_id}):
            await self._store.review_supersession(older_id, newer_id, stored, utc_now())
        return Supersession(older, newer, link.grounds, link.confidence, link.conflict, stored)

    async def listed(self, limit: int = 50) -> tuple[list[Supersession], list[Supersession]]:
        """(open conflicts and unsure supersessions to review, the recent supersessions): newest first."""
        statements, reviews = await self._store.all_statements(REVIEWED)
        chains = settle(statements, reviews)
        undone = {(r.older, r.newer) for r in reviews if r.verdict == "undone"}
        undone_links = _undone_links(statements, reviews)
        open_ = {(k.older, k.newer) for k in chains.open_conflicts()}
        links = sorted([*chains.links, *undone_links], key=lambda k: (k.newer, k.older), reverse=True)
        memories = await self._store.memories_by_seq({s for k in links for s in (k.older, k.newer)})
        shown: list[Supersession] = []
        for link in links:
            if link.older not in memories or link.newer not in memories:
                continue
            pair = (link.older, link.newer)
            state = "undone" if pair in undone else "open" if pair in open_ else "settled"
            shown.append(Supersession(memories[link.older], memories[link.newer], link.grounds, link.confidence,
                                      link.conflict, state))
        to_review = [s for s in shown if s.state == "open"][:limit]
        return to_review, [s for s in shown if s.state != "open"][:limit]


def pool(top_k: int, query: str) -> int:
    """How many ranked hits ``arrange`` needs to give ``top_k``: ``FOCUS`` at least when the query
    asks about someone's attribute."""
    subjects, attributes = asked_of(query)
    return max(top_k, FOCUS) if subjects and attributes else top_k


def _focused(hits: list[SearchHit], query: str, chains: Chains) -> list[SearchHit]:
    """``hits`` with those among the first ``FOCUS`` that state the asked attribute of the asked
    subject moved first, in their order (the rest follow in theirs): only an attribute that has
    changed (two values or more) or one that never does (``stable:``), where ranking by words and
    meaning alone is known to put the wrong statement first; any other question keeps its order."""
    subjects, asked = asked_of(query)
    # A value the question names says what it asks about: "what did they use before Cassandra?"
    attributes = asked | {attribute for (subject, attribute), said in chains.values.items()
                          if subject in subjects and said & subjects}
    if not subjects or not attributes:
        return hits
    anyone = ANY_SPEAKER in subjects

    def on_point(hit: SearchHit) -> bool:
        return any((subject in subjects or (anyone and subject.startswith("speaker:"))) and attribute in attributes
                   and ((subject, attribute) in chains.changed or len(chains.values.get((subject, attribute), ())) > 1
                        or attribute.startswith("stable:"))
                   for subject, attribute in chains.slots_of.get(hit.memory.seq, ()))

    head = hits[:FOCUS]
    return [h for h in head if on_point(h)] + [h for h in head if not on_point(h)] + hits[FOCUS:]


def _undone_links(statements: Sequence[Statement], reviews: Sequence[Review]) -> list[Link]:
    """The supersessions the user undid, as they were before (so the list can show them)."""
    undone = [r for r in reviews if r.verdict == "undone"]
    if not undone:
        return []
    before = settle(statements, [r for r in reviews if r.verdict != "undone"])
    pairs = {(r.older, r.newer) for r in undone}
    return [k for k in before.links if (k.older, k.newer) in pairs]


def _marked(hit: SearchHit, chains: Chains, memories: dict[int, Memory]) -> SearchHit:
    why = _why(hit.memory.seq, chains, memories)
    return hit if why is None else replace(hit, superseded=why)


def _why(seq: int, chains: Chains, memories: dict[int, Memory]) -> Superseded | None:
    """Why the statement ``seq`` no longer holds (None when it holds, or its successor is not at
    hand): its successor, the statement holding the slot now, and the link's grounds."""
    link = chains.superseded.get(seq)
    if link is None or link.newer not in memories:
        return None
    current = memories.get(chains.head.get(seq, link.newer), memories[link.newer])
    return Superseded(memories[link.newer], current, link.grounds, link.confidence, link.conflict)

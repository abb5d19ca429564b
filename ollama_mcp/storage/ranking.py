"""What every backend's ranking shares (no I/O of its own: ``choose`` reads memories through the
reader a backend passes): the tuning knobs, the query's words, and the fusion of ranked lists.
The SQLite ranker (``sqlite.search``) and PostgreSQL's (``postgres.search``) both rank with
these, so a LoCoMo figure measured on one describes the other's ranking too."""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Protocol

from ollama_mcp.domain import MEMORY_READING_TOOLS, MatchReason, Memory, SearchHit, format_timestamp
from ollama_mcp.folds import fold
from ollama_mcp.when import TimeWindow, in_window

if TYPE_CHECKING:  # numpy is not imported on the way to the MCP handshake (tests/test_packaging.py)
    import numpy as np

WORD = re.compile(r"\w+", re.UNICODE)
MAX_QUERY_TERMS = 64


@dataclass(frozen=True)
class SearchTuning:
    """The ranking's knobs; the defaults are what bench/locomo.py measured best (bench/README.md).

    Four ranked lists are fused: keywords in the memory's content, keywords in its context (the
    content with the memories before it), meaning in context (context vectors ranked over the
    whole store), and the meaning of the memory's own text (the candidates of the other lists
    re-ranked by their own vectors). A weight of 0 leaves a list out.
    """

    rrf_k: int = 10  # reciprocal rank fusion: score = sum over lists of weight / (rrf_k + rank)
    keyword_weight: float = 1.0
    keyword_context_weight: float = 1.0
    vector_weight: float = 1.0  # own vectors, re-ranking the candidates
    vector_context_weight: float = 1.0  # context vectors, over the whole store
    # A query naming a time (when.query_window): the candidates that happened in it, or speak of
    # a time in it, form a fifth list (in their fused order) with this weight.
    time_weight: float = 2.0
    # Memories that happened on one day of one conversation are one session; a session that
    # several of the best candidates share rises: each of its members gains this weight times
    # the summed fused scores of its ``session_top`` best among the first ``session_depth``.
    session_weight: float = 0.3
    session_top: int = 2
    session_depth: int = 30
    # A query naming a participant ("what did Sam say about the deploy?"): the memories of the
    # first ``session_depth`` that this actor wrote rise by a list of them, with this weight.
    actor_weight: float = 1.2
    # ... and a turn of theirs right before or after one of the ``exchange_depth`` best, in its
    # session, gains this weight times that one's score: the answer to what another asked.
    exchange_weight: float = 0.2
    exchange_depth: int = 5
    min_depth: int = 50  # candidates each list contributes before fusion, at least
    # ... and when the query names a time: the time list can only lift the candidates the other
    # lists found, and a question's evidence is often words away from it ("We explored nature").
    window_depth: int = 200
    # ... and when that time is at most ``told_span_days`` long, the memories of the
    # ``told_after_days`` after it whose words speak of a time in it ("I went to the UK last
    # Friday", said a week later) form a list of their own, by the meaning of their own text:
    # no other list finds them when they share no word with the question. At most ``told_rows``
    # memories are read for it, the nearest after the window first.
    told_weight: float = 1.0
    told_span_days: int = 14
    told_after_days: int = 14
    told_rows: int = 50
    # A query word found in more than this share of all memories (and in 500 at least) is left
    # out of the keyword query when the query has rarer words: BM25 gives it almost no weight,
    # yet scoring every memory it matches is what makes keyword search slow on large stores.
    common_share: float = 0.1
    common_min_docs: int = 500
    # A memory that shares no word with the query is a hit only if its own text is at least this
    # close in meaning (cosine): else a search in a conversation with one unrelated note returns
    # that note, at similarity 0.0, as its best answer.
    min_similarity: float = 0.1
    # A note, fact or summary found only through the memories stored before it ("nearby words",
    # "nearby meaning": none of its own words, nor its own meaning) is a hit only if this is set:
    # notes stand alone, and the note stored after another is not about it (the Q3 budget note
    # is no answer to "peanut allergy"). A turn keeps its context: "Yes, we did!" answers "did
    # they go to Paris?" through the turn before it, which the hit then quotes (``via``).
    context_only_notes: bool = False
    # Speed and memory only (both rank the same): from this many memories on, the SQLite backend
    # holds an in-memory keyword index instead of asking FTS5 (search.HybridSearch).
    keyword_index_min_memories: int = 50_000


# English function words carry no topic: left out of keyword queries (unless a query has
# nothing else) they stop matching every memory, which keeps BM25 fast and, on LoCoMo, ranks
# slightly better (bench/README.md). Other languages' words pass through untouched.
STOP_WORDS = frozenset(
    "a an the and or but if of at by for with about against between into through during before after "
    "above below to from up down in out on off over under again further then once here there when where "
    "why how all any both each few more most other some such no nor not only own same so than too very "
    "s t can will just don should now i me my myself we our ours ourselves you your yours yourself "
    "yourselves he him his himself she her hers herself it its itself they them their theirs themselves "
    "what which who whom this that these those am is are was were be been being have has had having do "
    "does did doing would could".split()
)


def query_terms(text: str) -> list[str]:
    """The distinct lower-cased words of ``text``, English function words left out (unless
    nothing else is left)."""
    words = list(dict.fromkeys(word.lower() for word in WORD.findall(text)))
    return ([w for w in words if w not in STOP_WORDS] or words)[:MAX_QUERY_TERMS]


def stand_in(own: np.ndarray, own_chars: int, earlier: Sequence[tuple[np.ndarray, int]]) -> np.ndarray:
    """A stand-in for a context vector not computed yet: the memory's own vector mixed with the own
    vectors of the memories its context holds (``earlier``: each with its characters as the
    context holds them), weighted by characters, as a model that averages over tokens weighs the
    joined text; unit length. Right after a burst of stores most memories wait for their context
    vectors, and their own vectors alone rank them no better than keywords alone; stand-ins rank
    almost as well as the real ones (dev R@10 0.792 against 0.799 with MiniLM, 0.804 against
    0.811 with all-mpnet-base-v2, asked at once: bench/README.md, #56). Both backends rank by it."""
    import numpy as np  # noqa: PLC0415 - see TYPE_CHECKING above

    mixed = own.astype(np.float32) * max(1, own_chars)
    for vector, chars in earlier:
        mixed = mixed + vector.astype(np.float32) * max(1, chars)
    norm = float(np.linalg.norm(mixed))
    return mixed / norm if norm > 0 else own.astype(np.float32)


def fuse(ranked_lists: Sequence[tuple[float, Sequence[int]]], *, k: int) -> list[tuple[int, float]]:
    """Weighted reciprocal rank fusion of ranked id lists, best first (ties: earlier lists first)."""
    scores: dict[int, float] = {}
    for weight, ranked in ranked_lists:
        if weight:
            for rank, item in enumerate(ranked, start=1):
                scores[item] = scores.get(item, 0.0) + weight / (k + rank)
    return sorted(scores.items(), key=lambda pair: -pair[1])


class Rows(Protocol):
    """What ranking reads of a backend's store (``storage.Storage`` has both)."""

    async def memories_by_seq(self, seqs: Iterable[int]) -> dict[int, Memory]: ...

    async def moments_by_seq(self, seqs: Iterable[int]) -> dict[int, tuple[str, str]]: ...

    async def adjacent_seqs(self, seqs: Iterable[int]) -> dict[int, tuple[int | None, int | None]]: ...


@dataclass(frozen=True)
class Ranked:
    seq: int
    score: float
    similarity: float | None
    matched: tuple[MatchReason, ...] = ()


def rank_lists(
    tuning: SearchTuning,
    *,
    exact: Sequence[int],
    keyword: Sequence[int],
    keyword_context: Sequence[int],
    by_meaning: Sequence[int],
    similarity: dict[int, float],
    top_k: int,
    depth: int,
    threshold: float | None,
    in_window: frozenset[int] = frozenset(),
    told: Collection[int] = frozenset(),
) -> list[Ranked]:
    """The ``top_k`` best memories from a backend's candidate lists, best first.

    ``exact``: memories holding the query word for word; ``keyword``/``keyword_context``: keyword
    ranks over content and context; ``by_meaning``: vector ranks in context; ``similarity``: the
    content similarity (to the query vector) of every candidate that has one; ``in_window``: the
    candidates in the time the query names; ``told``: the memories that speak of that time later
    (``told_later_span``), found by no other list.
    """
    # Every candidate, however found, re-ranked by the meaning of its own text: precise where a
    # memory's neighbours say little about it (standalone notes).
    candidates = dict.fromkeys([*exact, *keyword, *keyword_context, *by_meaning, *told])
    by_content = sorted((seq for seq in candidates if seq in similarity), key=lambda seq: -similarity[seq])
    fused_scores = fuse(
        [
            (tuning.keyword_weight, keyword),
            (tuning.keyword_context_weight, keyword_context),
            (tuning.vector_weight, by_content[:depth]),
            (tuning.vector_context_weight, by_meaning),
            (tuning.told_weight, sorted((seq for seq in told if seq in similarity), key=lambda seq: -similarity[seq])),
        ],
        k=tuning.rrf_k,
    )
    if in_window and tuning.time_weight:
        # A soft window: those in it rise by a fifth list, ranked as the other lists ranked them.
        in_time = [seq for seq, _ in fused_scores if seq in in_window]
        bonus = dict(fuse([(tuning.time_weight, in_time)], k=tuning.rrf_k))
        fused_scores = sorted(((seq, s + bonus.get(seq, 0.0)) for seq, s in fused_scores), key=lambda pair: -pair[1])
    # Equal fused scores: the one closer in meaning by its own text first (else the order of ties
    # would be the order a backend's lists happened to give them, and differ between backends).
    fused_scores.sort(key=lambda pair: (-round(pair[1], TIE_DIGITS), -similarity.get(pair[0], -2.0)))
    # Memories that contain the query word for word come first, whatever the fusion says.
    exact_set = set(exact)
    worded = exact_set.union(keyword, keyword_context)
    order = [(seq, float("inf")) for seq in exact] + [
        (seq, s) for seq, s in fused_scores
        if seq not in exact_set and (seq in worded or similarity.get(seq, -1.0) >= tuning.min_similarity)
    ]
    fused = [Ranked(seq, score, similarity.get(seq)) for seq, score in order]
    if threshold is not None:
        # The threshold is on meaning: exact matches, and keyword matches with no vector yet
        # (pending), are kept.
        fused = [r for r in fused if r.similarity is None or r.similarity >= threshold or r.seq in exact_set]
    # Why each is a hit, for the chosen ones only (a search ranks hundreds of candidates).
    why = reasons(
        tuning, exact=exact_set, keyword=set(keyword), keyword_context=set(keyword_context),
        by_meaning=set(by_meaning), similarity=similarity, in_time=in_window.union(told),
    )
    return [replace(r, matched=why(r.seq)) for r in fused[:top_k]]


def reasons(
    tuning: SearchTuning, *, exact: Collection[int], keyword: Collection[int], keyword_context: Collection[int],
    by_meaning: Collection[int], similarity: dict[int, float], in_time: Collection[int],
) -> Callable[[int], tuple[MatchReason, ...]]:
    """Why each candidate is a hit, as a search result says it: its own text holds the query
    ("exact") or its words ("words"); the turns just before it hold them ("nearby words"); its own
    text is close in meaning ("meaning": at least ``min_similarity``); it and the turns before it
    together are ("nearby meaning"); it happened in the time the query names, or speaks of it
    ("time")."""

    def why(seq: int) -> tuple[MatchReason, ...]:
        found: list[MatchReason] = []
        if seq in exact:
            found.append("exact")
        if seq in keyword:
            found.append("words")
        elif seq in keyword_context and seq not in exact:
            found.append("nearby words")
        if similarity.get(seq, -1.0) >= tuning.min_similarity:
            found.append("meaning")
        if seq in by_meaning:
            found.append("nearby meaning")
        if seq in in_time:
            found.append("time")
        return tuple(found)

    return why


async def choose(
    tuning: SearchTuning,
    *,
    exact: Sequence[int],
    keyword: Sequence[int],
    keyword_context: Sequence[int],
    by_meaning: Sequence[int],
    similarity: dict[int, float],
    top_k: int,
    depth: int,
    threshold: float | None,
    window: TimeWindow | None,
    rows: Rows,
    words: Sequence[str] = (),
    told: Collection[int] = frozenset(),
) -> list[SearchHit]:
    """The ``top_k`` best memories as search hits, from a backend's candidate lists (``rank_lists``)
    and its ``rows``: when the query names a time, when each candidate happened and the times its
    words name decide the time list; then the chosen ones' rows, sessions and the participants
    named in ``words``, the query's terms (``top_hits``). ``told``: the memories that speak of the
    window later (``told_later_span``)."""
    in_window: frozenset[int] = frozenset()
    if window is not None:
        moments = await rows.moments_by_seq(candidates(exact, keyword, keyword_context, by_meaning))
        in_window = happened_or_named_in(window, moments).union(told)
    chosen = rank_lists(
        tuning, exact=exact, keyword=keyword, keyword_context=keyword_context, by_meaning=by_meaning,
        similarity=similarity, top_k=ranked_depth(tuning, top_k), depth=depth, threshold=threshold,
        in_window=in_window, told=told,
    )
    found = await rows.memories_by_seq(r.seq for r in chosen)
    return await top_hits(tuning, chosen, found, top_k, words, rows)


def candidates(*lists: Sequence[int]) -> list[int]:
    """Every memory some list found, once."""
    return list(dict.fromkeys(seq for ranked in lists for seq in ranked))


def happened_or_named_in(window: TimeWindow, moments: dict[int, tuple[str, str]]) -> frozenset[int]:
    """The memories (of ``moments``: when each happened, and the times its words name) that
    happened in ``window`` or speak of a time in it."""
    return frozenset(seq for seq, (happened, spoken) in moments.items() if in_window(window, happened, spoken))


def told_later_span(tuning: SearchTuning, window: TimeWindow | None) -> tuple[str, str] | None:
    """When the memories that may speak of a short ``window`` later happened: the
    ``told_after_days`` after it, of which those that speak of it (``happened_or_named_in``) are told of it later:
    "where was Tim in the second week of November?" and the turn of 16 November saying "I went to a
    castle in the UK last Friday". None for a query naming no time, an open or a long one, or with
    ``told_weight`` 0."""
    if window is None or window.start is None or window.end is None or not tuning.told_weight:
        return None
    end = datetime.fromisoformat(window.end)
    if end - datetime.fromisoformat(window.start) > timedelta(days=tuning.told_span_days):
        return None
    return window.end, format_timestamp(end + timedelta(days=tuning.told_after_days))


def candidate_depth(tuning: SearchTuning, top_k: int, window: TimeWindow | None) -> int:
    """How many candidates each list contributes before fusion."""
    depth = max(tuning.min_depth, top_k * 4)
    return depth if window is None else max(depth, tuning.window_depth)


def ranked_depth(tuning: SearchTuning, top_k: int) -> int:
    """How many fused memories ``top_hits`` needs to choose the best ``top_k``."""
    # Half as many again as asked for: folding copies of one fact (folds.fold) and leaving out
    # notes found through their neighbours only (earns_place) must not leave places empty.
    wanted = top_k + top_k // 2 + 1
    deeper = tuning.session_weight or tuning.actor_weight or tuning.exchange_weight
    return max(wanted, tuning.session_depth) if deeper else wanted


async def top_hits(
    tuning: SearchTuning, fused: Sequence[Ranked], memories: dict[int, Memory], top_k: int, words: Sequence[str],
    rows: Rows,
) -> list[SearchHit]:
    """The ``top_k`` best of ``fused`` (``ranked_depth`` long, best first) as search hits, after
    sessions shared by several of them rose (``SearchTuning.session_weight``), then the memories
    of a participant the query's ``words`` name (``by_actor``)."""
    if tuning.session_weight and len(fused) > 1:
        fused = by_session(tuning, fused, memories)
    if (tuning.actor_weight or tuning.exchange_weight) and words and len(fused) > 1:
        fused = await by_actor(tuning, fused, memories, frozenset(words), rows)
    found = [h for h in to_hits(fused, memories) if tuning.context_only_notes or earns_place(h)]
    return await with_via(fold(found, top_k), rows)


OWN_REASONS: frozenset[MatchReason] = frozenset({"exact", "words", "meaning"})
VIA_CHARS = 160  # how much of the turn a hit was found through it quotes


# Fused scores equal to this many decimals are a tie: the same reciprocal ranks summed in another
# order differ in their last bits, and which of two tied memories came first was then an accident
# of a backend's arithmetic.
TIE_DIGITS = 9


def best_first(r: Ranked) -> tuple[float, float]:
    """The order of ranked memories: by score, ties by the similarity of their own text."""
    return -round(r.score, TIE_DIGITS), -(r.similarity if r.similarity is not None else -2.0)


def earns_place(hit: SearchHit) -> bool:
    """Whether a hit stands on its own: a turn may be found through the turns before it (its
    context is its conversation), any other memory only by its own words or meaning; and the
    agent's record of its own searches (a tool turn of ``MEMORY_READING_TOOLS``) never, as it only
    repeats memories that are hits themselves."""
    m = hit.memory
    if m.kind == "message":
        return not (m.role == "tool" and m.actor in MEMORY_READING_TOOLS)
    return not hit.matched or bool(OWN_REASONS.intersection(hit.matched))


async def with_via(found: list[SearchHit], rows: Rows) -> list[SearchHit]:
    """The hits, each turn found only through the turn before it quoting that turn (``via``)."""
    through = [h.memory.seq for h in found if h.matched and not OWN_REASONS.intersection(h.matched)]
    if not through:
        return found
    before = {seq: pair[0] for seq, pair in (await rows.adjacent_seqs(through)).items() if pair[0] is not None}
    said = await rows.memories_by_seq(before.values())
    out = []
    for h in found:
        prior = said.get(before.get(h.memory.seq, -1))
        if prior is not None:
            text = " ".join(prior.content.split())
            text = text if len(text) <= VIA_CHARS else text[: VIA_CHARS - 1] + "…"
            h = replace(h, via=f"{prior.actor or prior.role or prior.kind}: {text}")
        out.append(h)
    return out


def query_names_actor(actor: str, words: frozenset[str]) -> bool:
    """Whether a query of ``words`` (lower-cased terms) names ``actor``: by all its words, or by
    its first ("Sam" names "Sam Rivera"; "claude" names "claude-code")."""
    own = [word.lower() for word in WORD.findall(actor)]
    if not own:
        return False
    first = own[0]
    return (len(first) > 1 and first not in STOP_WORDS and first in words) or all(word in words for word in own)


async def by_actor(
    tuning: SearchTuning, fused: Sequence[Ranked], memories: dict[int, Memory], words: frozenset[str], rows: Rows
) -> list[Ranked]:
    """``fused`` re-ordered with the memories of the participants the query names (among the
    first ``session_depth``) risen by a list of them, in their order, and by their exchanges
    (``exchanges``). Exact matches (an infinite score) stay first, in their order; with no
    participant named, ``fused`` as it is."""
    head = [r for r in fused[: tuning.session_depth] if r.seq in memories and r.score != float("inf")]
    actors = {actor for r in head if (actor := memories[r.seq].actor)}
    named = {actor for actor in actors if query_names_actor(actor, words)}
    if not named:
        return list(fused)
    theirs = [r.seq for r in head if memories[r.seq].actor in named]
    bonus = dict(fuse([(tuning.actor_weight, theirs)], k=tuning.rrf_k))
    if tuning.exchange_weight:
        for seq, gain in (await exchanges(tuning, head, memories, named, rows)).items():
            bonus[seq] = bonus.get(seq, 0.0) + gain
    rescored = [replace(r, score=r.score + bonus.get(r.seq, 0.0)) for r in fused]
    return sorted(rescored, key=best_first)


async def exchanges(
    tuning: SearchTuning, head: Sequence[Ranked], memories: dict[int, Memory], named: set[str], rows: Rows
) -> dict[int, float]:
    """What the ``named`` participants' turns among ``head`` gain from being right before or after
    one of its ``exchange_depth`` best in the same session: that one's score times
    ``exchange_weight`` (the reply to a question another asked, which the question's words found)."""
    among = {r.seq for r in head}
    best = head[: tuning.exchange_depth]
    around = await rows.adjacent_seqs(r.seq for r in best)
    gains: dict[int, float] = {}
    for r in best:
        for seq in around.get(r.seq, (None, None)):
            if seq in among and memories[seq].actor in named and session(memories[seq]) == session(memories[r.seq]):
                gains[seq] = gains.get(seq, 0.0) + tuning.exchange_weight * r.score
    return gains


def by_session(tuning: SearchTuning, fused: Sequence[Ranked], memories: dict[int, Memory]) -> list[Ranked]:
    """``fused`` re-ordered with each memory's session strength added (see ``SearchTuning``).
    Exact matches (an infinite score) stay first, in their order."""

    def session_of(seq: int) -> tuple[str, str] | None:
        memory = memories.get(seq)
        return None if memory is None else session(memory)

    members: dict[tuple[str, str], list[float]] = {}
    for r in fused[: tuning.session_depth]:
        key = session_of(r.seq)
        if key is not None and r.score != float("inf"):
            members.setdefault(key, []).append(r.score)  # best first, as fused is
    strength = {key: sum(scores[: tuning.session_top]) for key, scores in members.items() if len(scores) > 1}
    if not strength:
        return list(fused)
    rescored = []
    for r in fused:
        key = session_of(r.seq)
        gain = 0.0 if key is None else tuning.session_weight * strength.get(key, 0.0)
        rescored.append(replace(r, score=r.score + gain))
    return sorted(rescored, key=best_first)


def session(memory: Memory) -> tuple[str, str]:
    """The session a memory belongs to: its conversation and the day it happened."""
    return memory.conversation_id, memory.occurred_at[:10]


def to_hits(chosen: Sequence[Ranked], memories: dict[int, Memory]) -> list[SearchHit]:
    """The ranked memories as search hits, in order; one deleted since it was ranked is left out."""
    return [
        SearchHit(memories[r.seq], r.score, None if r.similarity is None else round(r.similarity, 4), r.matched)
        for r in chosen
        if r.seq in memories
    ]

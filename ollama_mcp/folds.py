"""One hit per fact: when two memories say the same thing, so that a search shows it once with
every place it was said (a fact told in two sessions, a note and the turn it repeats, a chat
imported twice under two names).

Two texts say the same thing when their words are the same in the same order once case, accents'
forms (NFKC), punctuation and spacing are set aside ("We deploy on Fridays only." and "we deploy
on fridays only"), or when the whole of one, at least ``MIN_CONTAINED_WORDS`` words long, stands
word for word inside the other with at most ``MAX_EXTRA_WORDS`` words around it (a turn, and the
note "[8 May] Sam: <the turn>"): the longer is shown, so nothing either says is hidden. Nothing
else folds: look-alikes that differ in one number or one name ("standup is at 9" and "standup
is at 10") are different facts and stay two hits; a text that holds another among much else
(an agent's search results holding a note) says more, and both are shown. Meaning alone never
folds (two paraphrases may differ in what matters).

Pure functions on values, no I/O: the ranking (both backends) folds a store's hits, and the
sharing edge folds the lists of several owners merged.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from dataclasses import replace

from ollama_mcp.domain import SearchHit

_WORD = re.compile(r"\w+", re.UNICODE)
MIN_CONTAINED_WORDS = 5  # a shorter text folds only into one of the same words (short phrases recur)
# ... and into a longer one only when that adds at most this many words: a speaker and a date
# ("[8 May, 2023] Sam: ..."), "remember: ...". A text that holds it among much else says more,
# and both are shown.
MAX_EXTRA_WORDS = 10
MAX_CONTAINED_CHARS = 4_000  # a longer text is compared whole only (a note repeats a turn, not a book)


# The other places a search result lists for a folded hit (the rest are counted): a fact said in
# hundreds of chats must not fill a result. Both edges (MCP, REST) show this many.
ALSO_SHOWN = 5


def words(text: str) -> str:
    """The text's words, lower-cased (NFKC, casefold), one space between: what folding compares."""
    return " ".join(_WORD.findall(unicodedata.normalize("NFKC", text).casefold()))


def key(text: str) -> str:
    """What folding compares of ``text``: its ``words``; for a text longer than
    ``MAX_CONTAINED_CHARS``, which folds only into one the same, its casefolded words as spacing
    separates them (a search folds its hits on every call, and the regex and NFKC over a 100k-character
    text cost 3.3 ms against 0.4 ms: long texts then fold only when the same but for case and
    spacing, which is what a long text imported twice is)."""
    if len(text) > MAX_CONTAINED_CHARS:
        return " ".join(text.casefold().split())
    return words(text)


def same_fact(a: str, b: str) -> bool:
    """Whether texts of words ``a`` and ``b`` (as ``key`` gives them) say the same thing: equal,
    or the shorter (at least ``MIN_CONTAINED_WORDS`` words, at most ``MAX_CONTAINED_CHARS``)
    stands whole, word for word, in the longer."""
    if a == b:
        return bool(a)
    short, long = (a, b) if len(a) < len(b) else (b, a)
    if len(short) > MAX_CONTAINED_CHARS or short.count(" ") + 1 < MIN_CONTAINED_WORDS:
        return False
    if long.count(" ") - short.count(" ") > MAX_EXTRA_WORDS:
        return False
    return f" {short} " in f" {long} "


def fold(hits: Sequence[SearchHit], top_k: int) -> list[SearchHit]:
    """The first ``top_k`` facts of ``hits`` (best first), each once: a hit that says what a better
    one says joins it (``SearchHit.also``) instead of taking a place. The group stands where its
    best member ranked and shows its longest text (which holds the others'), so a hit never loses
    words by folding. Hits already folded keep what they carry."""
    groups: list[list[SearchHit]] = []
    keys: list[list[str]] = []
    for hit in hits:
        said = key(hit.memory.content)
        for at, group_keys in enumerate(keys):
            if any(same_fact(said, other) for other in group_keys):
                groups[at].append(hit)
                group_keys.append(said)
                break
        else:
            if len(groups) == top_k:
                continue  # a new fact past the last place: only copies of those shown still join
            groups.append([hit])
            keys.append([said])
    return [_one(group) for group in groups]


def _one(group: list[SearchHit]) -> SearchHit:
    """A folded group as one hit: the longest text (ties: the best ranked), at the best one's score,
    with every other member (and what they carried) in ``also``."""
    best = group[0]
    shown = max(group, key=lambda h: len(h.memory.content))  # the first of equal length: the best ranked
    others = [h for h in group if h is not shown]
    also = shown.also + tuple(memory for h in others for memory in (h.memory, *h.also))
    if shown is best and not others:
        return best
    reasons = tuple(dict.fromkeys(reason for h in group for reason in h.matched))
    return replace(shown, score=best.score, similarity=_best(group), matched=reasons, also=also)


def _best(group: Sequence[SearchHit]) -> float | None:
    found = [h.similarity for h in group if h.similarity is not None]
    return max(found) if found else None

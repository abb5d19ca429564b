"""What a read tool sends of long texts, so that its whole response fits a client's context.

A response has a budget of characters of memory text (``Settings.response_chars``). The hits of a
search share it: texts shorter than their share go whole, and what they leave over goes to the
longer ones (``shares``). A text longer than its share is shown by the passage(s) that hold the
query's words, each cut marked with ``MARK`` (``passage``); the whole text is read page by page
(``page_of``). Pure functions: no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cache, lru_cache

from ollama_mcp.storage.ranking import query_terms

MARK = "[…]"
# The least a hit is given of the budget: less says nothing. Hits that cannot get this much
# are left out of the response (the caller says how many).
MIN_SHARE = 300
# Two passages only when each can be at least this long; else one.
MIN_PASSAGE = 400


@dataclass(frozen=True)
class Shown:
    """A text as a response shows it: whole, or its passages (``clipped``)."""

    text: str
    length: int  # characters of the whole text

    @property
    def clipped(self) -> bool:
        return len(self.text) != self.length  # a clipped text is shorter than its allowance


def shares(lengths: Sequence[int], budget: int) -> list[int]:
    """How many characters each text may take, in order, so that together they take at most
    ``budget``: the texts that fit their share go whole and leave the rest to the others. Shorter
    than ``lengths`` when the budget cannot give each at least ``MIN_SHARE`` (the last are left out)."""
    keep = len(lengths)
    while keep and sum(min(n, MIN_SHARE) for n in lengths[:keep]) > budget:
        keep -= 1
    kept = list(lengths[:keep])
    if sum(kept) <= budget:
        return kept
    # Water-filling: the level every clipped text gets, the shorter ones whole.
    left, open_count = budget, len(kept)
    level = 0
    for n in sorted(kept):
        if n * open_count <= left:
            left -= n
            open_count -= 1
        else:
            level = left // open_count
            break
    return [min(n, max(level, MIN_SHARE)) for n in kept]


def fit(
    texts: Sequence[str], query: str, budget: int, closest: Sequence[tuple[int, int] | None] = ()
) -> list[Shown]:
    """``texts`` within ``budget`` characters together (``shares``), each whole or by its passages
    that match ``query`` (``passage``; ``closest``: each text's passage closest in meaning, or
    None); shorter than ``texts`` when the last got no useful share."""
    allowances = shares([len(t) for t in texts], budget)
    spans = [*closest, *([None] * (len(texts) - len(closest)))]
    return [passage(text, query, allowance, span) for text, allowance, span in zip(texts, allowances, spans,
                                                                                    strict=False)]


def passage(text: str, query: str, allowance: int, closest: tuple[int, int] | None = None) -> Shown:
    """``text`` whole if it fits ``allowance`` characters, else the passage(s) holding most of the
    query's words; when it holds none, the passage ``closest`` in meaning (a span of ``text``:
    ``SearchHit.closest``), else its start. Each cut is marked with ``MARK``."""
    if len(text) <= allowance:
        return Shown(text, len(text))
    room = max(allowance - 2 * (len(MARK) + 1), 1)
    found = _occurrences(text, query)
    if not found:
        start, end = closest if closest is not None and 0 <= closest[0] < closest[1] <= len(text) else (0, 0)
        return Shown(_joined(text, [_span(text, start, end, room)]), len(text))
    one = _best_window(found, room, frozenset())
    windows = [one]
    if room >= 2 * MIN_PASSAGE and len(one[2]) < len({term for _, term in found}):
        half = (room - len(MARK) - 2) // 2
        first = _best_window(found, half, frozenset())
        second = _best_window([(p, t) for p, t in found if not first[0] <= p < first[1]], half, first[2])
        if second[2] - first[2] and len(first[2] | second[2]) > len(one[2]):
            windows = sorted([first, second])
    parts = [_span(text, start, end, room // len(windows)) for start, end, _ in windows]
    return Shown(_joined(text, parts), len(text))


def page_of(text: str, page: int, size: int) -> tuple[str, int]:
    """Page ``page`` (from 1) of ``text`` in pages of ``size`` characters, and how many pages there
    are (at least one); pages end at a word's end where one is near."""
    bounds = _page_bounds(text, size)
    start, end = bounds[min(page, len(bounds)) - 1]
    return text[start:end], len(bounds)


def page_bounds(costs: Sequence[int], budget: int, max_items: int) -> list[tuple[int, int]]:
    """The pages of items that cost ``costs`` (characters), as (offset, count): each page holds
    at most ``max_items`` and costs at most ``budget``, but for an item that alone costs more
    (the caller clips it). Always at least one page, if empty."""
    pages, start, used = [], 0, 0
    for i, cost in enumerate(costs):
        if i > start and (used + cost > budget or i - start >= max_items):
            pages.append((start, i - start))
            start, used = i, 0
        used += cost
    pages.append((start, len(costs) - start))
    return pages


def _page_bounds(text: str, size: int) -> list[tuple[int, int]]:
    bounds, start = [], 0
    while True:
        end = min(len(text), start + size)
        if end < len(text):
            space = text.rfind(" ", start + size * 3 // 4, end)
            end = space + 1 if space > 0 else end
        bounds.append((start, end))
        if end >= len(text):
            return bounds
        start = end


def _occurrences(text: str, query: str) -> list[tuple[int, str]]:
    """Where the query's words stand in ``text``, in order: whole words in any case, or words of
    the same stem, as the keyword index matches them ("deploy" for "deployments": Porter, as
    SQLite's FTS5 stems; PostgreSQL's English stemmer agrees on nearly every word)."""
    terms = query_terms(query)
    if not terms:
        return []
    stem = _stemmer()
    wanted = {stem(term): term for term in terms}
    wanted.update({term: term for term in terms})
    # A word shares a stem with a term only if it starts as the term does (a stem is the start of
    # its word, or of a short one all there is: "ties", "ti"): the other words are never stemmed.
    heads = {key[:_HEAD] for key in wanted}
    found = []
    for match in _WORD.finditer(text):
        word = match.group(0).lower()
        term = wanted.get(word)
        if term is None and (word[:_HEAD] in heads or word[:_HEAD - 1] in heads):
            term = wanted.get(stem(word))
        if term is not None:
            found.append((match.start(), term))
    return found


_WORD = re.compile(r"\w+", re.UNICODE)
_STEMS_KEPT = 50_000
_HEAD = 3


@cache
def _stemmer() -> Callable[[str], str]:
    """Porter's stemmer, each word stemmed once while it is among the last ``_STEMS_KEPT`` (a long
    text repeats its words; a server that runs for months must not keep every word it saw)."""
    import snowballstemmer  # type: ignore[import-untyped]  # noqa: PLC0415  (for long hits only: not at start-up)

    stem: Callable[[str], str] = snowballstemmer.stemmer("porter").stemWord
    return lru_cache(maxsize=_STEMS_KEPT)(stem)


def _best_window(
    found: Sequence[tuple[int, str]], width: int, covered: frozenset[str]
) -> tuple[int, int, frozenset[str]]:
    """The stretch of ``width`` characters holding the most words not yet ``covered`` (then the
    most occurrences): its first and last occurrence's positions, and the words it holds."""
    best: tuple[int, int, int, int, frozenset[str]] = (-1, -1, 0, 0, frozenset())
    counts: dict[str, int] = {}
    j = 0
    for i, (start, _) in enumerate(found):
        while j < len(found) and found[j][0] < start + width:
            counts[found[j][1]] = counts.get(found[j][1], 0) + 1
            j += 1
        words = frozenset(counts)
        score = (len(words - covered), j - i)
        if score > (best[0], best[1]):
            best = (score[0], score[1], start, found[j - 1][0], words)
        counts[found[i][1]] -= 1
        if not counts[found[i][1]]:
            del counts[found[i][1]]
    if best[0] < 0:
        return 0, 0, frozenset()
    return best[2], best[3] + 1, best[4] | covered


def _span(text: str, first: int, last: int, width: int) -> tuple[int, int]:
    """A stretch of ``width`` characters around [first, last), cut at spaces where near."""
    slack = max(width - (last - first), 0)
    start = max(0, first - slack // 3)
    end = min(len(text), start + width)
    start = max(0, end - width)
    if start > 0:
        space = text.find(" ", start, min(first, start + 40))
        start = space + 1 if space >= 0 else start
    if end < len(text):
        space = text.rfind(" ", max(last, end - 40), end)
        end = space if space > 0 else end
    return start, end


def _joined(text: str, parts: Sequence[tuple[int, int]]) -> str:
    pieces = []
    if parts and parts[0][0] > 0:
        pieces.append(MARK)
    for k, (start, end) in enumerate(parts):
        if k:
            pieces.append(MARK)
        pieces.append(text[start:end].strip())
    if parts and parts[-1][1] < len(text):
        pieces.append(MARK)
    return " ".join(pieces)

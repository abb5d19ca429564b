"""What the pages show, computed from domain values without I/O: a conversation's parts (notes with
their version history, transcript, summaries), why a search hit matched, and the geometry of the
memories-over-time plot."""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import date, timedelta

from ollama_mcp.domain import Memory, SearchHit

_WORD = re.compile(r"\w+", re.UNICODE)
WIDTH, HEIGHT, PAD = 640, 220, 30  # the plot's SVG box and its margin for the axes' labels
_PALETTE = ("#2563eb", "#dc2626", "#16a34a", "#9333ea", "#ea580c", "#0891b2", "#6b7280")


@dataclass(frozen=True)
class Note:
    """A note as it stands now, with its earlier versions (newest first) and embedding state."""

    memory: Memory
    history: tuple[Memory, ...]
    pending: bool = False


@dataclass(frozen=True)
class ConversationParts:
    notes: list[Note]
    transcript: list[Memory]
    summaries: list[Memory]
    facts: list[Memory]  # the current ones (nothing superseded them), as extracted


def conversation_parts(memories: Sequence[Memory]) -> ConversationParts:
    """Split a conversation's rows: current notes newest first, each with the versions it
    replaced; messages in order; summary memories; current facts."""
    replaced_by: dict[str, Memory] = {m.superseded_by: m for m in memories if m.superseded_by}
    notes = []
    for memory in memories:
        if memory.kind != "note" or memory.superseded_by is not None:
            continue
        history: list[Memory] = []
        older = replaced_by.get(memory.id)
        while older is not None and len(history) < len(memories):
            history.append(older)
            older = replaced_by.get(older.id)
        notes.append(Note(memory, tuple(history)))
    notes.sort(key=lambda n: (n.memory.created_at, n.memory.seq), reverse=True)
    return ConversationParts(
        notes=notes,
        transcript=[m for m in memories if m.kind == "message"],
        summaries=[m for m in memories if m.kind == "summary"],
        facts=[m for m in memories if m.kind == "fact" and m.superseded_by is None],
    )


@dataclass(frozen=True)
class Match:
    """A search hit with why it matched: the query's words in its text, and its similarity."""

    hit: SearchHit
    words: tuple[str, ...]

    @property
    def reasons(self) -> str:
        """Why it is a hit, as the search says it (``SearchHit.matched``: words, nearby words,
        meaning, nearby meaning, time), with the words it holds and its similarity."""
        parts = []
        if self.hit.matched:
            parts.append("matched by " + ", ".join(self.hit.matched))
        if self.words:
            parts.append("keywords: " + ", ".join(self.words))
        if self.hit.similarity is not None:
            parts.append(f"similarity {self.hit.similarity:.2f}")
        return "; ".join(parts) or "listed, newest first"


def matches(query: str, hits: Iterable[SearchHit]) -> list[Match]:
    """Each hit with the query words its text contains (case-insensitive, whole words)."""
    asked = list(dict.fromkeys(w.lower() for w in _WORD.findall(query) if len(w) > 2 or w.isdigit()))
    found = []
    for hit in hits:
        words = {w.lower() for w in _WORD.findall(hit.memory.content)}
        found.append(Match(hit, tuple(w for w in asked if w in words)))
    return found


@dataclass(frozen=True)
class Line:
    label: str
    colour: str
    points: str  # SVG polyline points
    total: int


@dataclass(frozen=True)
class Plot:
    """Memories over time, cumulative per conversation, in a WIDTH × HEIGHT SVG."""

    lines: list[Line]
    top: int
    ticks: list[tuple[float, str]]
    width: int = WIDTH
    height: int = HEIGHT
    pad: int = PAD


def timeline_plot(rows: Sequence[tuple[str, str, int]], names: dict[str, str], most: int = 6) -> Plot | None:
    """The plot for (conversation id, day, count) rows: the ``most`` largest conversations get a
    line each, the rest one line together. None when there is nothing to draw."""
    if not rows:
        return None
    per: dict[str, dict[str, int]] = defaultdict(dict)
    for conversation_id, day, count in rows:
        per[conversation_id][day] = per[conversation_id].get(day, 0) + count
    ranked = sorted(per, key=lambda c: sum(per[c].values()), reverse=True)
    groups: list[tuple[str, dict[str, int]]] = [(names.get(c) or c[:8], per[c]) for c in ranked[:most]]
    if len(ranked) > most:
        rest: dict[str, int] = defaultdict(int)
        for conversation_id in ranked[most:]:
            for day, count in per[conversation_id].items():
                rest[day] += count
        groups.append((f"{len(ranked) - most} others", dict(rest)))
    days = sorted({day for _, counts in groups for day in counts})
    start, end = date.fromisoformat(days[0]), date.fromisoformat(days[-1])
    if start == end:  # one day of memories: drawn across that day, which starts the axis
        end += timedelta(days=1)
    span = max((end - start).days, 1)
    top = max(sum(counts.values()) for _, counts in groups)

    def x(day: date) -> float:
        return PAD + (WIDTH - 2 * PAD) * (day - start).days / span

    def y(value: int) -> float:
        return HEIGHT - PAD - (HEIGHT - 2 * PAD) * value / top

    lines = []
    for i, (label, counts) in enumerate(groups):
        total, points = 0, [f"{x(start):.1f},{y(0):.1f}"]
        for day in sorted(counts):
            total += counts[day]
            points.append(f"{x(date.fromisoformat(day)):.1f},{y(total):.1f}")
        points.append(f"{x(end):.1f},{y(total):.1f}")
        lines.append(Line(label, _PALETTE[min(i, len(_PALETTE) - 1)], " ".join(points), total))
    middle = start + timedelta(days=span // 2)
    ticks = [(x(start), start.isoformat()), (x(middle), middle.isoformat()), (x(end), end.isoformat())]
    return Plot(lines, top, ticks if span > 1 else ticks[:1])

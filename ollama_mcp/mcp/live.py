"""Live updates: who watches which conversations (and the conversation list) of which store, and
one loop that, while anyone watches, reads the watched conversations' change marks every TICK
and tells each watcher what changed, whichever process or instance wrote it.

No MCP here: the server turns a ``resources/subscribe`` (2025 protocol) or a
``subscriptions/listen`` stream (2026) into a ``Watch``, and a change into its notification.
Polling the store, rather than hearing this process's own writes, is what makes a write by
another process on the same SQLite file (Claude Desktop runs two) or another instance on the
same PostgreSQL database reach a subscriber; it costs one indexed query per store and tick, and
nothing while nobody watches.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import anyio

from ollama_mcp.errors import OllamaMcpError

log = logging.getLogger(__name__)

TICK = 0.2  # seconds between two reads of the watched marks
MAX_WATCHES = 1024

# What a watcher is told: the id of a conversation that changed (or went), or None: the list of
# conversations changed (one was created, deleted or ended).
Send = Callable[[str | None], Awaitable[None]]


class Marked(Protocol):
    """What a watch reads of one memory (its app's changes): the change marks of conversations
    and of the conversation list, compared tick by tick."""

    async def change_marks(self, conversation_ids: Sequence[str]) -> dict[str, tuple[Any, ...]]: ...

    async def conversations_mark(self) -> tuple[Any, ...]: ...


@dataclass(eq=False)
class Watch:
    """One subscriber's interest: conversations of one store, and maybe its conversation list."""

    source: Marked  # the memory service of the store watched (what tells its change marks)
    conversations: frozenset[str]
    conversation_list: bool
    send: Send


class Watches:
    """The watches of one server process, and the loop (``run``) that serves them."""

    def __init__(self, tick: float = TICK) -> None:
        self._tick = tick
        self._watches: set[Watch] = set()
        self._marks: dict[tuple[Marked, str], tuple[Any, ...] | None] = {}
        self._list_marks: dict[Marked, tuple[Any, ...]] = {}
        self._wake = anyio.Event()

    def __contains__(self, watch: object) -> bool:
        return watch in self._watches

    async def add(self, watch: Watch) -> None:
        """Start telling ``watch`` about changes made from now on (its marks are read first, so
        a write that lands just after this returns is told, and nothing before it is)."""
        if len(self._watches) >= MAX_WATCHES:
            raise OllamaMcpError(
                f"This server already serves {MAX_WATCHES} subscriptions; unsubscribe from some (or close idle clients)"
                " first."
            )
        marks = await watch.source.change_marks(sorted(watch.conversations))
        listed = await watch.source.conversations_mark() if watch.conversation_list else None
        # No await from here on: a ``remove`` meanwhile would drop baselines of a watch not yet added.
        for conversation_id in watch.conversations:
            self._marks.setdefault((watch.source, conversation_id), marks.get(conversation_id))
        if listed is not None:
            self._list_marks.setdefault(watch.source, listed)
        self._watches.add(watch)
        self._wake.set()

    def remove(self, watch: Watch) -> None:
        self._watches.discard(watch)
        watched = {(w.source, c) for w in self._watches for c in w.conversations}
        for key in [k for k in self._marks if k not in watched]:
            del self._marks[key]
        listing = {w.source for w in self._watches if w.conversation_list}
        for source in [s for s in self._list_marks if s not in listing]:
            del self._list_marks[source]

    async def run(self) -> None:
        """Serve the watches until cancelled; idle (no query) while there are none."""
        while True:
            if not self._watches:
                self._wake = anyio.Event()
                await self._wake.wait()
                continue
            await self.poll()
            await anyio.sleep(self._tick)

    async def poll(self) -> None:
        """Read each watched source's marks once and tell every watcher what changed for it."""
        sources: dict[Marked, list[Watch]] = {}
        for watch in list(self._watches):
            sources.setdefault(watch.source, []).append(watch)
        for source, watches in sources.items():
            ids = sorted({c for w in watches for c in w.conversations})
            try:
                marks = await source.change_marks(ids) if ids else {}
                listed = await source.conversations_mark() if any(w.conversation_list for w in watches) else None
            except OllamaMcpError as exc:  # the database is away for a moment: the next tick retries
                log.warning("live updates: could not read what changed: %s", exc)
                continue
            # A watch removed meanwhile took its baselines along: nothing to compare, nobody to tell.
            changed = {c for c in ids if (source, c) in self._marks and marks.get(c) != self._marks[(source, c)]}
            for conversation_id in changed:
                self._marks[(source, conversation_id)] = marks.get(conversation_id)
            list_changed = False
            if listed is not None and source in self._list_marks and listed != self._list_marks[source]:
                self._list_marks[source], list_changed = listed, True
            for watch in watches:
                if watch not in self._watches:
                    continue
                targets: list[str | None] = [*sorted(changed & watch.conversations)]
                if list_changed and watch.conversation_list:
                    targets.append(None)
                for target in targets:
                    if not await self._tell(watch, target):
                        break

    async def _tell(self, watch: Watch, target: str | None) -> bool:
        try:
            await watch.send(target)
        except Exception as exc:  # a client that went away: its watch goes with it
            log.info("live updates: dropping a subscriber that cannot be reached (%s)", type(exc).__name__)
            self.remove(watch)
            return False
        return True

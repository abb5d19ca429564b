"""The ranking seam: what a search asks of a backend's ranker (``Ranker``: the SQLite backend's
in-memory indexes, or PostgreSQL's own), and the query vector a ranking may wait for while it
reads what needs none (``QueryVector``). Each backend ranks with the same rules
(``storage.ranking``), so nothing above this seam branches on the backend."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Protocol

import anyio
import numpy as np

from ollama_mcp.domain import SearchFilters, SearchHit
from ollama_mcp.storage.ranking import SearchTuning
from ollama_mcp.when import TimeWindow


class QueryVector:
    """A search's query vector, which may still be on its way from Ollama while a ranker reads
    what needs none (keyword lists, filters): ``get()`` waits for it, and gives None when it
    could not be had (the search is then by keywords only)."""

    def __init__(self) -> None:
        self._vector: np.ndarray | None = None
        self._done = anyio.Event()

    @property
    def ready(self) -> bool:
        return self._done.is_set()

    def set(self, vector: np.ndarray | None) -> None:
        self._vector = vector
        self._done.set()

    async def get(self) -> np.ndarray | None:
        await self._done.wait()
        return self._vector


async def resolve(vector: np.ndarray | QueryVector | None) -> np.ndarray | None:
    """The vector itself, waiting for it if it is still on its way."""
    return await vector.get() if isinstance(vector, QueryVector) else vector


class Ranker(Protocol):
    """Ranks a backend's memories for a query and keeps whatever index it ranks from current.

    The indexer's door forwards to it. ``search.HybridSearch`` is the SQLite backend's, with
    indexes held in memory; a backend that ranks inside its database keeps most of these as
    no-ops. A ranker raises ``EmbeddingMismatchError`` when the query vector does not fit the
    stored ones.
    """

    tuning: SearchTuning  # the rules it ranks by (benchmarks and tests set others; the server never does)

    async def search(
        self,
        query: str,
        query_vector: np.ndarray | QueryVector | None,
        filters: SearchFilters,
        conversation_key: int | None,
        top_k: int,
        threshold: float | None,
        window: TimeWindow | None = None,
    ) -> list[SearchHit]:
        """The ``top_k`` best memories by keywords and (with ``query_vector``) by meaning, those in
        the ``window`` the query names lifted (its absolute dates are not keywords). A
        ``QueryVector`` may still be computed: do what needs no vector first, then wait for it."""

    def vectors_added(self) -> None:
        """Vectors were written (by this process)."""

    async def catch_up(self) -> None:
        """Take in what this process wrote since (``vectors_added``), so that the next search need
        not: run in the background after writes; cheap when nothing was written."""

    async def removed(self, seqs: Iterable[int], contexts: Sequence[int] = ()) -> None:
        """Memories ``seqs`` were deleted; ``contexts``: memories whose context vectors were."""

    def invalidate(self) -> None:
        """Vectors vanished without saying which."""

    async def warm_up(self) -> None:
        """Get ready to answer the first search at full speed."""

    async def upkeep(self, min_new: int = 0) -> bool:
        """Periodic index maintenance once ``min_new`` memories arrived; returns whether it ran."""

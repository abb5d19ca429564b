"""Turning text into unit float32 vectors with an Ollama model: prefixes, chunking, batching.

Nothing here falls back to another model or a fake vector: a failure is an ``OllamaError`` and
the caller decides what "pending" means.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING

import anyio
import numpy as np

from ollama_mcp.domain import Facet
from ollama_mcp.errors import InputTooLongError, InvalidInputError, OllamaModelError, OllamaUnavailableError
from ollama_mcp.ollama.client import ModelInfo, OllamaClient
from ollama_mcp.ollama.embedding_text import chunk_chars_for, chunk_text, prefixes_for, query_text

if TYPE_CHECKING:
    from ollama_mcp.head_start import HeadStart

BATCH_SIZE = 32
# A background request (the backfill's) takes about this long at most: Ollama answers one
# request of a model at a time, so a search or a store sent meanwhile waits behind it. Its size
# follows the time the last one took per text: on a CPU a batch of 32 in-context texts with
# MiniLM took 0.5-0.8 s, which a search then waited for; on a GPU batches stay at BATCH_SIZE.
BACKGROUND_REQUEST_SECONDS = 0.1
QUERY_CACHE_SIZE = 64  # recent queries' vectors (an agent often asks again); 512 held ~0.8 MB
MAX_EMBEDDING_DIM = 16_384  # the largest vector a caller may hand in


@dataclass(frozen=True)
class ChunkVector:
    chunk_index: int
    vector: np.ndarray  # float32, unit length


def to_blob(vector: np.ndarray) -> bytes:
    return np.asarray(vector, dtype="<f4").tobytes()


class Embedder:
    """Embeds documents and queries with one Ollama model."""

    def __init__(
        self,
        client: OllamaClient,
        model: str,
        *,
        wait_timeout: float | None = None,
        head_start: HeadStart | None = None,
    ) -> None:
        self.client = client
        self.model = model
        self._head_start = head_start  # answers Ollama gave before the app opened (head_start.py)
        # How long a call someone waits for (a search's query, a store's own text) may take in
        # all, model description included; None: only the client's own timeout per request.
        self.wait_timeout = wait_timeout
        self.document_prefix = prefixes_for(model)[0]
        self._info: ModelInfo | None = None
        self._queries: OrderedDict[str, np.ndarray] = OrderedDict()
        self._waiting = 0  # calls someone is waiting for (a search's query, a store's own text)
        self._last_waited = 0.0  # when the last of those ended (time.monotonic)
        self._background_batch = 4  # texts in the next background request (grows as they prove quick)

    async def info(self) -> ModelInfo:
        """The model's description from Ollama, fetched once; refuses models that cannot embed."""
        if self._info is None:
            early = await self._head_start.model_info() if self._head_start else None
            info = early or await self.client.show(self.model)
            if info.capabilities and "embedding" not in info.capabilities:
                raise OllamaModelError(
                    f"Ollama model {self.model!r} is not an embedding model (it can: "
                    f"{', '.join(info.capabilities)}); set OLLAMA_MCP_EMBED_MODEL to one such as "
                    "nomic-embed-text and run `ollama pull nomic-embed-text`."
                )
            self._info = info
        return self._info

    async def warm(self) -> None:
        """Ask Ollama to load the model now (a start-up courtesy): the first search or store
        then does not pay the model load, seconds on a laptop. Skipped once a call someone waits
        for has begun: that call loads the model itself, and Ollama would make it wait behind this one."""
        await self.info()
        if self._waiting or self._last_waited or (self._head_start and self._head_start.queried):
            return
        await self.client.embed(self.model, [self.document_prefix + "ollama-mcp warm-up"])

    @property
    def known_dimension(self) -> int | None:
        """The model's vector size if Ollama has described it already (no network call)."""
        return self._info.embedding_length if self._info else None

    async def chunk_chars(self) -> int:
        return chunk_chars_for((await self.info()).context_length)

    async def wait_for_quiet(self, quiet: float, patience: float) -> bool:
        """Background work's courtesy to calls someone waits for: wait until none has run for
        ``quiet`` seconds (True), or ``patience`` seconds passed (False: go on, but briefly).

        Ollama answers one embedding request at a time per model, so a background batch sent
        while a search's query is on its way makes that search wait for the whole batch.
        """
        deadline = time.monotonic() + patience
        while True:
            now = time.monotonic()
            idle_for = now - self._last_waited
            if not self._waiting and idle_for >= quiet:
                return True
            if now >= deadline:
                return False
            await anyio.sleep(min(quiet if self._waiting else quiet - idle_for, deadline - now))

    @asynccontextmanager
    async def _waited_for(self, waited: bool) -> AsyncIterator[None]:
        """Count a call someone waits for, and bound it by ``wait_timeout`` as a whole."""
        if not waited:
            yield
            return
        self._waiting += 1
        limit = self.wait_timeout if self.wait_timeout is not None else float("inf")
        try:
            with anyio.fail_after(limit):
                yield
        except TimeoutError:
            raise OllamaUnavailableError(
                f"Ollama at {self.client.host} did not answer within {limit:g} s with model {self.model!r}; it may "
                "be loading the model or hung. It will be retried in the background (OLLAMA_MCP_WAIT_TIMEOUT sets "
                "how long a search or a store waits)."
            ) from None
        finally:
            self._waiting -= 1
            self._last_waited = time.monotonic()

    async def embed_documents(
        self, items: Sequence[tuple[str, Facet]], *, waited: bool = False
    ) -> list[list[ChunkVector]]:
        """For each (text, facet), the vectors of its chunks, all in as few requests as possible;
        ``waited``: someone waits for the answer (background work gives way to such calls).

        A content text is chunked so that every part of it is searchable. A context text (a
        memory preceded by earlier ones) keeps its end, the memory itself, within one chunk.
        """
        async with self._waited_for(waited):
            return await self._embed_documents(items, waited)

    async def _embed_documents(self, items: Sequence[tuple[str, Facet]], waited: bool) -> list[list[ChunkVector]]:
        size = await self.chunk_chars()
        pieces: list[str] = []
        owners: list[int] = []
        for i, (text, facet) in enumerate(items):
            parts = [text[-size:]] if facet == "context" else [text[c.start:c.end] for c in chunk_text(text, size)]
            for part in parts:
                pieces.append(self.document_prefix + part)
                owners.append(i)
        # A context that is just the memory (the first of a conversation) is the content again:
        # each distinct piece is embedded once.
        unique = list(dict.fromkeys(pieces))
        vectors_of: dict[str, list[np.ndarray]] = {}
        while len(vectors_of) < len(unique):
            batch = unique[len(vectors_of):len(vectors_of) + (BATCH_SIZE if waited else self._background_batch)]
            started = time.monotonic()
            vectors_of.update(zip(batch, await self._embed_fitting(batch), strict=True))
            if not waited:
                per_text = (time.monotonic() - started) / len(batch)
                self._background_batch = max(1, min(BATCH_SIZE, int(BACKGROUND_REQUEST_SECONDS / max(per_text, 1e-6))))
        result: list[list[ChunkVector]] = [[] for _ in items]
        for owner, piece in zip(owners, pieces, strict=True):
            for vector in vectors_of[piece]:
                result[owner].append(ChunkVector(len(result[owner]), vector))
        return result

    async def embed_query(self, query: str) -> np.ndarray:
        cached = self._queries.get(query)
        if cached is not None:
            self._queries.move_to_end(query)
            return cached
        async with self._waited_for(True):
            text = query_text(self.model, query, await self.chunk_chars())
            early = await self._head_start.query_vector(text) if self._head_start else None
            vector = self._unit([early])[0] if early else (await self._embed_fitting([text]))[0][0]
        self._queries[query] = vector
        if len(self._queries) > QUERY_CACHE_SIZE:
            self._queries.popitem(last=False)
        return vector

    async def _embed_fitting(self, pieces: list[str]) -> list[list[np.ndarray]]:
        """Vectors for each piece; a piece over the context is halved (with overlap) until it fits."""
        try:
            return [[v] for v in self._unit(await self.client.embed(self.model, pieces))]
        except InputTooLongError:
            if len(pieces) > 1:
                return [(await self._embed_fitting([p]))[0] for p in pieces]
            piece = pieces[0]
            if len(piece) < 16:
                raise
            half = len(piece) // 2
            overlap = len(piece) // 16
            left = await self._embed_fitting([piece[: half + overlap]])
            right = await self._embed_fitting([piece[half - overlap:]])
            return [left[0] + right[0]]

    def _unit(self, vectors: list[list[float]]) -> list[np.ndarray]:
        out = []
        for raw in vectors:
            vector = np.asarray(raw, dtype=np.float32)
            norm = float(np.linalg.norm(vector)) if vector.size else 0.0
            if vector.ndim != 1 or vector.size == 0 or not np.isfinite(vector).all() or norm == 0.0:
                raise OllamaUnavailableError(
                    f"Ollama returned an unusable vector (empty, zero or not finite) for model {self.model!r}; "
                    "it will be retried. If it persists, re-pull the model."
                )
            out.append(vector / norm)
        dims = {v.size for v in out}
        if len(dims) > 1:
            raise OllamaUnavailableError(
                f"Ollama returned vectors of different sizes {sorted(dims)} in one reply for model {self.model!r}."
            )
        return out


def given_vector(field: str, value: object) -> np.ndarray | None:
    """A caller-supplied vector checked: finite, non-zero, as float32, scaled to unit length
    (vectors are compared by cosine)."""
    if value is None:
        return None
    if isinstance(value, str | bytes) or not isinstance(value, Sequence | np.ndarray) or len(value) == 0:
        raise InvalidInputError(
            field, "must be a non-empty list of numbers", "pass the vector, or omit it to let Ollama compute it"
        )
    if len(value) > MAX_EMBEDDING_DIM:
        raise InvalidInputError(
            field, f"has {len(value):,} numbers; the limit is {MAX_EMBEDDING_DIM:,}", "pass a real embedding or omit it"
        )
    try:
        vector = np.asarray(value)
    except (TypeError, ValueError):
        vector = np.asarray([], dtype=object)
    if vector.ndim != 1 or vector.dtype.kind not in "iuf":  # bools, strings, nested lists, None ...
        raise InvalidInputError(field, "contains something that is not a number", "pass only numbers")
    vector = vector.astype(np.float64)
    if not np.isfinite(vector).all():
        raise InvalidInputError(field, "contains NaN or infinity", "pass only finite numbers")
    norm = float(np.linalg.norm(vector))
    if norm == 0.0:
        raise InvalidInputError(field, "is all zeros", "pass a real embedding or omit it")
    return (vector / norm).astype(np.float32)

"""A new process's head start: what its first search needs, begun while the app is still being
imported and opened.

Claude Desktop starts a process per chat, and a client may search right after ``initialize``.
Importing the app (numpy, the store, the ranking) and opening the store take about 150 ms, in
which Ollama and the disk would sit idle. So the app's holder (``mcp.apps.AppHolder``) starts,
as soon as it starts: Ollama's description of the embedding model; on SQLite, the read of the
model's vectors (in a worker thread: ``block_read.read`` reads them beside the imports, before
numpy is imported, then ``vector_blocks.assemble`` makes arrays of them); and, for a search that
arrives before the app is open, its query's embedding. The app takes these answers instead of
asking again (``embeddings.Embedder``, ``vectors.VectorIndex``).

Plain Python, no numpy here (the worker thread imports ``block_read``, ``vector_blocks``, numpy
and the standard library only: importing modules of ours in two threads at once could deadlock on
their import locks). Nothing here decides anything: Ollama's failure is handed to the app as the error its
own call would have raised (it reports it as it always does, and asks again later), and vectors
that could not be read so are None (the index then loads them itself).
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Generic, TypeVar

import anyio
from anyio.abc import TaskGroup

from ollama_mcp.background import beside
from ollama_mcp.config import Settings
from ollama_mcp.errors import OllamaError
from ollama_mcp.ollama.client import ModelInfo, OllamaClient
from ollama_mcp.ollama.embedding_text import MIN_CHUNK_CHARS, query_text

if TYPE_CHECKING:
    from ollama_mcp.storage.sqlite.vector_blocks import Loaded

log = logging.getLogger(__name__)

T = TypeVar("T")

# Queries a head start embeds at most: searches that arrive in the ~150 ms before the app opens.
MAX_QUERIES = 8


class _Answer(Generic[T]):
    """One request's answer once it came: its value, or the ``OllamaError`` it failed with (which
    ``get`` raises: asking again at once would make the caller wait twice for a slow Ollama), or
    None when something else went wrong (a bug, logged: the caller does without)."""

    def __init__(self) -> None:
        self._value: T | None = None
        self._error: OllamaError | None = None
        self._done = anyio.Event()

    async def run(self, ask: Callable[[], Awaitable[T]]) -> None:
        try:
            self._value = await ask()
        except OllamaError as exc:
            self._error = exc
        except Exception:
            log.exception("head start failed")
        finally:
            self._done.set()

    async def get(self) -> T | None:
        await self._done.wait()
        if self._error is not None:
            raise self._error
        return self._value


class HeadStart:
    """What a first search needs, begun before the app opened (Ollama's answers, the vectors);
    see the module's docstring."""

    def __init__(self, client: OllamaClient, model: str, tasks: TaskGroup, db_path: Path | None = None) -> None:
        self._client = client
        self._model = model
        self._tasks = tasks
        info: _Answer[ModelInfo] = _Answer()
        self._info: _Answer[ModelInfo] | None = info
        self._queries: dict[str, _Answer[list[list[float]]]] = {}
        self._vectors: _Answer[tuple[Path, Loaded | None]] | None = None
        self.queried = False  # a search's query was sent (the model is being loaded by it)
        tasks.start_soon(info.run, lambda: client.show(model))
        if db_path is not None:
            vectors = self._vectors = _Answer()
            tasks.start_soon(vectors.run, lambda: anyio.to_thread.run_sync(_load_vectors, db_path, model))

    @classmethod
    @asynccontextmanager
    async def running(cls, settings: Settings) -> AsyncIterator[HeadStart]:
        """A head start for ``settings``' embedding model, begun now; its requests end with the block."""
        client = OllamaClient(
            settings.ollama_host, timeout=settings.embed_timeout, connect_timeout=settings.connect_timeout,
            keep_alive=settings.keep_alive,
        )
        try:
            async with beside() as tasks:
                yield cls(
                    client, settings.embed_model, tasks, settings.store_file
                )
        finally:
            with anyio.CancelScope(shield=True):
                await client.aclose()

    def search(self, query: str) -> None:
        """Send a search's query to be embedded now, as the embedder would send it. Not a query
        over ``MIN_CHUNK_CHARS`` (how much of it is sent depends on the model's context, which
        is not known yet), nor a blank one, nor the same one twice."""
        if not query.strip() or len(query) > MIN_CHUNK_CHARS or len(self._queries) >= MAX_QUERIES:
            return
        text = query_text(self._model, query, MIN_CHUNK_CHARS)
        if text not in self._queries:
            answer = self._queries[text] = _Answer[list[list[float]]]()
            self.queried = True
            self._tasks.start_soon(answer.run, lambda: self._client.embed(self._model, [text]))

    async def model_info(self) -> ModelInfo | None:
        """The model's description once Ollama answered, or the ``OllamaError`` it failed with
        (raised to those waiting then; later callers get None and ask Ollama themselves)."""
        answer = self._info
        if answer is None:
            return None
        try:
            return await answer.get()
        except OllamaError:
            self._info = None
            raise

    async def vectors(self, path: Path, model: str) -> Loaded | None:
        """The vectors of ``model`` in the database at ``path``, if this head start read them
        (taken once); None if it did not, or could not."""
        vectors, self._vectors = self._vectors, None
        found = None if vectors is None or model != self._model else await vectors.get()
        return found[1] if found is not None and found[0] == path else None

    async def query_vector(self, text: str) -> list[float] | None:
        """The vector of ``text`` if a search sent it here, once Ollama answered (taken once), or
        the ``OllamaError`` it failed with; None if none was sent."""
        answer = self._queries.pop(text, None)
        found = None if answer is None else await answer.get()
        return found[0] if found else None


def _load_vectors(db_path: Path, model: str) -> tuple[Path, Loaded | None]:
    """For a worker thread: the database's vectors of ``model``; None when there is no database
    yet (nothing is created here). They are read before numpy is imported (the main thread is
    importing it meanwhile: the read overlaps the imports rather than waiting for them), then
    made arrays of."""
    if not db_path.exists():
        return db_path, None
    # (the own vectors of whole blocks are left on disk: a search reads its candidates' there
    # until the warm-up reads them whole, so the first search waits for a third fewer bytes)
    found = importlib.import_module("ollama_mcp.storage.sqlite.block_read").read(db_path, model, own=False)
    if found is None:
        return db_path, None
    return db_path, importlib.import_module("ollama_mcp.storage.sqlite.vector_blocks").assemble(found)

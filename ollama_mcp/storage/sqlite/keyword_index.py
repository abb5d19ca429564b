"""The in-memory keyword index: BM25 over postings held in numpy, in step with the FTS5 indexes.

FTS5 scores every memory a query word matches before it can sort: at 100k memories that was
4-5 ms of an 18 ms search (bench/README.md). Here each query word's postings are scored with
FTS5's own bm25() formula in a few numpy operations. The tokens come from FTS5 itself (its
vocabulary when the index loads; scratch FTS5 tables with the same tokenizer for new memories
and for query words), so a word matches exactly the memories FTS5 would match, and a memory
scores what FTS5's ``rank`` says, up to float rounding (tests check both).

A process holds the index only in a large store (``SearchTuning.keyword_index_min_memories``; below
that FTS5 is as fast). It loads in the background (``HybridSearch.warm_up`` and ``upkeep``;
searches use FTS5 until then; the two FTS5 indexes are read at once while the arrays are built,
and the load waits between its parts while a search runs) and then
follows the database like the vector index does:
each search's statement also reads the highest memory seq and the newest ``memory_changes`` id;
when either moved (this process or another one wrote), the new and changed memories are read
and tokenized. Each memory text is a document with an internal number; a memory deleted or
rewritten kills its document (a rewritten one comes back under a new number). Killed documents
stay in the postings, masked, until they are a quarter of all; then the index is rebuilt.
"""

from __future__ import annotations

import math
from collections.abc import AsyncGenerator, Awaitable, Callable, Sequence
from contextlib import aclosing
from functools import partial
from typing import cast

import anyio
import numpy as np
from anyio.streams.memory import MemoryObjectSendStream

from ollama_mcp.background import at_once
from ollama_mcp.domain import Scope
from ollama_mcp.storage.sqlite.store import FACET_CODES, KIND_CODES, KeywordRows, KeywordState, Store

K1, B = 1.2, 0.75  # FTS5's bm25() defaults
# A catch-up with more memories than this is done as a full reload in a worker thread (a
# reload builds a new index beside the old one; searches use FTS5 meanwhile). A catch-up runs on
# the event loop (in the upkeep): 1,000 memories take about 45 ms there; more would stall searches.
_DELTA_LIMIT = 1_000
_MAX_CACHED_WORDS = 20_000
# Bounds the temporary arrays of a full load (about 6 MB; 2^20 took 50 MB, which the process
# then kept: 10k memories' index grew RSS by 35 MB instead of 28).
_CHUNK_OCCURRENCES = 1 << 17


class _Postings:
    """One token's documents (ascending) and how often it occurs in each; grows in place."""

    __slots__ = ("docs", "n", "tfs")

    def __init__(self, docs: np.ndarray, tfs: np.ndarray) -> None:
        self.docs, self.tfs, self.n = docs, tfs, len(docs)

    def extend(self, docs: np.ndarray, tfs: np.ndarray) -> None:
        end = self.n + len(docs)
        if end > len(self.docs):
            capacity = max(8, end + end // 4)
            self.docs, self.tfs = _grow(self.docs[: self.n], capacity), _grow(self.tfs[: self.n], capacity)
        self.docs[self.n:end], self.tfs[self.n:end] = docs, tfs
        self.n = end


class _Index:
    """The documents and, per facet, the postings and document lengths."""

    def __init__(self) -> None:
        self.n = 0  # documents ever added (live or killed)
        self.live = 0
        self.killed = 0
        self.seqs = np.zeros(0, np.int64)
        self.convs = np.zeros(0, np.int64)
        self.kinds = np.zeros(0, np.int8)
        self.alive = np.zeros(0, bool)
        # memory seq -> its live document, or -1: indexed by seq (a store's seqs are small, dense
        # integers), 4 bytes a memory where a dict of ints took ~100 (10 MB at 100k memories)
        self.doc_of: np.ndarray = np.full(0, -1, np.int32)
        self.postings: dict[int, dict[str, _Postings]] = {facet: {} for facet in FACET_CODES.values()}
        self.lengths = {facet: np.zeros(0, np.float64) for facet in FACET_CODES.values()}
        self.tokens = dict.fromkeys(FACET_CODES.values(), 0.0)  # live tokens per facet

    def apply(self, rows: KeywordRows) -> None:
        """Kill the changed memories' documents, then add the given memories with their postings."""
        # each once (a set, not np.unique: its first call imports numpy.ma, 16 ms)
        touched = np.fromiter({*rows.changed, *(seq for seq, _, _ in rows.memories)}, dtype=np.int64)
        touched = touched[touched < len(self.doc_of)]
        docs = self.doc_of[touched]
        dead = docs[docs >= 0]
        if dead.size:
            self.doc_of[touched] = -1
            self.alive[dead] = False
            self.live -= dead.size
            self.killed += dead.size
            for facet, lengths in self.lengths.items():
                self.tokens[facet] -= float(lengths[dead].sum())
        if not rows.memories:
            return
        first, count = self.n, len(rows.memories)
        self.n += count
        if self.n > len(self.seqs):
            capacity = self.n + self.n // 4
            self.seqs, self.convs, self.kinds, self.alive = (
                _grow(a, capacity) for a in (self.seqs, self.convs, self.kinds, self.alive)
            )
            self.lengths = {facet: _grow(lengths, capacity) for facet, lengths in self.lengths.items()}
        new = np.array(rows.memories, dtype=np.int64).reshape(-1, 3)
        order = np.argsort(new[:, 0], kind="stable")
        seqs = new[order, 0]
        docs = np.arange(first, self.n)
        self.seqs[first:self.n], self.convs[first:self.n], self.kinds[first:self.n] = seqs, new[order, 1], new[order, 2]
        self.alive[first:self.n] = True
        if (top := int(seqs[-1]) + 1) > len(self.doc_of):  # (seqs are sorted)
            self.doc_of = _grow(self.doc_of, max(top, len(self.doc_of) + len(self.doc_of) // 4), fill=-1)
        self.doc_of[seqs] = docs
        self.live += count
        for facet, found in rows.postings.items():
            self._add_all_postings(facet, found, seqs, first)

    def load(self, part: KeywordRows) -> None:
        """Take the next part of a ``Store.keyword_snapshot`` (a new index: the first part's
        memories are its documents 0, 1, ... in seq order, the others' postings are theirs)."""
        if part.memories:
            self.apply(part)
            return
        for facet, found in part.postings.items():
            self._add_all_postings(facet, found, self.seqs[: self.n], 0)

    def _add_all_postings(self, facet: int, found: list[tuple[str, str]], seqs: np.ndarray, first: int) -> None:
        # All tokens of a chunk (up to _CHUNK_OCCURRENCES) together: a handful of numpy calls per
        # chunk instead of per token (a new memory has 30-odd tokens: 1.3 -> 0.3 ms).
        chunk: list[tuple[str, str]] = []
        size = 0
        for token, text in found:
            chunk.append((token, text))
            size += text.count(" ") + 1
            if size >= _CHUNK_OCCURRENCES:
                self._add_postings(facet, chunk, seqs, first)
                chunk, size = [], 0
        if chunk:
            self._add_postings(facet, chunk, seqs, first)

    def _add_postings(self, facet: int, found: list[tuple[str, str]], seqs: np.ndarray, first: int) -> None:
        """Add (token, occurrences) to ``facet``'s postings; ``seqs`` are the memories just added
        (sorted), as documents ``first`` on."""
        counts = [text.count(" ") + 1 for _, text in found]
        occurrences = np.fromstring(" ".join(text for _, text in found), dtype=np.int64, sep=" ")
        token_ids = np.repeat(np.arange(len(found)), counts)
        at = np.minimum(np.searchsorted(seqs, occurrences), len(seqs) - 1)
        known = seqs[at] == occurrences  # a memory not among those added is skipped
        docs, token_ids = first + at[known], token_ids[known]
        if not docs.size:
            return
        if np.any((token_ids[1:] == token_ids[:-1]) & (docs[1:] < docs[:-1])):
            order = np.lexsort((docs, token_ids))  # not in document order: sort (never seen yet)
            docs, token_ids = docs[order], token_ids[order]
        # one entry per (token, document), with how often the token occurs there
        starts = np.flatnonzero(np.r_[True, (docs[1:] != docs[:-1]) | (token_ids[1:] != token_ids[:-1])])
        tfs = np.diff(np.r_[starts, docs.size]).astype(np.float32)
        docs, token_ids = docs[starts], token_ids[starts]
        added = np.bincount(docs - first, weights=tfs, minlength=self.n - first)
        self.lengths[facet][first:self.n] += added
        self.tokens[facet] += float(added.sum())
        table = self.postings[facet]
        bounds = np.r_[0, np.flatnonzero(token_ids[1:] != token_ids[:-1]) + 1, docs.size].tolist()
        token_docs = docs.astype(np.int32)
        for start, end in zip(bounds[:-1], bounds[1:], strict=True):
            token = found[int(token_ids[start])][0]
            postings = table.get(token)
            if postings is None:
                table[token] = _Postings(token_docs[start:end].copy(), tfs[start:end].copy())
            else:
                postings.extend(token_docs[start:end], tfs[start:end])

    def document_count(self, token: str) -> int:
        """Live memories whose content holds ``token``."""
        postings = self.postings[FACET_CODES["content"]].get(token)
        if postings is None:
            return 0
        return int(np.count_nonzero(self.alive[postings.docs[: postings.n]]))

    def rank(self, facet: int, tokens: Sequence[str], k: int, scope: Scope) -> list[int]:
        """The ``k`` best memory seqs in ``scope`` for any of ``tokens``, by FTS5's bm25()."""
        if not self.live:
            return []
        scores = np.zeros(self.n, np.float64)
        average = self.tokens[facet] / self.live or 1.0
        lengths = self.lengths[facet]
        for token in tokens:
            postings = self.postings[facet].get(token)
            if postings is None:
                continue
            docs, tfs = postings.docs[: postings.n], postings.tfs[: postings.n]
            live = self.alive[docs]
            hits = int(np.count_nonzero(live))
            if not hits:
                continue
            idf = math.log((self.live - hits + 0.5) / (hits + 0.5))
            idf = idf if idf > 0 else 1e-6  # as FTS5: a word in most memories still counts a little
            weights = idf * tfs * (K1 + 1) / (tfs + K1 * (1 - B + B * lengths[docs] / average))
            if hits < len(docs):
                weights[~live] = 0
            scores[docs] += weights
        found = np.flatnonzero(scores)
        found = found[self._in_scope(found, scope)]
        if not found.size:
            return []
        if found.size > k:
            found = found[np.argpartition(-scores[found], k - 1)[:k]]
        found = found[np.lexsort((found, -scores[found]))]  # best first; ties: older memory first
        return cast(list[int], self.seqs[found].tolist())

    def _in_scope(self, docs: np.ndarray, scope: Scope) -> np.ndarray:
        mask = np.ones(len(docs), bool)
        if scope.conversation_key is not None:
            mask &= self.convs[docs] == scope.conversation_key
        if scope.kind_codes is not None and set(scope.kind_codes) != set(KIND_CODES.values()):
            mask &= np.isin(self.kinds[docs], scope.kind_codes)
        if scope.memory_seqs is not None:
            mask &= np.isin(self.seqs[docs], np.fromiter(scope.memory_seqs, np.int64))
        if scope.excluded_seqs:
            mask &= ~np.isin(self.seqs[docs], np.fromiter(scope.excluded_seqs, np.int64))
        return mask


class KeywordIndex:
    """BM25 ranking of memories by query words, over both keyword facets (content and context).

    ``give_way``: awaited before each part of a full load; a search in progress holds it up
    (``HybridSearch``), so that the load, seconds of CPU at 100k memories, does not run beside it.
    """

    def __init__(self, store: Store, give_way: Callable[[], Awaitable[None]] | None = None) -> None:
        self._store = store
        self._give_way = give_way
        self._lock = anyio.Lock()
        self._index = _Index()
        self._state: KeywordState | None = None
        self._tokens: dict[str, tuple[str, ...]] = {}  # query word -> its tokens

    @property
    def loaded(self) -> bool:
        return self._state is not None

    @property
    def busy(self) -> bool:
        """A refresh runs (a load or a rebuild takes seconds at 100k memories)."""
        return self._lock.locked()

    @property
    def size(self) -> int:
        """Live memories held."""
        return self._index.live

    def behind(self, state: KeywordState) -> int:
        """About how many memories were stored or changed since the index's state (seqs and change
        ids can skip; deleting the newest memories lowers the seq, and logs a change); a large
        number when the change log went back (a restored file)."""
        held = self._state
        if held is None:
            return 0
        new, changed = state.newest_seq - held.newest_seq, state.newest_change - held.newest_change
        return max(new, 0) + changed if changed >= 0 else 1 << 30

    async def tokens(self, words: Sequence[str]) -> list[tuple[str, ...]]:
        """Each word as FTS5 tokenizes it (stemmed; "config_value" is two tokens, "_" none)."""
        known = {word: self._tokens[word] for word in words if word in self._tokens}
        unknown = [word for word in dict.fromkeys(words) if word not in known]
        if unknown:
            found = dict(zip(unknown, map(tuple, await self._store.tokenize(unknown)), strict=True))
            if len(self._tokens) > _MAX_CACHED_WORDS:  # (another search may have cleared it meanwhile)
                self._tokens.clear()
            self._tokens.update(found)
            known.update(found)
        return [known[word] for word in words]

    async def refresh(self, state: KeywordState | None = None) -> None:
        """Bring the index up to date (cheap when ``state``, just read by the caller, is the one
        the index already holds)."""
        async with self._lock:
            if state is not None and state == self._state:
                return
            index = self._index
            delta = None
            if self._state is not None and index.killed * 4 <= max(index.n, 64):
                delta = await self._store.keyword_rows(self._state)
            if delta is not None and len(delta.memories) <= _DELTA_LIMIT:
                index.apply(delta)  # on the event loop: no search can see it half done
                self._state = delta.state
            else:
                fresh = _Index()
                async with self._store.keyword_snapshot() as snapshot:
                    await self._build_while_reading(fresh, snapshot.memories, snapshot.postings)
                self._index = fresh
                self._state = snapshot.memories.state

    async def _build_while_reading(
        self, fresh: _Index, memories: KeywordRows, postings: list[AsyncGenerator[KeywordRows, None]]
    ) -> None:
        """Build ``fresh`` from ``memories`` and then every part of ``postings``, a part at a time
        in a worker thread, while the indexes' next parts are read, at once, each on its own
        connection's thread (SQLite's reading runs beside Python's building: a load at 100k
        memories took 1.0 s where one after the other took 1.4 s; bench/README.md). The readers
        keep one part ahead of the build. Before each part, reading and building alike give way
        to the searches running (``give_way``): on a machine of few cores they would otherwise
        share it with the search and with Ollama embedding its query."""
        send, receive = anyio.create_memory_object_stream[KeywordRows](1)

        async def read(parts: AsyncGenerator[KeywordRows, None], out: MemoryObjectSendStream[KeywordRows]) -> None:
            async with out, aclosing(parts):
                while True:
                    if self._give_way is not None:
                        await self._give_way()
                    try:
                        part = await anext(parts)
                    except StopAsyncIteration:
                        return
                    await out.send(part)

        async def build() -> None:
            await anyio.to_thread.run_sync(fresh.load, memories)
            async with receive:
                async for part in receive:
                    if self._give_way is not None:
                        await self._give_way()
                    await anyio.to_thread.run_sync(fresh.load, part)

        with send:
            readers = [partial(read, parts, send.clone()) for parts in postings]
        await at_once(*readers, build)

    def document_count(self, token: str) -> int:
        return self._index.document_count(token)

    def rank(self, facet: int, tokens: Sequence[str], k: int, scope: Scope) -> list[int]:
        """Memory seqs best first; call ``refresh`` first."""
        return self._index.rank(facet, tokens, k, scope)


def _grow(array: np.ndarray, capacity: int, fill: int = 0) -> np.ndarray:
    grown = np.full(capacity, fill, dtype=array.dtype)
    grown[: len(array)] = array
    return grown

"""The text an embedding model is sent: the prefixes each model family wants, how long a chunk
may be, where chunks are cut, and a search query's text.

Plain Python, without numpy: a search that arrives while a new process is still importing can
have its query embedded at once (``head_start``), with exactly the text ``embeddings`` would send.
"""

from __future__ import annotations

from dataclasses import dataclass

# Characters per token, pessimistic for English so that chunks fit the context; a chunk that
# still does not fit is split in half and retried (the server says so; nothing is cut).
CHARS_PER_TOKEN = 3
MIN_CHUNK_CHARS, MAX_CHUNK_CHARS = 400, 6000

# (document prefix, query prefix) by model family; models not listed take none.
_PREFIXES: dict[str, tuple[str, str]] = {
    "nomic-embed-text": ("search_document: ", "search_query: "),
    "mxbai-embed-large": ("", "Represent this sentence for searching relevant passages: "),
    "embeddinggemma": ("title: none | text: ", "task: search result | query: "),
    "qwen3-embedding": ("", "Instruct: Given a search query, retrieve relevant memories\nQuery: "),
}


@dataclass(frozen=True)
class Chunk:
    start: int
    end: int


def prefixes_for(model: str) -> tuple[str, str]:
    family = model.split(":", 1)[0].rsplit("/", 1)[-1]
    return _PREFIXES.get(family, ("", ""))


def chunk_chars_for(context_length: int | None) -> int:
    """The longest chunk for a model whose context is ``context_length`` tokens (unknown: 512)."""
    return max(MIN_CHUNK_CHARS, min(MAX_CHUNK_CHARS, (context_length or 512) * CHARS_PER_TOKEN))


def chunk_text(text: str, chunk_chars: int) -> list[Chunk]:
    """Overlapping windows that cover all of ``text``, cut at whitespace where possible."""
    if len(text) <= chunk_chars:
        return [Chunk(0, len(text))]
    overlap = chunk_chars // 8
    chunks: list[Chunk] = []
    start = 0
    while True:
        end = min(start + chunk_chars, len(text))
        if end < len(text):
            cut = text.rfind(" ", start + chunk_chars // 2, end)
            end = cut if cut > start else end
        chunks.append(Chunk(start, end))
        if end >= len(text):
            return chunks
        start = max(end - overlap, start + 1)


def query_text(model: str, query: str, chunk_chars: int) -> str:
    """What is embedded for a search's ``query``: the model's query prefix and the query. A query
    longer than a chunk keeps its beginning: a query is not stored, so no memory is lost, and the
    start of a question carries its subject. (Up to ``MIN_CHUNK_CHARS``, whatever the model's
    context, the query is sent whole.)"""
    return prefixes_for(model)[1] + query[: chunk_text(query, chunk_chars)[0].end]

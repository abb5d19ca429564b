"""What only the SQLite store's parts share: kind and facet codes, keyword-index constants, vectors'
rows and search filters (the row helpers both backends share: ``storage/sql/rows.py``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import aiosqlite

from ollama_mcp.domain import EmbeddingRow, SearchFilters
from ollama_mcp.storage.sql import rows

# (defined where a worker thread reads the vector blocks, which imports nothing of ours)
from ollama_mcp.storage.sqlite.block_read import FACET_CODES as FACET_CODES
from ollama_mcp.storage.sqlite.block_read import KIND_CODES as KIND_CODES
from ollama_mcp.storage.sqlite.dialect import SQLITE

# Rows per batch of a vector load from SQLite: a batch is held twice while it is taken in (its
# blobs, then joined), so 4096 rows of 768 dimensions cost a first start 37 MB more at its peak
# than 1024, for no faster a load (100k memories: about 1 s either way).
VECTOR_BATCH_ROWS = 1024
# The keyword indexes' tokenizer (sqlite/migrations/0001_initial.sql): scratch tables that tokenize new
# memories and query words for the in-memory keyword index use the same one.
TOKENIZER = "porter unicode61 remove_diacritics 2"
KEYWORD_TABLES: dict[int, str] = {FACET_CODES["content"]: "memories_fts", FACET_CODES["context"]: "memory_contexts_fts"}
# memory_changes rows older than this many are pruned by the upkeep (a reader further behind
# rebuilds its index).
KEPT_CHANGES = 10_000
# How far the keyword index's inputs have come (KeywordState): the highest memory seq, and the
# AUTOINCREMENT counter of memory_changes (not max(id), which pruning the log would lower).
NEWEST_SEQ = "(SELECT coalesce(max(seq), 0) FROM memories)"
NEWEST_CHANGE = "(SELECT coalesce(max(seq), 0) FROM sqlite_sequence WHERE name = 'memory_changes')"


async def insert_embedding_rows(conn: aiosqlite.Connection, rows: Sequence[EmbeddingRow]) -> int:
    before = conn.total_changes
    await conn.executemany(
        "INSERT OR IGNORE INTO memory_embeddings (memory_seq, model, facet, chunk_index, dim, vector)"
        " SELECT ?, ?, ?, ?, ?, ? WHERE EXISTS (SELECT 1 FROM memories WHERE seq = ?)",
        [(r.memory_seq, r.model, r.facet, r.chunk_index, r.dim, r.vector, r.memory_seq) for r in rows],
    )
    return conn.total_changes - before


def filter_sql(filters: SearchFilters) -> tuple[list[str], list[Any]]:
    """WHERE conditions on ``memories m`` for ``filters`` (``storage/sql/rows.py``), with their values in order."""
    return rows.filter_conditions(SQLITE, filters)

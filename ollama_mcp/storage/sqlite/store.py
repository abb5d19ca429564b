"""The SQLite backend's storage: all SQL (conversations, memories, tags, vectors, the keyword
index), returned as domain values.

Every write is one ``BEGIN IMMEDIATE`` transaction, so a row, its tags, its keyword entry (kept
by triggers) and its vectors appear or vanish together, and several processes can share the
file. One connection serves the whole process; a lock keeps concurrent tasks from interleaving
statements inside each other's transactions.

The store is split by concept, one part per module: ``conversations``, ``memories``,
``relations``, ``facts``, ``transcript``, ``jobs`` (and the audit trail), ``keywords`` (what search reads), ``vectors``;
``base`` holds the connection and transactions, ``rows`` the shared SQL and row helpers.
"""

from ollama_mcp.storage.sql.store import SqlStore
from ollama_mcp.storage.sqlite.jobs import JobStore
from ollama_mcp.storage.sqlite.keywords import KeywordRows, KeywordState, KeywordStore, SearchReads
from ollama_mcp.storage.sqlite.memories import MemoryStore
from ollama_mcp.storage.sqlite.relations import RelationStore
from ollama_mcp.storage.sqlite.rows import (
    FACET_CODES,
    KEYWORD_TABLES,
    KIND_CODES,
    TOKENIZER,
)
from ollama_mcp.storage.sqlite.summary import summarize
from ollama_mcp.storage.sqlite.vectors import VectorBatch, VectorStore

__all__ = [
    "FACET_CODES",
    "KEYWORD_TABLES",
    "KIND_CODES",
    "TOKENIZER",
    "KeywordRows",
    "KeywordState",
    "SearchReads",
    "Store",
    "VectorBatch",
    "summarize",
]


class Store(SqlStore, RelationStore, MemoryStore, JobStore, KeywordStore, VectorStore):
    """The SQLite backend's ``storage.Storage`` (and what its ``Ranker`` reads): the only owner of SQL."""

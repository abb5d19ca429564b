"""``PgStore``: the PostgreSQL backend's ``storage.Storage``, composed of its parts like the SQLite
``store.Store`` is (``conversations``, ``relations``, ``memories``, ``facts``, ``transcript``, ``jobs``, ``vectors``;
``base`` holds the pool and transactions, ``rows`` the shared SQL).

Every write is one transaction. Writes that touch a conversation's memories lock that
conversation's row first, so they queue per conversation and run side by side across
conversations, in one lock order (no deadlocks between instances).
"""

from ollama_mcp.storage.postgres.jobs import JobStore
from ollama_mcp.storage.postgres.memories import MemoryStore
from ollama_mcp.storage.postgres.relations import RelationStore
from ollama_mcp.storage.postgres.vectors import VectorStore
from ollama_mcp.storage.sql.store import SqlStore


class PgStore(SqlStore, RelationStore, MemoryStore, JobStore, VectorStore):
    """The PostgreSQL backend's ``storage.Storage``; open with ``await PgStore.open(url)``."""

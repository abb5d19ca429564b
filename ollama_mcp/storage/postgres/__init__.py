"""The PostgreSQL backend (pgvector for vectors, full-text search for keywords), for a memory
shared by several server processes and machines: ``store.PgStore`` (the ``storage.Storage``),
``search.PgRanker`` (the ``storage.Ranker``), ``db`` (connecting and migrating) and ``summary``
(what doctor and stats report). Imported only when ``OLLAMA_MCP_DB`` is a PostgreSQL URL."""

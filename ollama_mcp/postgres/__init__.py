"""The PostgreSQL backend (pgvector for vectors, full-text search for keywords), for a memory
shared by several server processes and machines. Under construction (issue #13): so far the
opener (``db``) and its migrations; the ``storage.Storage`` and ``storage.Ranker``
implementations come next, and until then ``OLLAMA_MCP_DB`` accepts SQLite paths only."""

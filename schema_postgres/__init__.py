"""PostgreSQL migrations, applied in file-name order by ollama_mcp.storage.postgres.db (shipped as
ollama_mcp.schema_postgres)."""

"""PostgreSQL migrations, applied in file-name order by ollama_mcp.storage.postgres.db."""

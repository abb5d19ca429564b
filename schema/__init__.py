"""SQL migrations, applied in file-name order by ollama_mcp.db (shipped as ollama_mcp.schema)."""

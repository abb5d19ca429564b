"""ollama-mcp: local-first conversation memory for MCP clients (SQLite + your own Ollama)."""

__version__ = "0.1.0"

-- pgvector: vectors as vector(d), ranked by HNSW indexes. Creating it needs a superuser once per
-- database (pgvector is not a trusted extension); ollama_mcp.postgres.db says so when it cannot.
CREATE EXTENSION IF NOT EXISTS vector;

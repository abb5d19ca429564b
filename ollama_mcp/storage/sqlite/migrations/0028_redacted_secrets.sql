-- What a write's redaction replaced (ollama_mcp/redaction.py), as "2 AWS access key, 1 password":
-- the kinds and counts, never the secret. NULL: nothing was.
ALTER TABLE write_audit ADD COLUMN redacted TEXT;

-- Bearer tokens of the HTTP server (`ollama-mcp token create`), kept in the local principal's store
-- (the one OLLAMA_MCP_DB names). Only a sha256 of each token is kept: a token carries 256 random
-- bits, so its hash cannot be reversed, and a stolen copy of this table opens nothing. A revoked
-- token's row stays, for the record; its name may be given to a new token.
CREATE TABLE access_tokens (
    id          INTEGER PRIMARY KEY,
    name        TEXT NOT NULL,                   -- who holds it, such as alice-laptop
    principal   TEXT NOT NULL,                   -- whose memory it opens
    token_hash  TEXT NOT NULL UNIQUE,
    created_at  TEXT NOT NULL,
    revoked_at  TEXT
);
CREATE UNIQUE INDEX access_tokens_active_name ON access_tokens (name) WHERE revoked_at IS NULL;

-- Bearer tokens of the HTTP server (`ollama-mcp token create`), kept in the local principal's
-- schema. Only a sha256 of each token is kept (it carries 256 random bits). A revoked token's row
-- stays, for the record; its name may be given to a new token.
CREATE TABLE access_tokens (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name        text NOT NULL,
    principal   text NOT NULL,
    token_hash  text NOT NULL UNIQUE,
    created_at  text NOT NULL,
    revoked_at  text
);
CREATE UNIQUE INDEX access_tokens_active_name ON access_tokens (name) WHERE revoked_at IS NULL;

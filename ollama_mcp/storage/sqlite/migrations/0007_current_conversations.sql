-- The current conversation of a client that any instance of the HTTP server may serve (a token
-- used without an MCP session: a --stateless server, the 2026-07-28 protocol), so that a request
-- on another instance continues the conversation a request on this one began. Clients bound to
-- one process (stdio, an MCP session) keep theirs in that process (ollama_mcp.service). Ending a
-- conversation removes its rows (the store's end_conversation); deleting it, the cascade.
CREATE TABLE current_conversations (
    client           TEXT PRIMARY KEY,           -- ollama_mcp.caller's key, such as token:alice-laptop
    conversation_id  TEXT NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
    updated_at       TEXT NOT NULL
);
CREATE INDEX current_conversations_conversation ON current_conversations (conversation_id);

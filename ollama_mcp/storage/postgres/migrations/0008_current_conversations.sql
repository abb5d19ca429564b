-- The current conversation of a client that any instance of the HTTP server may serve (a token
-- used without an MCP session), so that a request on another instance continues the conversation
-- a request on this one began. Clients bound to one process keep theirs there (ollama_mcp.service).
-- Ending a conversation removes its rows (the store's end_conversation); deleting it, the cascade.
CREATE TABLE current_conversations (
    client           text PRIMARY KEY,
    conversation_id  text NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
    updated_at       text NOT NULL
);
CREATE INDEX current_conversations_conversation ON current_conversations (conversation_id);

-- list_conversations orders by last activity (the latest memory's time) and retention finds idle
-- conversations by it: an index lookup per conversation, as SQLite's memories_conversation gives.
CREATE INDEX IF NOT EXISTS memories_conversation_created ON memories (conversation_id, created_at);

-- The chat-model calls background work made (summaries, compaction, facts), one row each: every
-- process on the file counts the last hour's rows against OLLAMA_MCP_CHAT_CALLS_PER_HOUR before it
-- makes another (services/chat_budget.py). Rows older than an hour are deleted as calls are taken.
CREATE TABLE chat_calls (
    id   INTEGER PRIMARY KEY,
    at   TEXT NOT NULL,
    kind TEXT NOT NULL
);
CREATE INDEX chat_calls_at ON chat_calls (at);

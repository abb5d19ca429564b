-- Conversation lifecycle: transcript details, memory versions, summaries, compaction, retention,
-- and the one table of deferred work. Applied inside one BEGIN IMMEDIATE transaction.

-- Messages (kind = 'message') already share the memories table with notes and summaries.
ALTER TABLE memories ADD COLUMN actor TEXT;          -- who wrote it: a user id, an agent or a tool name
ALTER TABLE memories ADD COLUMN tool_calls TEXT;     -- JSON array, on assistant messages that called tools
ALTER TABLE memories ADD COLUMN tool_call_id TEXT;   -- on tool messages: the call they answer
-- update_memory never overwrites: the old row points at the version that replaced it.
ALTER TABLE memories ADD COLUMN superseded_by TEXT;
CREATE INDEX memories_superseded ON memories (superseded_by) WHERE superseded_by IS NOT NULL;
-- "The same note twice returns the first one" holds among current versions only: an edit may
-- return to an earlier wording.
DROP INDEX memories_note_once;
CREATE UNIQUE INDEX memories_note_once ON memories (conversation_id, content_hash)
    WHERE kind = 'note' AND superseded_by IS NULL;

-- none: no summary asked for yet; given: the client wrote it; pending: a job will write it;
-- done: the chat model wrote it; failed: the job gave up (jobs.last_error says why).
ALTER TABLE conversations ADD COLUMN summary_status TEXT NOT NULL DEFAULT 'none'
    CHECK (summary_status IN ('none', 'given', 'pending', 'done', 'failed'));
UPDATE conversations SET summary_status = 'given' WHERE summary IS NOT NULL;
-- Compaction: a summary of the oldest messages, and the seq of the last message it covers.
ALTER TABLE conversations ADD COLUMN rolling_summary TEXT;
ALTER TABLE conversations ADD COLUMN summarized_through INTEGER NOT NULL DEFAULT 0;
-- Retention: set from metadata.ttl_hours; the sweep deletes the conversation after this time.
ALTER TABLE conversations ADD COLUMN expires_at TEXT;
CREATE INDEX conversations_expires ON conversations (expires_at) WHERE expires_at IS NOT NULL;

-- Deferred work that must survive a crash: claimed under a lease (a process that dies mid-job
-- lets the lease lapse and another run resumes it), retried with backoff, and ended either
-- 'done' or 'failed' with the reason. Never dropped silently.
CREATE TABLE jobs (
    id              INTEGER PRIMARY KEY,
    kind            TEXT NOT NULL CHECK (kind IN ('summarize', 'compact')),
    conversation_id TEXT NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
    state           TEXT NOT NULL DEFAULT 'queued' CHECK (state IN ('queued', 'running', 'done', 'failed')),
    attempts        INTEGER NOT NULL DEFAULT 0,
    run_after       TEXT NOT NULL,
    lease_until     TEXT,
    last_error      TEXT,
    created_at      TEXT NOT NULL,
    finished_at     TEXT
);
-- One open job of a kind per conversation: asking twice does not summarize twice.
CREATE UNIQUE INDEX jobs_open_once ON jobs (kind, conversation_id) WHERE state IN ('queued', 'running');
CREATE INDEX jobs_due ON jobs (state, run_after);
CREATE INDEX jobs_conversation ON jobs (conversation_id);

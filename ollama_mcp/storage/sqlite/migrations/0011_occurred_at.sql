-- When a memory happened, as its writer says (store_memory's occurred_at, a turn's, an import's):
-- a chat imported from last year, a note about yesterday. Memories stored before this migration
-- happened when they were stored. Search filters (since/until) and a query's time window read it;
-- created_at stays when the row was written (retention, retries and the audit read that).
ALTER TABLE memories ADD COLUMN occurred_at TEXT;
UPDATE memories SET occurred_at = created_at;
CREATE INDEX memories_occurred ON memories (occurred_at);

-- When a memory happened (see schema/0011_occurred_at.sql): the writer's word, by default when it
-- was stored; since/until and a query's time window read it, created_at stays the write time.
ALTER TABLE memories ADD COLUMN occurred_at text;
UPDATE memories SET occurred_at = created_at;
ALTER TABLE memories ALTER COLUMN occurred_at SET NOT NULL;
CREATE INDEX memories_occurred ON memories (occurred_at);

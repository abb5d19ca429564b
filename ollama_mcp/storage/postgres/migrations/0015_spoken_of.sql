-- The times a memory's words name, read against when it happened (see schema/0013_spoken_of.sql).
ALTER TABLE memories ADD COLUMN spoken_of text;
CREATE INDEX memories_spoken_unread ON memories (seq) WHERE spoken_of IS NULL;

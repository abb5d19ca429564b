-- A memory's indexes name its conversation by its integer key, not its UUID (#57 item 1,
-- bench/README.md "Memories indexed by their conversation's key"). The UUID, 36 characters, was
-- in each entry of the four indexes that find a conversation's memories: 1.3 MB of a settled 10k
-- store, where the key takes one to three bytes. `conversation_id` stays the memory's column that
-- statements read and the foreign key cascades by; `conversation_key` is its conversation's `key`
-- (schema 21: the rowid, which VACUUM keeps), given with the row (storage/sql/rows.py's INSERTs,
-- through the dialect) and checked by a trigger, and every statement that finds a conversation's
-- memories asks by it (sqlite/dialect.py, OF_CONVERSATION and SAME_CONVERSATION).

ALTER TABLE memories ADD COLUMN conversation_key INTEGER;
UPDATE memories SET conversation_key = (SELECT c.key FROM conversations c WHERE c.id = memories.conversation_id);

DROP INDEX memories_conversation_seq;
DROP INDEX memories_note_once;
DROP INDEX memories_conversation_occurred;
DROP INDEX memories_context_before;
CREATE INDEX memories_conversation_seq ON memories (conversation_key, seq);
CREATE UNIQUE INDEX memories_note_once ON memories (conversation_key, content_hash)
    WHERE kind = 'note' AND superseded_by IS NULL;
CREATE INDEX memories_conversation_occurred ON memories (conversation_key, occurred_at);
CREATE INDEX memories_context_before ON memories (conversation_key, context_before) WHERE context_before IS NOT NULL;

-- The key a row is given is its conversation's: any other (or none) is refused, so no memory can
-- sit under one conversation and be found under another.
CREATE TRIGGER memories_key_bi BEFORE INSERT ON memories
WHEN new.conversation_key IS NOT (SELECT c.key FROM conversations c WHERE c.id = new.conversation_id)
BEGIN
    SELECT RAISE(ABORT, 'a memory''s conversation_key must be the key of its conversation_id');
END;

-- The triggers and views that walk a conversation's memories, as schemas 19, 21 and 22 made them,
-- walking by the key.
DROP TRIGGER memories_bi;
CREATE TRIGGER memories_bi BEFORE INSERT ON memories
WHEN new.seq > 0 AND EXISTS (SELECT 1 FROM memories f WHERE f.conversation_key = new.conversation_key AND f.seq > new.seq)
BEGIN
    SELECT RAISE(ABORT, 'a memory must come after the memories of its conversation (its seq is too small)');
END;

DROP TRIGGER memories_moved;
CREATE TRIGGER memories_moved BEFORE UPDATE OF conversation_id, conversation_key, context_before ON memories
WHEN old.conversation_id IS NOT new.conversation_id OR old.conversation_key IS NOT new.conversation_key
  OR old.context_before IS NOT new.context_before
BEGIN
    SELECT RAISE(ABORT, 'a memory stays in its conversation, at its place');
END;

DROP TRIGGER conversations_contexts_bd;
CREATE TRIGGER conversations_contexts_bd BEFORE DELETE ON conversations BEGIN
    INSERT INTO memory_contexts_fts (memory_contexts_fts, rowid, context)
        SELECT 'delete', v.seq, v.context FROM memories m JOIN memory_contexts v ON v.seq = m.seq
         WHERE m.conversation_key = old.key AND m.seq NOT IN (SELECT seq FROM memory_contexts_pending);
END;

DROP TRIGGER memories_activity_ad;
CREATE TRIGGER memories_activity_ad AFTER DELETE ON memories
WHEN (SELECT c.last_memory_at FROM conversations c WHERE c.key = old.conversation_key) = old.created_at
 AND (SELECT 1 FROM memories s WHERE s.conversation_key = old.conversation_key AND s.created_at = old.created_at
       ORDER BY s.seq DESC LIMIT 1) IS NULL
BEGIN
    UPDATE conversations
       SET last_memory_at = (SELECT max(m.created_at) FROM memories m WHERE m.conversation_key = old.conversation_key)
     WHERE key = old.conversation_key;
END;

DROP TRIGGER memories_activity_au;
CREATE TRIGGER memories_activity_au AFTER UPDATE OF created_at ON memories
WHEN old.created_at IS NOT new.created_at
BEGIN
    UPDATE conversations
       SET last_memory_at = (SELECT max(m.created_at) FROM memories m WHERE m.conversation_key = new.conversation_key)
     WHERE key = new.conversation_key;
END;

DROP VIEW memory_contexts;
CREATE VIEW memory_contexts (seq, context) AS
SELECT m.seq,
       CASE WHEN m.kind IN ('summary', 'fact') OR json_extract(m.metadata, '$.redacted') IS NOT NULL THEN m.content
            ELSE coalesce((SELECT substr(e.content, -1000) || char(10) FROM memories e
                            WHERE e.conversation_key = m.conversation_key AND e.seq < coalesce(m.context_before, m.seq)
                              AND e.kind NOT IN ('summary', 'fact') AND json_extract(e.metadata, '$.redacted') IS NULL
                            ORDER BY e.seq DESC LIMIT 1 OFFSET 1), '')
              || coalesce((SELECT substr(e.content, -1000) || char(10) FROM memories e
                            WHERE e.conversation_key = m.conversation_key AND e.seq < coalesce(m.context_before, m.seq)
                              AND e.kind NOT IN ('summary', 'fact') AND json_extract(e.metadata, '$.redacted') IS NULL
                            ORDER BY e.seq DESC LIMIT 1), '')
              || m.content
       END
  FROM memories m;

DROP VIEW memory_context_followers;
CREATE VIEW memory_context_followers (seq, follower) AS
SELECT x.seq, f.seq FROM memories x JOIN memories f ON f.seq IN (
    SELECT g.seq FROM memories g WHERE g.conversation_key = x.conversation_key AND g.seq > x.seq
       AND g.kind NOT IN ('summary', 'fact') AND json_extract(g.metadata, '$.redacted') IS NULL ORDER BY g.seq LIMIT 2)
UNION ALL
SELECT x.seq, n.seq FROM memories x JOIN memories n
    ON n.conversation_key = x.conversation_key AND n.context_before > x.seq
   AND n.context_before <= coalesce((
        SELECT g.seq FROM memories g WHERE g.conversation_key = x.conversation_key AND g.seq > x.seq
           AND g.kind NOT IN ('summary', 'fact') AND json_extract(g.metadata, '$.redacted') IS NULL ORDER BY g.seq LIMIT 1 OFFSET 1), 9223372036854775807);

-- A note's digest (#57 item 1, bench/README.md "A note's digest"): the first 16 bytes of its
-- text's sha256, the bytes themselves, where `content_hash` held all 32 as 64 hex digits, and
-- only on notes, the kind stored once per conversation (memories_note_once finds a retried note
-- by it). A turn, summary or fact had a digest only for what a redacted turn's text becomes
-- ("sha256:" and the digest), which is computed from the text when the turn is redacted
-- (storage/memory_rules.py, redacted_text). 48 bytes less in each note's row and again in its
-- entry of memories_note_once; 65 less in each other memory's row.
--   * `note_digest` is NULL on every other kind, and 16 bytes on a note: a CHECK says so.
--   * it is computed from the note's text (notes are never edited in place) by
--     migration_text_digest, which the connection applying the migrations registers
--     (storage/sqlite/db.py; memory_rules.text_digest).
-- The table is copied as schema 23 copied it (seq and every value kept; the views, indexes and
-- triggers made again as schema 23 left them), which also gives an upgraded store the bytes back.

DROP VIEW memory_context_followers;
DROP VIEW memory_contexts;
DROP TRIGGER conversations_contexts_bd;

CREATE TABLE memories_new (
    seq              INTEGER PRIMARY KEY,
    id               TEXT NOT NULL UNIQUE,
    conversation_id  TEXT NOT NULL,
    conversation_key INTEGER NOT NULL REFERENCES conversations (key) ON DELETE CASCADE,
    kind             TEXT NOT NULL DEFAULT 'note' CHECK (kind IN ('note', 'message', 'summary', 'fact')),
    role             TEXT,
    content          TEXT NOT NULL,
    note_digest      BLOB,
    tags             TEXT NOT NULL DEFAULT '[]',
    metadata         TEXT NOT NULL DEFAULT '{}',
    created_at       TEXT NOT NULL,
    actor            TEXT,
    tool_calls       TEXT,
    tool_call_id     TEXT,
    superseded_by    TEXT,
    source_seq       INTEGER REFERENCES memories (seq) ON DELETE CASCADE,  -- facts: the memory they came from
    occurred_at      TEXT,
    spoken_of        TEXT,
    -- A new version of a note takes the old one's place in its conversation: its context is
    -- made of the memories before seq `context_before` (the old version's), not before its own.
    context_before   INTEGER,
    CHECK ((kind = 'fact') = (source_seq IS NOT NULL)),
    CHECK (CASE WHEN kind = 'note' THEN typeof(note_digest) = 'blob' AND length(note_digest) = 16
                ELSE note_digest IS NULL END)
);
INSERT INTO memories_new (seq, id, conversation_id, conversation_key, kind, role, content, note_digest, tags,
                          metadata, created_at, actor, tool_calls, tool_call_id, superseded_by, source_seq,
                          occurred_at, spoken_of, context_before)
    SELECT seq, id, conversation_id, conversation_key, kind, role, content,
           CASE WHEN kind = 'note' THEN migration_text_digest(content) END, tags, metadata,
           created_at, actor, tool_calls, tool_call_id, superseded_by, source_seq, occurred_at,
           spoken_of, context_before
      FROM memories ORDER BY seq;
DROP TABLE memories;
PRAGMA legacy_alter_table = ON;
ALTER TABLE memories_new RENAME TO memories;
PRAGMA legacy_alter_table = OFF;

CREATE INDEX memories_conversation_seq ON memories (conversation_key, seq);
CREATE UNIQUE INDEX memories_note_once ON memories (conversation_key, note_digest)
    WHERE kind = 'note' AND superseded_by IS NULL;
CREATE INDEX memories_conversation_occurred ON memories (conversation_key, occurred_at);
CREATE INDEX memories_context_before ON memories (conversation_key, context_before) WHERE context_before IS NOT NULL;
CREATE INDEX memories_superseded ON memories (superseded_by) WHERE superseded_by IS NOT NULL;
CREATE INDEX memories_source ON memories (source_seq) WHERE source_seq IS NOT NULL;
CREATE INDEX memories_fact_key ON memories (json_extract(metadata, '$.fact_key'))
    WHERE kind = 'fact' AND superseded_by IS NULL;
CREATE INDEX memories_occurred ON memories (occurred_at);
CREATE INDEX memories_spoken_unread ON memories (seq) WHERE spoken_of IS NULL;

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

-- A conversation's delete takes its contexts out of the keyword index (as schema 19 made it).
CREATE TRIGGER conversations_contexts_bd BEFORE DELETE ON conversations BEGIN
    INSERT INTO memory_contexts_fts (memory_contexts_fts, rowid, context)
        SELECT 'delete', v.seq, v.context FROM memories m JOIN memory_contexts v ON v.seq = m.seq
         WHERE m.conversation_key = old.key AND m.seq NOT IN (SELECT seq FROM memory_contexts_pending);
END;

-- The key a row is given is its conversation's: any other is refused, so no memory can sit under
-- one conversation and be found under another.
CREATE TRIGGER memories_key_bi BEFORE INSERT ON memories
WHEN new.conversation_key IS NOT (SELECT c.key FROM conversations c WHERE c.id = new.conversation_id)
BEGIN
    SELECT RAISE(ABORT, 'a memory''s conversation_key must be the key of its conversation_id');
END;

CREATE TRIGGER memories_ai AFTER INSERT ON memories BEGIN
    INSERT INTO memories_fts (rowid, content) VALUES (new.seq, new.content);
    INSERT INTO memory_contexts_fts (rowid, context) SELECT seq, context FROM memory_contexts WHERE seq = new.seq;
END;

CREATE TRIGGER memories_au AFTER UPDATE OF content ON memories BEGIN
    INSERT INTO memories_fts (memories_fts, rowid, content) VALUES ('delete', old.seq, old.content);
    INSERT INTO memories_fts (rowid, content) VALUES (new.seq, new.content);
END;

CREATE TRIGGER memories_ad AFTER DELETE ON memories BEGIN
    INSERT INTO memories_fts (memories_fts, rowid, content) VALUES ('delete', old.seq, old.content);
    DELETE FROM memory_contexts_pending WHERE seq = old.seq;
    INSERT INTO memory_changes (memory_seq) SELECT seq FROM memory_contexts_pending;
    INSERT INTO memory_contexts_fts (rowid, context)
        SELECT seq, context FROM memory_contexts WHERE seq IN (SELECT seq FROM memory_contexts_pending);
    DELETE FROM memory_contexts_pending;
END;

CREATE TRIGGER memories_changes_ad AFTER DELETE ON memories BEGIN
    INSERT INTO memory_changes (memory_seq) VALUES (old.seq);
END;

CREATE TRIGGER memories_changes_au AFTER UPDATE OF content ON memories BEGIN
    INSERT INTO memory_changes (memory_seq) VALUES (old.seq);
END;

CREATE TRIGGER memories_fact_ad AFTER DELETE ON memories WHEN old.kind = 'fact' BEGIN
    UPDATE memories SET superseded_by = NULL WHERE superseded_by = old.id AND kind = 'fact';
END;

CREATE TRIGGER memories_bi BEFORE INSERT ON memories
WHEN new.seq > 0 AND EXISTS (SELECT 1 FROM memories f WHERE f.conversation_key = new.conversation_key AND f.seq > new.seq)
BEGIN
    SELECT RAISE(ABORT, 'a memory must come after the memories of its conversation (its seq is too small)');
END;

CREATE TRIGGER memories_moved BEFORE UPDATE OF conversation_id, conversation_key, context_before ON memories
WHEN old.conversation_id IS NOT new.conversation_id OR old.conversation_key IS NOT new.conversation_key
  OR old.context_before IS NOT new.context_before
BEGIN
    SELECT RAISE(ABORT, 'a memory stays in its conversation, at its place');
END;

CREATE TRIGGER memories_bd BEFORE DELETE ON memories WHEN EXISTS (SELECT 1 FROM conversations c WHERE c.key = old.conversation_key) BEGIN
    INSERT INTO memory_contexts_fts (memory_contexts_fts, rowid, context)
        SELECT 'delete', v.seq, v.context FROM memory_contexts v
         WHERE (v.seq = old.seq OR v.seq IN (SELECT follower FROM memory_context_followers WHERE seq = old.seq))
           AND v.seq NOT IN (SELECT seq FROM memory_contexts_pending);
    INSERT OR IGNORE INTO memory_contexts_pending (seq)
        SELECT old.seq UNION ALL SELECT follower FROM memory_context_followers WHERE seq = old.seq;
END;

CREATE TRIGGER memories_bu BEFORE UPDATE OF content, kind, metadata ON memories
WHEN (old.content IS NOT new.content OR old.kind IS NOT new.kind
       OR (json_extract(old.metadata, '$.redacted') IS NULL) <> (json_extract(new.metadata, '$.redacted') IS NULL))
  AND EXISTS (SELECT 1 FROM conversations c WHERE c.key = old.conversation_key)
BEGIN
    INSERT INTO memory_contexts_fts (memory_contexts_fts, rowid, context)
        SELECT 'delete', v.seq, v.context FROM memory_contexts v
         WHERE (v.seq = old.seq OR v.seq IN (SELECT follower FROM memory_context_followers WHERE seq = old.seq))
           AND v.seq NOT IN (SELECT seq FROM memory_contexts_pending);
    INSERT OR IGNORE INTO memory_contexts_pending (seq)
        SELECT old.seq UNION ALL SELECT follower FROM memory_context_followers WHERE seq = old.seq;
END;

CREATE TRIGGER memories_context_au AFTER UPDATE OF content, kind, metadata ON memories
WHEN (old.content IS NOT new.content OR old.kind IS NOT new.kind
       OR (json_extract(old.metadata, '$.redacted') IS NULL) <> (json_extract(new.metadata, '$.redacted') IS NULL))
  AND EXISTS (SELECT 1 FROM conversations c WHERE c.key = old.conversation_key)
BEGIN
    INSERT INTO memory_changes (memory_seq) SELECT seq FROM memory_contexts_pending;
    INSERT INTO memory_contexts_fts (rowid, context)
        SELECT seq, context FROM memory_contexts WHERE seq IN (SELECT seq FROM memory_contexts_pending);
    DELETE FROM memory_contexts_pending;
END;

CREATE TRIGGER memories_activity_ai AFTER INSERT ON memories BEGIN
    UPDATE conversations SET last_memory_at = new.created_at
     WHERE key = new.conversation_key AND (last_memory_at IS NULL OR last_memory_at < new.created_at);
END;

CREATE TRIGGER memories_activity_ad AFTER DELETE ON memories
WHEN (SELECT c.last_memory_at FROM conversations c WHERE c.key = old.conversation_key) = old.created_at
 AND (SELECT 1 FROM memories s WHERE s.conversation_key = old.conversation_key AND s.created_at = old.created_at
       ORDER BY s.seq DESC LIMIT 1) IS NULL
BEGIN
    UPDATE conversations
       SET last_memory_at = (SELECT max(m.created_at) FROM memories m WHERE m.conversation_key = old.conversation_key)
     WHERE key = old.conversation_key;
END;

CREATE TRIGGER memories_activity_au AFTER UPDATE OF created_at ON memories
WHEN old.created_at IS NOT new.created_at
BEGIN
    UPDATE conversations
       SET last_memory_at = (SELECT max(m.created_at) FROM memories m WHERE m.conversation_key = new.conversation_key)
     WHERE key = new.conversation_key;
END;

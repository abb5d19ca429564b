-- A memory's context is no longer stored (#57 item 1, docs/context-view.md). It was the memory's
-- content preceded by the two memories before it, so a store kept most of its text three times.
-- It is now the view `memory_contexts` (below), computed by the rule `memory_rules.compose_context`
-- wrote it by: summaries, facts and redacted turns are their own context and no one else's; any
-- other memory is preceded by the last CONTEXT_NEIGHBOURS (2) others of its conversation before it
-- (before the version it replaced, for a new version of a note), each clipped to its last
-- CONTEXT_NEIGHBOUR_CHARS (1,000) characters, one per line. The keyword index of contexts reads
-- the view as its content, and triggers keep the index in step with it.

-- A context an older version stored otherwise than by the rule: its context vectors go, so the
-- backfill embeds the text the view gives, and other processes read it again. (The rule as the
-- view below spells it, over the table before its rebuild: a new version's place is the seq of
-- the version it superseded.)
CREATE TEMP VIEW migration_0019_rule (seq, context) AS
SELECT m.seq,
       CASE WHEN m.kind IN ('summary', 'fact') OR json_extract(m.metadata, '$.redacted') IS NOT NULL THEN m.content
            ELSE coalesce((SELECT substr(e.content, -1000) || char(10) FROM memories e
                            WHERE e.conversation_id = m.conversation_id AND e.seq < coalesce((SELECT o.seq FROM memories o WHERE o.superseded_by = m.id AND o.kind = m.kind), m.seq)
                              AND e.kind NOT IN ('summary', 'fact') AND json_extract(e.metadata, '$.redacted') IS NULL
                            ORDER BY e.seq DESC LIMIT 1 OFFSET 1), '')
              || coalesce((SELECT substr(e.content, -1000) || char(10) FROM memories e
                            WHERE e.conversation_id = m.conversation_id AND e.seq < coalesce((SELECT o.seq FROM memories o WHERE o.superseded_by = m.id AND o.kind = m.kind), m.seq)
                              AND e.kind NOT IN ('summary', 'fact') AND json_extract(e.metadata, '$.redacted') IS NULL
                            ORDER BY e.seq DESC LIMIT 1), '')
              || m.content
       END
  FROM memories m;

CREATE TEMP TABLE migration_0019_rewritten AS
    SELECT m.seq FROM memories m JOIN temp.migration_0019_rule v ON v.seq = m.seq WHERE m.context IS NOT v.context;
DELETE FROM memory_embeddings WHERE facet = 'context' AND memory_seq IN (SELECT seq FROM temp.migration_0019_rewritten);
INSERT INTO memory_changes (memory_seq) SELECT seq FROM temp.migration_0019_rewritten;
DROP TABLE temp.migration_0019_rewritten;
DROP VIEW temp.migration_0019_rule;

-- The table again without `context`, its rows copied (ALTER TABLE ... DROP COLUMN would leave
-- every page as full as it was), and its indexes and the triggers that stay as they were.
DROP TABLE memory_contexts_fts;
CREATE TABLE memories_new (
    seq             INTEGER PRIMARY KEY,
    id              TEXT NOT NULL UNIQUE,
    conversation_id TEXT NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
    kind            TEXT NOT NULL DEFAULT 'note' CHECK (kind IN ('note', 'message', 'summary', 'fact')),
    role            TEXT,
    content         TEXT NOT NULL,
    content_hash    TEXT NOT NULL,
    tags            TEXT NOT NULL DEFAULT '[]',
    metadata        TEXT NOT NULL DEFAULT '{}',
    created_at      TEXT NOT NULL,
    actor           TEXT,
    tool_calls      TEXT,
    tool_call_id    TEXT,
    superseded_by   TEXT,
    source_seq      INTEGER REFERENCES memories (seq) ON DELETE CASCADE,  -- facts: the memory they came from
    occurred_at     TEXT,
    spoken_of       TEXT,
    -- A new version of a note takes the old one's place in its conversation: its context is
    -- made of the memories before seq `context_before` (the old version's), not before its own.
    context_before  INTEGER,
    CHECK ((kind = 'fact') = (source_seq IS NOT NULL))
);
INSERT INTO memories_new (seq, id, conversation_id, kind, role, content, content_hash, tags, metadata, created_at,
                          actor, tool_calls, tool_call_id, superseded_by, source_seq, occurred_at, spoken_of,
                          context_before)
    SELECT m.seq, m.id, m.conversation_id, m.kind, m.role, m.content, m.content_hash, m.tags, m.metadata,
           m.created_at, m.actor, m.tool_calls, m.tool_call_id, m.superseded_by, m.source_seq, m.occurred_at,
           m.spoken_of, (SELECT o.seq FROM memories o WHERE o.superseded_by = m.id AND o.kind = m.kind)
      FROM memories m ORDER BY m.seq;
DROP TABLE memories;
ALTER TABLE memories_new RENAME TO memories;

CREATE INDEX memories_conversation ON memories (conversation_id, created_at);
CREATE INDEX memories_conversation_seq ON memories (conversation_id, seq);
CREATE INDEX memories_created ON memories (created_at);
CREATE INDEX memories_superseded ON memories (superseded_by) WHERE superseded_by IS NOT NULL;
CREATE UNIQUE INDEX memories_note_once ON memories (conversation_id, content_hash)
    WHERE kind = 'note' AND superseded_by IS NULL;
CREATE INDEX memories_source ON memories (source_seq) WHERE source_seq IS NOT NULL;
CREATE INDEX memories_fact_key ON memories (json_extract(metadata, '$.fact_key'))
    WHERE kind = 'fact' AND superseded_by IS NULL;
CREATE INDEX memories_occurred ON memories (occurred_at);
CREATE INDEX memories_conversation_occurred ON memories (conversation_id, occurred_at);
CREATE INDEX memories_spoken_unread ON memories (seq) WHERE spoken_of IS NULL;
CREATE INDEX memories_context_before ON memories (conversation_id, context_before) WHERE context_before IS NOT NULL;

CREATE TRIGGER memories_au AFTER UPDATE OF content ON memories BEGIN
    INSERT INTO memories_fts (memories_fts, rowid, content) VALUES ('delete', old.seq, old.content);
    INSERT INTO memories_fts (rowid, content) VALUES (new.seq, new.content);
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

CREATE VIEW memory_contexts (seq, context) AS
SELECT m.seq,
       CASE WHEN m.kind IN ('summary', 'fact') OR json_extract(m.metadata, '$.redacted') IS NOT NULL THEN m.content
            ELSE coalesce((SELECT substr(e.content, -1000) || char(10) FROM memories e
                            WHERE e.conversation_id = m.conversation_id AND e.seq < coalesce(m.context_before, m.seq)
                              AND e.kind NOT IN ('summary', 'fact') AND json_extract(e.metadata, '$.redacted') IS NULL
                            ORDER BY e.seq DESC LIMIT 1 OFFSET 1), '')
              || coalesce((SELECT substr(e.content, -1000) || char(10) FROM memories e
                            WHERE e.conversation_id = m.conversation_id AND e.seq < coalesce(m.context_before, m.seq)
                              AND e.kind NOT IN ('summary', 'fact') AND json_extract(e.metadata, '$.redacted') IS NULL
                            ORDER BY e.seq DESC LIMIT 1), '')
              || m.content
       END
  FROM memories m;

-- The memories whose context a change to memory `seq` changes, besides its own: the next two of
-- its conversation that take part in contexts, and the new versions of notes whose place is
-- before the second of those.
CREATE VIEW memory_context_followers (seq, follower) AS
SELECT x.seq, f.seq FROM memories x JOIN memories f ON f.seq IN (
    SELECT g.seq FROM memories g WHERE g.conversation_id = x.conversation_id AND g.seq > x.seq
       AND g.kind NOT IN ('summary', 'fact') AND json_extract(g.metadata, '$.redacted') IS NULL ORDER BY g.seq LIMIT 2)
UNION ALL
SELECT x.seq, n.seq FROM memories x JOIN memories n
    ON n.conversation_id = x.conversation_id AND n.context_before > x.seq
   AND n.context_before <= coalesce((
        SELECT g.seq FROM memories g WHERE g.conversation_id = x.conversation_id AND g.seq > x.seq
           AND g.kind NOT IN ('summary', 'fact') AND json_extract(g.metadata, '$.redacted') IS NULL ORDER BY g.seq LIMIT 1 OFFSET 1), 9223372036854775807);

-- The memories whose context left the keyword index in the statement now running, to be put
-- back (the triggers below). Empty between statements.
CREATE TABLE memory_contexts_pending (seq INTEGER PRIMARY KEY);

CREATE VIRTUAL TABLE memory_contexts_fts USING fts5 (
    context,
    content = 'memory_contexts',
    content_rowid = 'seq',
    tokenize = 'porter unicode61 remove_diacritics 2'
);
INSERT INTO memory_contexts_fts (memory_contexts_fts) VALUES ('rebuild');

-- The keyword index of contexts in step with the view. FTS5 removes an entry only when given
-- the text it indexed. So a BEFORE trigger takes the contexts a change will change out of the
-- index, as the view gives them before it, and lists them in memory_contexts_pending; the AFTER
-- trigger puts everything listed back, as the view gives it after the change, logs it in
-- memory_changes (for every process's in-memory keyword index) and empties the list. A context
-- already listed is not taken out twice: a delete cascades to facts between its two triggers.
--
-- A memory is inserted after those of its conversation (SQLite gives it the largest seq), so an
-- insert changes no other context. One given a smaller seq of its own is refused, as is moving
-- a memory to another conversation. (A BEFORE INSERT trigger sees a seq SQLite will choose as -1.)
CREATE TRIGGER memories_bi BEFORE INSERT ON memories
WHEN new.seq > 0 AND EXISTS (SELECT 1 FROM memories f WHERE f.conversation_id = new.conversation_id AND f.seq > new.seq)
BEGIN
    SELECT RAISE(ABORT, 'a memory must come after the memories of its conversation (its seq is too small)');
END;
CREATE TRIGGER memories_ai AFTER INSERT ON memories BEGIN
    INSERT INTO memories_fts (rowid, content) VALUES (new.seq, new.content);
    INSERT INTO memory_contexts_fts (rowid, context) SELECT seq, context FROM memory_contexts WHERE seq = new.seq;
END;
CREATE TRIGGER memories_moved BEFORE UPDATE OF conversation_id, context_before ON memories
WHEN old.conversation_id IS NOT new.conversation_id OR old.context_before IS NOT new.context_before
BEGIN
    SELECT RAISE(ABORT, 'a memory stays in its conversation, at its place');
END;

-- A conversation deleted: every context of it leaves the index at once, before the cascade deletes
-- its memories one by one (each delete would otherwise take its followers out and put them back).
CREATE TRIGGER conversations_contexts_bd BEFORE DELETE ON conversations BEGIN
    INSERT INTO memory_contexts_fts (memory_contexts_fts, rowid, context)
        SELECT 'delete', v.seq, v.context FROM memories m JOIN memory_contexts v ON v.seq = m.seq
         WHERE m.conversation_id = old.id AND m.seq NOT IN (SELECT seq FROM memory_contexts_pending);
END;

-- (The memory's conversation is gone while a conversation's delete cascades: nothing of it is in
-- the index any more.)
CREATE TRIGGER memories_bd BEFORE DELETE ON memories WHEN EXISTS (SELECT 1 FROM conversations c WHERE c.id = old.conversation_id) BEGIN
    INSERT INTO memory_contexts_fts (memory_contexts_fts, rowid, context)
        SELECT 'delete', v.seq, v.context FROM memory_contexts v
         WHERE (v.seq = old.seq OR v.seq IN (SELECT follower FROM memory_context_followers WHERE seq = old.seq))
           AND v.seq NOT IN (SELECT seq FROM memory_contexts_pending);
    INSERT OR IGNORE INTO memory_contexts_pending (seq)
        SELECT old.seq UNION ALL SELECT follower FROM memory_context_followers WHERE seq = old.seq;
END;
CREATE TRIGGER memories_ad AFTER DELETE ON memories BEGIN
    INSERT INTO memories_fts (memories_fts, rowid, content) VALUES ('delete', old.seq, old.content);
    DELETE FROM memory_contexts_pending WHERE seq = old.seq;
    INSERT INTO memory_changes (memory_seq) SELECT seq FROM memory_contexts_pending;
    INSERT INTO memory_contexts_fts (rowid, context)
        SELECT seq, context FROM memory_contexts WHERE seq IN (SELECT seq FROM memory_contexts_pending);
    DELETE FROM memory_contexts_pending;
END;

-- What a context is made of: a memory's content, its kind, and whether a retention mode redacted
-- it (its metadata). Other updates (superseded_by, spoken_of, other metadata) change no context.
CREATE TRIGGER memories_bu BEFORE UPDATE OF content, kind, metadata ON memories
WHEN (old.content IS NOT new.content OR old.kind IS NOT new.kind
       OR (json_extract(old.metadata, '$.redacted') IS NULL) <> (json_extract(new.metadata, '$.redacted') IS NULL))
  AND EXISTS (SELECT 1 FROM conversations c WHERE c.id = old.conversation_id)
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
  AND EXISTS (SELECT 1 FROM conversations c WHERE c.id = old.conversation_id)
BEGIN
    INSERT INTO memory_changes (memory_seq) SELECT seq FROM memory_contexts_pending;
    INSERT INTO memory_contexts_fts (rowid, context)
        SELECT seq, context FROM memory_contexts WHERE seq IN (SELECT seq FROM memory_contexts_pending);
    DELETE FROM memory_contexts_pending;
END;

-- Facts (ollama_mcp/facts.py): memories of kind 'fact' that the chat model extracts from a
-- conversation's notes and turns, when the conversation asks for them. A fact names the memory it
-- came from (metadata.source, its id); the store keeps that memory's seq beside it (source_seq),
-- so that deleting the source deletes its facts, whatever deletes it (forget, an ephemeral
-- retention, the conversation). A newer fact about the same subject and predicate supersedes the
-- older one, as update_memory's versions do; if the newer one goes, the older one is current again.
--
-- SQLite cannot change the kind CHECK in place, so memories is copied into a new table: the
-- documented procedure (https://sqlite.org/lang_altertable.html#otheralter), which ollama_mcp.db
-- runs with foreign keys off (dropping the old table must not cascade to vectors and tags) and
-- checks with PRAGMA foreign_key_check before it commits. Seqs are kept, so the keyword indexes
-- (keyed by seq) stay valid; the indexes and triggers on memories are created again.
CREATE TABLE memories_new (
    seq             INTEGER PRIMARY KEY,
    id              TEXT NOT NULL UNIQUE,
    conversation_id TEXT NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
    kind            TEXT NOT NULL DEFAULT 'note' CHECK (kind IN ('note', 'message', 'summary', 'fact')),
    role            TEXT,
    content         TEXT NOT NULL,
    content_hash    TEXT NOT NULL,
    context         TEXT NOT NULL,
    tags            TEXT NOT NULL DEFAULT '[]',
    metadata        TEXT NOT NULL DEFAULT '{}',
    created_at      TEXT NOT NULL,
    actor           TEXT,
    tool_calls      TEXT,
    tool_call_id    TEXT,
    superseded_by   TEXT,
    source_seq      INTEGER REFERENCES memories (seq) ON DELETE CASCADE,   -- facts: the memory they came from
    CHECK ((kind = 'fact') = (source_seq IS NOT NULL))
);
INSERT INTO memories_new (seq, id, conversation_id, kind, role, content, content_hash, context, tags, metadata,
    created_at, actor, tool_calls, tool_call_id, superseded_by)
    SELECT seq, id, conversation_id, kind, role, content, content_hash, context, tags, metadata,
        created_at, actor, tool_calls, tool_call_id, superseded_by FROM memories;
DROP TABLE memories;
ALTER TABLE memories_new RENAME TO memories;

CREATE INDEX memories_conversation ON memories (conversation_id, created_at);
CREATE INDEX memories_conversation_seq ON memories (conversation_id, seq);
CREATE INDEX memories_created ON memories (created_at);
CREATE INDEX memories_superseded ON memories (superseded_by) WHERE superseded_by IS NOT NULL;
CREATE UNIQUE INDEX memories_note_once ON memories (conversation_id, content_hash)
    WHERE kind = 'note' AND superseded_by IS NULL;
CREATE INDEX memories_source ON memories (source_seq) WHERE source_seq IS NOT NULL;
-- The current fact about a subject and predicate (metadata.fact_key, see ollama_mcp.records.fact_key).
CREATE INDEX memories_fact_key ON memories (json_extract(metadata, '$.fact_key'))
    WHERE kind = 'fact' AND superseded_by IS NULL;

CREATE TRIGGER memories_ai AFTER INSERT ON memories BEGIN
    INSERT INTO memories_fts (rowid, content) VALUES (new.seq, new.content);
    INSERT INTO memory_contexts_fts (rowid, context) VALUES (new.seq, new.context);
END;
CREATE TRIGGER memories_ad AFTER DELETE ON memories BEGIN
    INSERT INTO memories_fts (memories_fts, rowid, content) VALUES ('delete', old.seq, old.content);
    INSERT INTO memory_contexts_fts (memory_contexts_fts, rowid, context) VALUES ('delete', old.seq, old.context);
END;
CREATE TRIGGER memories_au AFTER UPDATE OF content ON memories BEGIN
    INSERT INTO memories_fts (memories_fts, rowid, content) VALUES ('delete', old.seq, old.content);
    INSERT INTO memories_fts (rowid, content) VALUES (new.seq, new.content);
END;
CREATE TRIGGER memories_context_au AFTER UPDATE OF context ON memories BEGIN
    INSERT INTO memory_contexts_fts (memory_contexts_fts, rowid, context) VALUES ('delete', old.seq, old.context);
    INSERT INTO memory_contexts_fts (rowid, context) VALUES (new.seq, new.context);
END;
CREATE TRIGGER memories_changes_ad AFTER DELETE ON memories BEGIN
    INSERT INTO memory_changes (memory_seq) VALUES (old.seq);
END;
CREATE TRIGGER memories_changes_au AFTER UPDATE OF content, context ON memories BEGIN
    INSERT INTO memory_changes (memory_seq) VALUES (old.seq);
END;
-- A fact whose superseding fact is deleted (with its source, or by forget) is current again.
CREATE TRIGGER memories_fact_ad AFTER DELETE ON memories WHEN old.kind = 'fact' BEGIN
    UPDATE memories SET superseded_by = NULL WHERE superseded_by = old.id AND kind = 'fact';
END;

-- How far facts were extracted: the seq of the last note or turn the facts job has read.
ALTER TABLE conversations ADD COLUMN facts_through INTEGER NOT NULL DEFAULT 0;

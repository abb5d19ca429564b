-- A conversation's integer key is kept by VACUUM (#57 item 1). It was SQLite's implicit rowid,
-- which "VACUUM may change ... in any tables that do not have an explicit INTEGER PRIMARY KEY"
-- (https://www.sqlite.org/lang_vacuum.html). Yet the key is kept outside the row: in each slot of
-- vector_blocks, and in every process's vector and keyword indexes, which filter a search of one
-- conversation by it. Renumbered, a search of one conversation would rank another's memories. As
-- an INTEGER PRIMARY KEY (`key`, PostgreSQL's name for it) it is the rowid, and VACUUM keeps it:
-- `ollama-mcp shrink` can then give an older store's free pages back.
CREATE TABLE conversations_new (
    key                INTEGER PRIMARY KEY,            -- the rowid: blocks and indexes keep it
    id                 TEXT NOT NULL UNIQUE,           -- UUID4
    name               TEXT,
    anonymous          INTEGER NOT NULL DEFAULT 0,     -- created implicitly by store_memory
    status             TEXT NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'completed')),
    metadata           TEXT NOT NULL DEFAULT '{}',     -- JSON object
    summary            TEXT,
    created_at         TEXT NOT NULL,                  -- ISO 8601 UTC, ...Z
    ended_at           TEXT,
    summary_status     TEXT NOT NULL DEFAULT 'none'
        CHECK (summary_status IN ('none', 'given', 'pending', 'done', 'failed')),
    rolling_summary    TEXT,
    summarized_through INTEGER NOT NULL DEFAULT 0,
    expires_at         TEXT,
    facts_through      INTEGER NOT NULL DEFAULT 0
);
INSERT INTO conversations_new (key, id, name, anonymous, status, metadata, summary, created_at, ended_at,
                               summary_status, rolling_summary, summarized_through, expires_at, facts_through)
    SELECT rowid, id, name, anonymous, status, metadata, summary, created_at, ended_at,
           summary_status, rolling_summary, summarized_through, expires_at, facts_through
      FROM conversations ORDER BY rowid;
DROP TABLE conversations;
PRAGMA legacy_alter_table = ON;
ALTER TABLE conversations_new RENAME TO conversations;
PRAGMA legacy_alter_table = OFF;
CREATE INDEX conversations_created ON conversations (created_at);
CREATE INDEX conversations_expires ON conversations (expires_at) WHERE expires_at IS NOT NULL;

-- (as schema 19 made it: a conversation's delete takes its contexts out of the keyword index)
CREATE TRIGGER conversations_contexts_bd BEFORE DELETE ON conversations BEGIN
    INSERT INTO memory_contexts_fts (memory_contexts_fts, rowid, context)
        SELECT 'delete', v.seq, v.context FROM memories m JOIN memory_contexts v ON v.seq = m.seq
         WHERE m.conversation_id = old.id AND m.seq NOT IN (SELECT seq FROM memory_contexts_pending);
END;

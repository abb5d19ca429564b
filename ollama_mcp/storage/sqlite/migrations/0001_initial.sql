-- Conversations, memories, their keyword index and their vectors.
-- Applied inside one BEGIN IMMEDIATE transaction by ollama_mcp.db.

CREATE TABLE conversations (
    id          TEXT PRIMARY KEY,                -- UUID4
    name        TEXT,
    anonymous   INTEGER NOT NULL DEFAULT 0,      -- created implicitly by store_memory
    status      TEXT NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'completed')),
    metadata    TEXT NOT NULL DEFAULT '{}',      -- JSON object
    summary     TEXT,
    created_at  TEXT NOT NULL,                   -- ISO 8601 UTC, ...Z
    ended_at    TEXT
);
CREATE INDEX conversations_created ON conversations (created_at);

-- Notes, transcript messages and summaries share one table so that they share one search,
-- one keyword index and one delete path.
CREATE TABLE memories (
    seq             INTEGER PRIMARY KEY,         -- rowid: keys the FTS index and the vectors
    id              TEXT NOT NULL UNIQUE,        -- UUID4, the id clients see
    conversation_id TEXT NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
    kind            TEXT NOT NULL DEFAULT 'note' CHECK (kind IN ('note', 'message', 'summary')),
    role            TEXT,
    content         TEXT NOT NULL,
    content_hash    TEXT NOT NULL,               -- sha256 of content: retries do not duplicate
    -- The content preceded by the memories just before it in its conversation: what the memory
    -- means in context ("yes, let's do that"). Searched by keywords and by meaning beside the
    -- content itself; bench/README.md has the measurements behind it.
    context         TEXT NOT NULL,
    tags            TEXT NOT NULL DEFAULT '[]',  -- JSON array, mirrored in memory_tags
    metadata        TEXT NOT NULL DEFAULT '{}',  -- JSON object
    created_at      TEXT NOT NULL
);
CREATE INDEX memories_conversation ON memories (conversation_id, created_at);
-- The memories just before a new one in its conversation (its context): a backwards range scan.
CREATE INDEX memories_conversation_seq ON memories (conversation_id, seq);
CREATE INDEX memories_created ON memories (created_at);
-- Storing the same note twice in one conversation returns the first one.
CREATE UNIQUE INDEX memories_note_once ON memories (conversation_id, content_hash) WHERE kind = 'note';

CREATE TABLE memory_tags (
    memory_seq  INTEGER NOT NULL REFERENCES memories (seq) ON DELETE CASCADE,
    tag         TEXT NOT NULL,
    PRIMARY KEY (tag, memory_seq)
) WITHOUT ROWID;
CREATE INDEX memory_tags_memory ON memory_tags (memory_seq);

-- One row per chunk of a memory's facet (its content, or its context) per embedding model.
-- Vectors of different models are never ranked together: every read names its model. Chunk
-- boundaries depend on the model's context length, so they live here with the vector.
-- AUTOINCREMENT keeps ids increasing, which lets another process's in-memory index fetch
-- just the rows it has not seen.
CREATE TABLE memory_embeddings (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    memory_seq  INTEGER NOT NULL REFERENCES memories (seq) ON DELETE CASCADE,
    model       TEXT NOT NULL,
    facet       TEXT NOT NULL CHECK (facet IN ('content', 'context')),
    chunk_index INTEGER NOT NULL,
    dim         INTEGER NOT NULL CHECK (dim > 0),
    vector      BLOB NOT NULL CHECK (length(vector) = 4 * dim),  -- float32 little-endian
    created_at  TEXT NOT NULL,
    UNIQUE (memory_seq, model, facet, chunk_index)
);
CREATE INDEX memory_embeddings_model ON memory_embeddings (model, id);

-- Keyword indexes over memories.content and memories.context, kept in step by triggers in
-- the same transaction as the row.
CREATE VIRTUAL TABLE memories_fts USING fts5 (
    content,
    content = 'memories',
    content_rowid = 'seq',
    tokenize = 'porter unicode61 remove_diacritics 2'
);
CREATE VIRTUAL TABLE memory_contexts_fts USING fts5 (
    context,
    content = 'memories',
    content_rowid = 'seq',
    tokenize = 'porter unicode61 remove_diacritics 2'
);
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

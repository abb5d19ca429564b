-- How conversations relate: one continues another (follow_up, from init_conversation's
-- follows), or their end summaries are alike (related; duplicate past a higher threshold, with
-- the cosine similarity as score). A row goes from the conversation that recorded it (the later
-- one) to the other; readers take both directions. Deleting either conversation deletes the row.
CREATE TABLE conversation_relations (
    conversation_id  TEXT NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
    related_id       TEXT NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
    kind             TEXT NOT NULL CHECK (kind IN ('follow_up', 'related', 'duplicate')),
    score            REAL,                                       -- summary similarity; NULL until known
    created_at       TEXT NOT NULL,
    PRIMARY KEY (conversation_id, related_id),
    CHECK (conversation_id != related_id)
);
CREATE INDEX conversation_relations_related ON conversation_relations (related_id);

-- The jobs table again, allowing two more kinds: relate (link a conversation to the ones its
-- summary resembles) and facts (extract facts from a transcript). SQLite cannot change a CHECK
-- in place; nothing references jobs, so it is copied into a new table.
CREATE TABLE jobs_new (
    id              INTEGER PRIMARY KEY,
    kind            TEXT NOT NULL CHECK (kind IN ('summarize', 'compact', 'relate', 'facts')),
    conversation_id TEXT NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
    state           TEXT NOT NULL DEFAULT 'queued' CHECK (state IN ('queued', 'running', 'done', 'failed')),
    attempts        INTEGER NOT NULL DEFAULT 0,
    run_after       TEXT NOT NULL,
    lease_until     TEXT,
    last_error      TEXT,
    created_at      TEXT NOT NULL,
    finished_at     TEXT
);
INSERT INTO jobs_new SELECT id, kind, conversation_id, state, attempts, run_after, lease_until, last_error,
    created_at, finished_at FROM jobs;
DROP TABLE jobs;
ALTER TABLE jobs_new RENAME TO jobs;
CREATE UNIQUE INDEX jobs_open_once ON jobs (kind, conversation_id) WHERE state IN ('queued', 'running');
CREATE INDEX jobs_due ON jobs (state, run_after);
CREATE INDEX jobs_conversation ON jobs (conversation_id);

-- Conversations that ended with a summary before this version are linked too, in the background.
INSERT INTO jobs (kind, conversation_id, run_after, created_at)
    SELECT 'relate', id, strftime('%Y-%m-%dT%H:%M:%f000Z', 'now'), strftime('%Y-%m-%dT%H:%M:%f000Z', 'now')
    FROM conversations WHERE status = 'completed' AND summary IS NOT NULL;

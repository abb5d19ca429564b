-- How conversations relate: one continues another (follow_up, from init_conversation's
-- follows), or their end summaries are alike (related; duplicate past a higher threshold, with
-- the cosine similarity as score). A row goes from the conversation that recorded it (the later
-- one) to the other; readers take both directions. Deleting either conversation deletes the row.
CREATE TABLE conversation_relations (
    conversation_id  text NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
    related_id       text NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
    kind             text NOT NULL CHECK (kind IN ('follow_up', 'related', 'duplicate')),
    score            double precision,
    created_at       text NOT NULL,
    PRIMARY KEY (conversation_id, related_id),
    CHECK (conversation_id != related_id)
);
CREATE INDEX conversation_relations_related ON conversation_relations (related_id);

-- Two more kinds of job: relate (link a conversation to the ones its summary resembles) and
-- facts (extract facts from a transcript).
ALTER TABLE jobs DROP CONSTRAINT jobs_kind_check;
ALTER TABLE jobs ADD CONSTRAINT jobs_kind_check CHECK (kind IN ('summarize', 'compact', 'relate', 'facts'));

-- Conversations that ended with a summary before this version are linked too, in the background.
INSERT INTO jobs (kind, conversation_id, run_after, created_at)
    SELECT 'relate', id, to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'),
        to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')
    FROM conversations WHERE status = 'completed' AND summary IS NOT NULL;

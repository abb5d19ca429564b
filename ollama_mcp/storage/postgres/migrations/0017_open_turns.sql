-- A turn being streamed (the REST API's status "open"): its text grows chunk by chunk here, where
-- nothing indexes or embeds it, until it is committed (it becomes a transcript message with the
-- same id, in the same transaction that deletes it from here) or aborted (kept, marked so).
CREATE TABLE open_turns (
    id              text PRIMARY KEY,
    conversation_id text NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
    fields          jsonb NOT NULL DEFAULT '{}',
    content         text NOT NULL DEFAULT '',
    state           text NOT NULL DEFAULT 'open' CHECK (state IN ('open', 'aborted')),
    created_at      text NOT NULL,
    updated_at      text NOT NULL
);
CREATE INDEX open_turns_conversation ON open_turns (conversation_id);

-- A turn being streamed (the REST API's status "open"): its text grows chunk by chunk here, where
-- nothing indexes or embeds it, until it is committed (it becomes a transcript message with the
-- same id, in the same transaction that deletes it from here) or aborted (kept, marked so).
CREATE TABLE open_turns (
    id              TEXT PRIMARY KEY,
    conversation_id TEXT NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
    fields          TEXT NOT NULL DEFAULT '{}',   -- the turn as opened: role, actor, to, model, adapter
    content         TEXT NOT NULL DEFAULT '',
    state           TEXT NOT NULL DEFAULT 'open' CHECK (state IN ('open', 'aborted')),
    created_at      TEXT NOT NULL,
    updated_at      TEXT NOT NULL
);
CREATE INDEX open_turns_conversation ON open_turns (conversation_id);

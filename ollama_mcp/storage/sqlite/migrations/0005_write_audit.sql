-- One row per write through any door (a tool, the agent, the CLI, an import, retention): who, what,
-- which ids, when, and a digest of the arguments, never their text. No foreign keys: the record
-- of a deletion must outlive what it deleted.
CREATE TABLE write_audit (
    id               INTEGER PRIMARY KEY,
    at               TEXT NOT NULL,
    door             TEXT NOT NULL,               -- tool, agent, cli, import, retention
    principal        TEXT,                        -- who, once requests carry one (HTTP tokens)
    action           TEXT NOT NULL,               -- store_memory, delete_conversation, import, ...
    conversation_id  TEXT,
    memory_id        TEXT,
    arguments_digest TEXT                         -- sha256 of the canonical JSON arguments
);
CREATE INDEX write_audit_at ON write_audit (at);

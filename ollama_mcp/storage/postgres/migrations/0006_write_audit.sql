-- One row per write through any door (a tool, the agent, the CLI, an import, retention): who, what,
-- which ids, when, and a digest of the arguments, never their text. No foreign keys: the record
-- of a deletion must outlive what it deleted.
CREATE TABLE write_audit (
    id               bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at               text NOT NULL,
    door             text NOT NULL,
    principal        text,
    action           text NOT NULL,
    conversation_id  text,
    memory_id        text,
    arguments_digest text
);
CREATE INDEX write_audit_at ON write_audit (at);

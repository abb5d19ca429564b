-- One row per step of ask_agent: what the local model asked to run, how risky it is, what was
-- decided (by the allowlist or the human) and what came of it. Arguments are stored as a digest:
-- the audit proves what ran without copying users' words into a second place.
CREATE TABLE agent_audit (
    id               INTEGER PRIMARY KEY,
    request_id       TEXT NOT NULL,               -- one ask_agent call
    conversation_id  TEXT NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
    step             INTEGER NOT NULL,            -- 1 = the first model reply
    tool             TEXT,                        -- NULL for the model's final answer
    arguments_digest TEXT,                        -- sha256 of the canonical JSON arguments
    risk             TEXT CHECK (risk IN ('low', 'high')),
    decision         TEXT NOT NULL CHECK (decision IN (
                         'ran', 'confirmed', 'declined', 'refused', 'not_allowed', 'unknown_tool',
                         'invalid_arguments', 'answered', 'step_limit', 'deadline')),
    outcome          TEXT NOT NULL,               -- 'ok' or the error text fed back to the model
    duration_ms      REAL NOT NULL,
    created_at       TEXT NOT NULL
);
CREATE INDEX agent_audit_conversation ON agent_audit (conversation_id, id);
CREATE INDEX agent_audit_request ON agent_audit (request_id);

-- What the user deleted of an imported history stays deleted (#79 item 6): importing the same
-- export again brought back a conversation or a turn deleted for a secret. An imported
-- conversation's and turn's ids are derived from the source's own ids (services/imports/chats.py),
-- so the id of each one deleted is kept here, never its text; an import leaves those ids out
-- unless `import --restore-deleted` asks for them back (which removes them from here).
CREATE TABLE deleted_imports (
    id         TEXT PRIMARY KEY,  -- a conversation's or a memory's id
    deleted_at TEXT NOT NULL
) WITHOUT ROWID;

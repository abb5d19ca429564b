-- What the user deleted of an imported history stays deleted: see schema/0026_deleted_imports.sql.
CREATE TABLE deleted_imports (
    id         text PRIMARY KEY,  -- a conversation's or a memory's id
    deleted_at text NOT NULL
);

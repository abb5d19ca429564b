-- A note's digest, as SQLite keeps it since its schema 24 (schema/0024_note_digest.sql): the
-- first 16 bytes of its text's sha256, the bytes themselves, and only on notes (the kind stored
-- once per conversation, by memories_note_once). Other kinds had a digest only for a redacted
-- turn's text, which is now computed when the turn is redacted (storage/memory_rules.py). The
-- digest is computed from the note's text, as memory_rules.text_digest computes it.
ALTER TABLE memories RENAME COLUMN content_hash TO note_digest;
ALTER TABLE memories ALTER COLUMN note_digest DROP NOT NULL;
DROP INDEX memories_note_once;
ALTER TABLE memories ALTER COLUMN note_digest TYPE bytea
    USING CASE WHEN kind = 'note' THEN substring(sha256(convert_to(content, 'UTF8')) FROM 1 FOR 16) END;
ALTER TABLE memories ADD CONSTRAINT memories_note_digest
    CHECK (CASE WHEN kind = 'note' THEN coalesce(octet_length(note_digest) = 16, false)
               ELSE note_digest IS NULL END);
CREATE UNIQUE INDEX memories_note_once ON memories (conversation_id, note_digest)
    WHERE kind = 'note' AND superseded_by IS NULL;

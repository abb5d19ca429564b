-- What each note and turn states about whom (#82, ollama_mcp/statements): its claims, read from
-- its words when it is written (``reading.kept_claims``; '' for none, NULL for a memory stored
-- before this schema, read later by the indexer's upkeep), and the subjects they name, kept here by
-- triggers so that a search finds every statement about the subjects of its hits with one indexed
-- read, and what else in the store names the same values (the kind of a value: Utrecht is a place). Which statement is current is worked out from them when asked (``chains.settle``): nothing
-- derived is stored, so deleting a memory mends its chain.
ALTER TABLE memories ADD COLUMN claims TEXT;
CREATE INDEX memories_claims_unread ON memories (seq) WHERE claims IS NULL;
CREATE TABLE memory_claims (
    key        TEXT NOT NULL,     -- 's:' and a subject the memory speaks of, 'v:' and a value it names
    memory_seq INTEGER NOT NULL REFERENCES memories (seq) ON DELETE CASCADE,
    PRIMARY KEY (key, memory_seq)
) WITHOUT ROWID;
CREATE INDEX memory_claims_memory ON memory_claims (memory_seq);
CREATE TRIGGER memories_claims_ai AFTER INSERT ON memories WHEN new.claims IS NOT NULL AND new.claims != '' BEGIN
    INSERT OR IGNORE INTO memory_claims (key, memory_seq)
        SELECT 's:' || json_extract(c.value, '$.subject'), new.seq FROM json_each(new.claims) c
        UNION SELECT 'v:' || json_extract(c.value, '$.value'), new.seq FROM json_each(new.claims) c
            WHERE json_extract(c.value, '$.value') IS NOT NULL
        UNION SELECT 'v:' || e.value, new.seq FROM json_each(new.claims) c, json_each(json_extract(c.value, '$.ends')) e;
END;
CREATE TRIGGER memories_claims_au AFTER UPDATE OF claims ON memories BEGIN
    DELETE FROM memory_claims WHERE memory_seq = old.seq;
    INSERT OR IGNORE INTO memory_claims (key, memory_seq)
        SELECT 's:' || json_extract(c.value, '$.subject'), new.seq FROM json_each(CASE WHEN new.claims IS NULL OR new.claims = '' THEN '[]' ELSE new.claims END) c
        UNION SELECT 'v:' || json_extract(c.value, '$.value'), new.seq FROM json_each(CASE WHEN new.claims IS NULL OR new.claims = '' THEN '[]' ELSE new.claims END) c
            WHERE json_extract(c.value, '$.value') IS NOT NULL
        UNION SELECT 'v:' || e.value, new.seq FROM json_each(CASE WHEN new.claims IS NULL OR new.claims = '' THEN '[]' ELSE new.claims END) c, json_each(json_extract(c.value, '$.ends')) e;
END;

-- The user's word on a supersession the store worked out (the browser view's review list,
-- ``ollama-mcp conflicts``): 'undone' (the older statement still holds: never superseded again)
-- or 'confirmed' (off the review list). Gone with either memory.
CREATE TABLE supersession_reviews (
    older_seq  INTEGER NOT NULL REFERENCES memories (seq) ON DELETE CASCADE,
    newer_seq  INTEGER NOT NULL REFERENCES memories (seq) ON DELETE CASCADE,
    verdict    TEXT NOT NULL CHECK (verdict IN ('undone', 'confirmed')),
    decided_at TEXT NOT NULL,
    PRIMARY KEY (older_seq, newer_seq)
) WITHOUT ROWID;
CREATE INDEX supersession_reviews_newer ON supersession_reviews (newer_seq);

-- What each note and turn states about whom (#82, ollama_mcp/statements): its claims, read from
-- its words when it is written and placed then (``reading.claims_read``, storage/sql/placing.py;
-- '' for none, NULL for a memory stored before this schema, read later in the background by
-- ``Superseding.claims_step``), and the keys below, kept by triggers so that a search reads every
-- statement of the slots its hits speak of (a subject's attribute) with one indexed read. Which
-- statement is current is worked out from them when asked (``chains.settle``): nothing derived
-- is stored, so deleting a memory mends its chain.
ALTER TABLE memories ADD COLUMN claims TEXT;
CREATE INDEX memories_claims_unread ON memories (seq) WHERE claims IS NULL;
CREATE TABLE memory_claims (
    -- 'a:<subject>|<attribute>': the memory speaks of that attribute of that subject (its slot);
    -- 'sv:<subject>|<value>': it says that value of the subject's ``attribute`` (or ends it);
    -- 'va:<value>': a value of that kind (Utrecht: a place someone lives). The last two let a
    -- write place a claim no word placed (storage/sql/placing.py).
    key        TEXT NOT NULL,
    attribute  TEXT NOT NULL,
    memory_seq INTEGER NOT NULL REFERENCES memories (seq) ON DELETE CASCADE,
    PRIMARY KEY (key, attribute, memory_seq)
) WITHOUT ROWID;
CREATE INDEX memory_claims_memory ON memory_claims (memory_seq);
CREATE TRIGGER memories_claims_ai AFTER INSERT ON memories WHEN new.claims IS NOT NULL AND new.claims != '' BEGIN
    INSERT OR IGNORE INTO memory_claims (key, attribute, memory_seq)
        SELECT 'a:' || json_extract(c.value, '$.subject') || '|' || json_extract(c.value, '$.attribute'), json_extract(c.value, '$.attribute'), new.seq FROM json_each(new.claims) c WHERE json_extract(c.value, '$.attribute') IS NOT NULL
        UNION SELECT 'sv:' || json_extract(c.value, '$.subject') || '|' || json_extract(c.value, '$.value'), json_extract(c.value, '$.attribute'), new.seq FROM json_each(new.claims) c WHERE json_extract(c.value, '$.attribute') IS NOT NULL AND json_extract(c.value, '$.value') IS NOT NULL
        UNION SELECT 'sv:' || json_extract(c.value, '$.subject') || '|' || e.value, json_extract(c.value, '$.attribute'), new.seq FROM json_each(new.claims) c, json_each(json_extract(c.value, '$.ends')) e WHERE json_extract(c.value, '$.attribute') IS NOT NULL
        UNION SELECT 'va:' || json_extract(c.value, '$.value'), json_extract(c.value, '$.attribute'), new.seq FROM json_each(new.claims) c
            WHERE json_extract(c.value, '$.attribute') IS NOT NULL AND json_extract(c.value, '$.attribute') NOT LIKE 'stable:%' AND json_extract(c.value, '$.value') IS NOT NULL
        UNION SELECT 'va:' || e.value, json_extract(c.value, '$.attribute'), new.seq FROM json_each(new.claims) c, json_each(json_extract(c.value, '$.ends')) e
            WHERE json_extract(c.value, '$.attribute') IS NOT NULL AND json_extract(c.value, '$.attribute') NOT LIKE 'stable:%';
END;
CREATE TRIGGER memories_claims_au AFTER UPDATE OF claims ON memories BEGIN
    DELETE FROM memory_claims WHERE memory_seq = old.seq;
    INSERT OR IGNORE INTO memory_claims (key, attribute, memory_seq)
        SELECT 'a:' || json_extract(c.value, '$.subject') || '|' || json_extract(c.value, '$.attribute'), json_extract(c.value, '$.attribute'), new.seq FROM json_each(CASE WHEN new.claims IS NULL OR new.claims = '' THEN '[]' ELSE new.claims END) c WHERE json_extract(c.value, '$.attribute') IS NOT NULL
        UNION SELECT 'sv:' || json_extract(c.value, '$.subject') || '|' || json_extract(c.value, '$.value'), json_extract(c.value, '$.attribute'), new.seq FROM json_each(CASE WHEN new.claims IS NULL OR new.claims = '' THEN '[]' ELSE new.claims END) c WHERE json_extract(c.value, '$.attribute') IS NOT NULL AND json_extract(c.value, '$.value') IS NOT NULL
        UNION SELECT 'sv:' || json_extract(c.value, '$.subject') || '|' || e.value, json_extract(c.value, '$.attribute'), new.seq FROM json_each(CASE WHEN new.claims IS NULL OR new.claims = '' THEN '[]' ELSE new.claims END) c, json_each(json_extract(c.value, '$.ends')) e WHERE json_extract(c.value, '$.attribute') IS NOT NULL
        UNION SELECT 'va:' || json_extract(c.value, '$.value'), json_extract(c.value, '$.attribute'), new.seq FROM json_each(CASE WHEN new.claims IS NULL OR new.claims = '' THEN '[]' ELSE new.claims END) c
            WHERE json_extract(c.value, '$.attribute') IS NOT NULL AND json_extract(c.value, '$.attribute') NOT LIKE 'stable:%' AND json_extract(c.value, '$.value') IS NOT NULL
        UNION SELECT 'va:' || e.value, json_extract(c.value, '$.attribute'), new.seq FROM json_each(CASE WHEN new.claims IS NULL OR new.claims = '' THEN '[]' ELSE new.claims END) c, json_each(json_extract(c.value, '$.ends')) e
            WHERE json_extract(c.value, '$.attribute') IS NOT NULL AND json_extract(c.value, '$.attribute') NOT LIKE 'stable:%';
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

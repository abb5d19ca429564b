-- What each note and turn states about whom, and the user's word on a supersession: see
-- sqlite/migrations/0027_claims.sql.
ALTER TABLE memories ADD COLUMN claims text;
CREATE INDEX memories_claims_unread ON memories (seq) WHERE claims IS NULL;
CREATE TABLE memory_claims (
    key        text NOT NULL,  -- 'a:<subject>|<attribute>', 'sv:<subject>|<value>', 'va:<value>'
    attribute  text NOT NULL,
    memory_seq bigint NOT NULL REFERENCES memories (seq) ON DELETE CASCADE,
    PRIMARY KEY (key, attribute, memory_seq)
);
CREATE INDEX memory_claims_memory ON memory_claims (memory_seq);
CREATE FUNCTION memory_claims_kept() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'UPDATE' THEN
        DELETE FROM memory_claims WHERE memory_seq = OLD.seq;
    END IF;
    IF NEW.claims IS NOT NULL AND NEW.claims <> '' THEN
        INSERT INTO memory_claims (key, attribute, memory_seq)
            SELECT DISTINCT k, a, NEW.seq FROM (
                SELECT 'a:' || (c ->> 'subject') || '|' || (c ->> 'attribute'), c ->> 'attribute'
                    FROM jsonb_array_elements(NEW.claims::jsonb) AS c WHERE c ->> 'attribute' IS NOT NULL
                UNION SELECT 'sv:' || (c ->> 'subject') || '|' || v, c ->> 'attribute'
                    FROM jsonb_array_elements(NEW.claims::jsonb) AS c,
                        LATERAL (SELECT c ->> 'value' UNION ALL SELECT jsonb_array_elements_text(c -> 'ends')) AS s (v)
                    WHERE c ->> 'attribute' IS NOT NULL AND v IS NOT NULL
                UNION SELECT 'va:' || v, c ->> 'attribute'
                    FROM jsonb_array_elements(NEW.claims::jsonb) AS c,
                        LATERAL (SELECT c ->> 'value' UNION ALL SELECT jsonb_array_elements_text(c -> 'ends')) AS s (v)
                    WHERE c ->> 'attribute' IS NOT NULL AND c ->> 'attribute' NOT LIKE 'stable:%' AND v IS NOT NULL
            ) AS keys (k, a)
            ON CONFLICT DO NOTHING;
    END IF;
    RETURN NULL;
END
$$;
CREATE TRIGGER memories_claims_ai AFTER INSERT ON memories
    FOR EACH ROW WHEN (NEW.claims IS NOT NULL AND NEW.claims <> '') EXECUTE FUNCTION memory_claims_kept();
CREATE TRIGGER memories_claims_au AFTER UPDATE OF claims ON memories
    FOR EACH ROW EXECUTE FUNCTION memory_claims_kept();

CREATE TABLE supersession_reviews (
    older_seq  bigint NOT NULL REFERENCES memories (seq) ON DELETE CASCADE,
    newer_seq  bigint NOT NULL REFERENCES memories (seq) ON DELETE CASCADE,
    verdict    text NOT NULL CHECK (verdict IN ('undone', 'confirmed')),
    decided_at text NOT NULL,
    PRIMARY KEY (older_seq, newer_seq)
);
CREATE INDEX supersession_reviews_newer ON supersession_reviews (newer_seq);

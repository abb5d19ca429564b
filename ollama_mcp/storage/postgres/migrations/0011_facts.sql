-- Facts (ollama_mcp/facts.py): memories of kind 'fact' that the chat model extracts from a
-- conversation's notes and turns, when the conversation asks for them. See schema/0010_facts.sql:
-- source_seq is the memory a fact came from (deleting it deletes its facts), and a fact whose
-- superseding fact is deleted is current again.
ALTER TABLE memories DROP CONSTRAINT memories_kind_check;
ALTER TABLE memories ADD CONSTRAINT memories_kind_check CHECK (kind IN ('note', 'message', 'summary', 'fact'));
ALTER TABLE memories ADD COLUMN source_seq bigint REFERENCES memories (seq) ON DELETE CASCADE;
ALTER TABLE memories ADD CONSTRAINT memories_fact_source CHECK ((kind = 'fact') = (source_seq IS NOT NULL));
CREATE INDEX memories_source ON memories (source_seq) WHERE source_seq IS NOT NULL;
CREATE INDEX memories_fact_key ON memories ((metadata ->> 'fact_key')) WHERE kind = 'fact' AND superseded_by IS NULL;

CREATE FUNCTION memories_fact_gone() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE memories SET superseded_by = NULL WHERE superseded_by = OLD.id AND kind = 'fact';
    RETURN NULL;
END;
$$;
CREATE TRIGGER memories_fact_ad AFTER DELETE ON memories
    FOR EACH ROW WHEN (OLD.kind = 'fact') EXECUTE FUNCTION memories_fact_gone();

-- How far facts were extracted: the seq of the last note or turn the facts job has read.
ALTER TABLE conversations ADD COLUMN facts_through bigint NOT NULL DEFAULT 0;

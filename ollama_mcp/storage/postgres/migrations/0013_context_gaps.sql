-- The memories a search must rank by their own vector, per model: those with a content vector
-- and no in-context vector yet (just stored: the backfill computes the in-context one; or their
-- context was rewritten). A search reads them by key instead of scanning the HNSW index of every
-- content vector for the few that lack a context vector: that scan was half of the meaning list's
-- time at 10k and found nothing once the backfill had caught up (bench/README.md).
--
-- Kept by a trigger in the transaction that writes or deletes the vectors, so no instance can see
-- a vector without its gap. Two transactions racing on one memory can leave a gap row whose
-- memory has its context vector: the ranker reads gaps only through a check of that vector, so
-- a stale row costs a lookup, never a wrong rank; and the next write of that memory's vectors
-- settles it.
CREATE TABLE context_gaps (
    model       text NOT NULL,
    memory_seq  bigint NOT NULL,
    PRIMARY KEY (model, memory_seq)
);

CREATE FUNCTION context_gaps_follow() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    -- (memory_seq, model, facet, ...) is memory_embeddings' unique key: each check is an index probe.
    IF TG_OP = 'INSERT' THEN
        IF NEW.facet = 'context' THEN
            DELETE FROM context_gaps WHERE model = NEW.model AND memory_seq = NEW.memory_seq;
        ELSIF NOT EXISTS (SELECT 1 FROM memory_embeddings c WHERE c.memory_seq = NEW.memory_seq
                          AND c.model = NEW.model AND c.facet = 'context') THEN
            INSERT INTO context_gaps (model, memory_seq) VALUES (NEW.model, NEW.memory_seq) ON CONFLICT DO NOTHING;
        END IF;
    ELSIF NOT EXISTS (SELECT 1 FROM memory_embeddings c WHERE c.memory_seq = OLD.memory_seq
                      AND c.model = OLD.model AND c.facet = 'content') THEN
        -- no content vector left (the memory deleted, or every vector of the model): nothing to rank
        DELETE FROM context_gaps WHERE model = OLD.model AND memory_seq = OLD.memory_seq;
    ELSIF OLD.facet = 'context' AND NOT EXISTS (SELECT 1 FROM memory_embeddings c WHERE c.memory_seq = OLD.memory_seq
                                                AND c.model = OLD.model AND c.facet = 'context') THEN
        -- its context was rewritten: ranked by its own vector until the backfill catches up
        INSERT INTO context_gaps (model, memory_seq) VALUES (OLD.model, OLD.memory_seq) ON CONFLICT DO NOTHING;
    END IF;
    RETURN NULL;
END $$;

-- A row trigger: vectors are written one statement per row (executemany), and an AFTER ROW trigger
-- of a multi-row delete runs once the statement has deleted all its rows, so it sees what is left.
CREATE TRIGGER context_gaps_follow AFTER INSERT OR DELETE ON memory_embeddings
    FOR EACH ROW EXECUTE FUNCTION context_gaps_follow();

INSERT INTO context_gaps (model, memory_seq)
SELECT DISTINCT e.model, e.memory_seq FROM memory_embeddings e
WHERE e.facet = 'content' AND NOT EXISTS (
    SELECT 1 FROM memory_embeddings c WHERE c.memory_seq = e.memory_seq AND c.model = e.model AND c.facet = 'context');

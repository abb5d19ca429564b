-- A folded vector's row as slim as what still asks for it (#57 item 1, docs/one-copy-vectors.md).
-- Once its vector is in a block, a row of memory_embeddings says only that the memory has that
-- vector and where it is (the statements asking whether a memory has a vector, deleting a memory's
-- vectors, and the ON DELETE CASCADE work on it). Three things of it were kept for nothing:
--   * `created_at`: nothing read it (24 bytes a row);
--   * the index on (model, id): what asked it now asks the blocks, the index of rows not folded
--     yet, or SQLite's AUTOINCREMENT counter (storage/sqlite/vectors.py);
--   * the index on (block_id, slot): the rows of a block are its slots' ids, less its dead slots.

-- A block's dead slots (rows deleted after the fold: a memory deleted, a context rewritten,
-- reembed --force) are listed here, not counted in vector_blocks.dead: updating the count
-- rewrote the block's whole row, 1.5 MB at 1,024 vectors of 384 dimensions, once per deleted
-- vector. `dead` stays 0 from here on. A block's dead slots go with it.
CREATE TABLE vector_block_dead (
    block_id INTEGER NOT NULL,
    slot     INTEGER NOT NULL,
    PRIMARY KEY (block_id, slot)
) WITHOUT ROWID;
INSERT INTO vector_block_dead (block_id, slot)
    WITH RECURSIVE slots (i) AS (
        SELECT 0 UNION ALL SELECT i + 1 FROM slots WHERE i + 1 < (SELECT coalesce(max(n), 0) FROM vector_blocks)
    )
    SELECT b.id, s.i FROM vector_blocks b JOIN slots s ON s.i < b.n
     WHERE b.dead > 0
       AND NOT EXISTS (SELECT 1 FROM memory_embeddings e WHERE e.block_id = b.id AND e.slot = s.i);
UPDATE vector_blocks SET dead = 0 WHERE dead > 0;

-- The table again without `created_at`, its rows copied (ids kept: blocks name rows by id), and
-- AUTOINCREMENT's counter kept (a deleted newest row's id is never given again).
CREATE TEMP TABLE migration_0020_sequence AS SELECT seq FROM sqlite_sequence WHERE name = 'memory_embeddings';
CREATE TABLE memory_embeddings_new (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    memory_seq  INTEGER NOT NULL REFERENCES memories (seq) ON DELETE CASCADE,
    model       TEXT NOT NULL,
    facet       TEXT NOT NULL CHECK (facet IN ('content', 'context')),
    chunk_index INTEGER NOT NULL,
    dim         INTEGER NOT NULL CHECK (dim > 0),
    vector      BLOB CHECK (length(vector) = 4 * dim),  -- float32 little-endian; NULL once folded
    block_id    INTEGER,  -- folded: the vector is slot `slot` of vector_blocks `block_id`
    slot        INTEGER,
    UNIQUE (memory_seq, model, facet, chunk_index)
);
INSERT INTO memory_embeddings_new (id, memory_seq, model, facet, chunk_index, dim, vector, block_id, slot)
    SELECT id, memory_seq, model, facet, chunk_index, dim, vector, block_id, slot FROM memory_embeddings ORDER BY id;
DROP TABLE memory_embeddings;
ALTER TABLE memory_embeddings_new RENAME TO memory_embeddings;
UPDATE sqlite_sequence SET seq = max(seq, (SELECT seq FROM temp.migration_0020_sequence))
 WHERE name = 'memory_embeddings' AND EXISTS (SELECT 1 FROM temp.migration_0020_sequence);
INSERT INTO sqlite_sequence (name, seq)
    SELECT 'memory_embeddings', seq FROM temp.migration_0020_sequence
     WHERE NOT EXISTS (SELECT 1 FROM sqlite_sequence WHERE name = 'memory_embeddings');
DROP TABLE temp.migration_0020_sequence;

-- The rows still holding their vector, per model: what the fold, a load and a count look for.
CREATE INDEX memory_embeddings_unfolded ON memory_embeddings (model, facet, dim, id) WHERE block_id IS NULL;

CREATE TRIGGER memory_embeddings_folded_delete AFTER DELETE ON memory_embeddings
WHEN old.block_id IS NOT NULL
BEGIN
    INSERT OR IGNORE INTO vector_block_dead (block_id, slot) VALUES (old.block_id, old.slot);
END;

CREATE TRIGGER vector_blocks_dropped AFTER DELETE ON vector_blocks
BEGIN
    DELETE FROM vector_block_dead WHERE block_id = old.id;
END;

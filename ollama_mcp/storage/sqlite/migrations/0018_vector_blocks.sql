-- One copy of each vector (#57, docs/one-copy-vectors.md). A vector is written as today, a float32
-- row of memory_embeddings in the store's transaction; the upkeep later folds a model's rows, a
-- block of them at a time, into one vector_blocks row at the precision search holds them in, and
-- empties their `vector`. The slim row stays: every statement that asks whether a memory has a
-- vector, deletes a memory's vectors (and the ON DELETE CASCADE) works on it unchanged. A new
-- process reads the blocks (a few large blobs) instead of a vector file beside the database.
CREATE TABLE vector_blocks (
    id      INTEGER PRIMARY KEY,
    model   TEXT NOT NULL,
    facet   TEXT NOT NULL CHECK (facet IN ('content', 'context')),
    dim     INTEGER NOT NULL CHECK (dim > 0),
    dtype   TEXT NOT NULL CHECK (dtype IN ('<f4', '<f2')),        -- little-endian float32 or float16
    n       INTEGER NOT NULL CHECK (n > 0),                       -- slots
    dead    INTEGER NOT NULL DEFAULT 0 CHECK (dead BETWEEN 0 AND n),  -- slots whose row was deleted since
    -- per slot: memory_embeddings.id, memory seq, conversation key (int64 each), then kind (int8)
    slots   BLOB NOT NULL CHECK (length(slots) = 25 * n),
    vectors BLOB NOT NULL CHECK (length(vectors) = n * dim * (CASE dtype WHEN '<f4' THEN 4 ELSE 2 END))
);
CREATE INDEX vector_blocks_model ON vector_blocks (model, id);

-- `vector` may now be NULL: the row's vector is slot `slot` of block `block_id`. SQLite cannot
-- alter a column's constraints, and rebuilding the table would copy every vector of a large store
-- inside this migration. Dropping a NOT NULL leaves every stored row as it is, and SQLite documents
-- that edit of the schema's text for exactly that case
-- (https://www.sqlite.org/lang_altertable.html#otheralter). The edit keeps the text's length (the
-- ALTERs after it place their columns by offsets into it), and the ALTERs bump the schema cookie,
-- so every connection reads the new text. The CHECK stays: on NULL it yields NULL, which passes.
PRAGMA writable_schema = ON;
UPDATE sqlite_schema
   SET sql = replace(sql, 'vector      BLOB NOT NULL CHECK (length(vector) = 4 * dim),',
                          'vector      BLOB          CHECK (length(vector) = 4 * dim),')
 WHERE type = 'table' AND name = 'memory_embeddings';
PRAGMA writable_schema = OFF;
ALTER TABLE memory_embeddings ADD COLUMN block_id INTEGER;
ALTER TABLE memory_embeddings ADD COLUMN slot INTEGER;
-- The edit took (a store whose table text differs is refused here, unchanged, not half-migrated).
CREATE TEMP TABLE migration_0018_check (edited INTEGER NOT NULL CHECK (edited = 1));
INSERT INTO migration_0018_check
    SELECT instr(sql, 'BLOB          CHECK (length(vector) = 4 * dim)') > 0
      FROM sqlite_schema WHERE type = 'table' AND name = 'memory_embeddings';
DROP TABLE migration_0018_check;

-- The rows still holding their vector, per model (what the fold and a load look for), and the
-- folded rows per block (what a load asks of a block with deleted slots, and what compaction moves).
CREATE INDEX memory_embeddings_unfolded ON memory_embeddings (model, facet, dim, id) WHERE block_id IS NULL;
CREATE INDEX memory_embeddings_block ON memory_embeddings (block_id, slot) WHERE block_id IS NOT NULL;

-- A folded row deleted (its memory deleted, its context rewritten, reembed --force): its slot is dead.
CREATE TRIGGER memory_embeddings_folded_delete AFTER DELETE ON memory_embeddings
WHEN old.block_id IS NOT NULL
BEGIN
    UPDATE vector_blocks SET dead = dead + 1 WHERE id = old.block_id;
END;

-- The in-memory keyword index (ollama_mcp/keywords.py) of every process on this file stays
-- current by reading what changed since it last looked: new memories are those with a higher
-- seq, and this log names every memory deleted or rewritten in place (a context rewritten when
-- a neighbour is deleted). Seqs can be reused after a delete, so "higher seq" alone would miss
-- a replaced row; AUTOINCREMENT keeps ids increasing, so a reader asks for ids it has not seen.
-- Old rows are pruned by the server's upkeep; a reader that fell behind the pruning rebuilds.
CREATE TABLE memory_changes (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    memory_seq  INTEGER NOT NULL                  -- no foreign key: the memory may be gone
);
CREATE TRIGGER memories_changes_ad AFTER DELETE ON memories BEGIN
    INSERT INTO memory_changes (memory_seq) VALUES (old.seq);
END;
CREATE TRIGGER memories_changes_au AFTER UPDATE OF content, context ON memories BEGIN
    INSERT INTO memory_changes (memory_seq) VALUES (old.seq);
END;

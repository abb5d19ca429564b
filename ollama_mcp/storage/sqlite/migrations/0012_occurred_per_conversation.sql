-- What happened in a conversation from a time on, in time order: the memories a search reads for
-- what was said of a short window afterwards (ranking.told_range). Without it SQLite walks the
-- conversation by seq and sorts it: 50 rows of a 10k-memory conversation took 7.3 ms; with it
-- 0.08 ms (bench/README.md). A search of every conversation reads by memories_occurred.
CREATE INDEX memories_conversation_occurred ON memories (conversation_id, occurred_at);

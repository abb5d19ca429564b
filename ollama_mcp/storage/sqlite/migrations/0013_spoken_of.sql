-- The times a memory's words name, read against when it happened (when.times_named): "start/end"
-- pairs, "" for none. A search naming a time checks each of its candidates against them; parsing
-- the candidates' text instead cost 50-160 µs each, up to 600 of them (bench/README.md). Written
-- with every row from now on; NULL for the memories stored before, which a search parses as it did
-- until the background has read them (memories_spoken_unread finds them, and empties as it goes).
ALTER TABLE memories ADD COLUMN spoken_of TEXT;
CREATE INDEX memories_spoken_unread ON memories (seq) WHERE spoken_of IS NULL;

-- The times a memory's words name are read by a wider grammar (see schema/0017_reread_times.sql):
-- forgotten, and read again in the background.
UPDATE memories SET spoken_of = NULL WHERE spoken_of IS NOT NULL;

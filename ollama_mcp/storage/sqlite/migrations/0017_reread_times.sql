-- The times a memory's words name are read by a wider grammar (when.py: seasons, quarters, parts
-- of a year, ranges of months or years, "the week before last", "a fortnight ago", "the previous
-- month", "mid-July"): what was kept under the narrower one is forgotten, and the background reads
-- every memory again (memories_spoken_unread); until then a search parses a candidate's text, as it
-- did before times were kept. No trigger watches spoken_of, so no keyword index is rewritten.
UPDATE memories SET spoken_of = NULL WHERE spoken_of IS NOT NULL;

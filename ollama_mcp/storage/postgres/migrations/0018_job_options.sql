-- What a job was asked to do beyond its kind, as JSON (the REST API's on-demand requests): the
-- turn to summarize, compact or extract facts through ({"through": id, "through_seq": n}) and a
-- compaction strategy for this run only ({"strategy": "hierarchical"}). NULL: the job's defaults.
ALTER TABLE jobs ADD COLUMN options text;

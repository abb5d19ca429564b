-- A memory's context under the name SQLite gives it (SQLite computes it by a view of that name,
-- schema/0019_context_view.sql; PostgreSQL keeps storing it in memories.context, which its
-- keyword index of contexts reads). SQL and tests that read a context read it here on both.
CREATE VIEW memory_contexts (seq, context) AS SELECT seq, context FROM memories;

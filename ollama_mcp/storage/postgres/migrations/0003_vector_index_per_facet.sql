-- One HNSW index per (model, dimension, facet) instead of per (model, dimension): the ranker asks
-- for the nearest vectors of one facet, and a scan filtered to a facet after the index stops at
-- ef_search rows, half of them of the other facet (recall@10 0.72 at 100k memories, bench/README.md).
-- Each old index is replaced by its two successors, named as ollama_mcp.postgres.base names them.
DO $$
DECLARE
    old record;
    facet text;
BEGIN
    FOR old IN
        SELECT c.relname AS name,
               replace(substring(pg_get_expr(i.indpred, i.indrelid) FROM 'model = ''(.*?)''::text'), '''''', '''') AS model,
               substring(pg_get_indexdef(i.indexrelid) FROM 'vector\((\d+)\)')::integer AS dim
        FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
        WHERE c.relname LIKE 'memory_embeddings_hnsw_%'
          AND pg_get_expr(i.indpred, i.indrelid) NOT LIKE '%facet%'
    LOOP
        EXECUTE format('DROP INDEX %I', old.name);
        FOREACH facet IN ARRAY ARRAY['content', 'context'] LOOP
            EXECUTE format(
                'CREATE INDEX IF NOT EXISTS %I ON memory_embeddings USING hnsw ((vector::vector(%s)) vector_cosine_ops)'
                ' WITH (m = 16, ef_construction = 128) WHERE model = %L AND dim = %s AND facet = %L',
                'memory_embeddings_hnsw_' || left(encode(sha256(convert_to(old.model || '/' || old.dim || '/' || facet, 'UTF8')), 'hex'), 16),
                old.dim, old.model, old.dim, facet);
        END LOOP;
    END LOOP;
END
$$;

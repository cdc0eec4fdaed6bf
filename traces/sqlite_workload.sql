-- The workload of traces/sqlite.ltr.gz (docs/traces.md): an in-memory table filled, indexed,
-- aggregated and half deleted, single-threaded. randomblob makes the values differ per run;
-- the sizes are what matter and they follow the same distribution every time.
CREATE TABLE t(id INTEGER PRIMARY KEY, k TEXT, v BLOB);
WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c WHERE x < 20000)
INSERT INTO t SELECT x, hex(randomblob(8)), randomblob(abs(random()) % 300) FROM c;
CREATE INDEX tk ON t(k);
SELECT count(*), sum(length(v)) FROM t GROUP BY substr(k, 1, 2) ORDER BY 1 DESC LIMIT 1;
DELETE FROM t WHERE id % 2 = 0;
VACUUM;
SELECT count(*) FROM t;

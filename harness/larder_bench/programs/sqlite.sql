-- The `programs` suite's database workload (harness/larder_bench/programs/__init__.py): an
-- in-memory shop of @rows orders run through the SQL a small web application sends. Every value
-- is computed from the row number (no random()), so the output is the same on every run and
-- under every allocator: the harness's check compares it.
CREATE TABLE customer(id INTEGER PRIMARY KEY, name TEXT, city TEXT, joined INTEGER);
CREATE TABLE product(id INTEGER PRIMARY KEY, title TEXT, price INTEGER, tags TEXT);
CREATE TABLE orders(id INTEGER PRIMARY KEY, customer INTEGER, day INTEGER, note TEXT);
CREATE TABLE line(orderid INTEGER, product INTEGER, qty INTEGER, PRIMARY KEY(orderid, product)) WITHOUT ROWID;

WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < @rows / 10)
INSERT INTO customer SELECT x, printf('customer-%06d-%s', x, substr('abcdefghijklmnopqrstuvwxyz', 1 + x % 26)),
       printf('city-%d', (x * 7919) % 97), (x * 104729) % 3650 FROM c;
WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 2000)
INSERT INTO product SELECT x, printf('product %d %s', x, substr(hex(x * 2654435761), 1, 1 + x % 12)),
       100 + (x * 7907) % 20000, json_array('t' || (x % 13), 't' || (x % 7), 't' || (x % 5)) FROM c;
WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < @rows)
INSERT INTO orders SELECT x, 1 + (x * 2654435761) % (@rows / 10), (x * 40503) % 365,
       CASE WHEN x % 5 = 0 THEN printf('%.*c', 20 + (x * 31) % 900, 'n') ELSE NULL END FROM c;
INSERT INTO line SELECT o.id, 1 + (o.id * k.k * 7919) % 2000, 1 + (o.id + k.k) % 9
  FROM orders o, (SELECT 1 AS k UNION ALL SELECT 2 UNION ALL SELECT 3 UNION ALL SELECT 4) k
  WHERE k.k <= 1 + o.id % 4;

CREATE INDEX orders_customer ON orders(customer, day);
CREATE INDEX customer_city ON customer(city);
CREATE INDEX line_product ON line(product);

-- Reports: joins, grouping, sorting, window functions, string and JSON building.
SELECT c.city, count(DISTINCT o.id), sum(l.qty * p.price)
  FROM customer c JOIN orders o ON o.customer = c.id JOIN line l ON l.orderid = o.id JOIN product p ON p.id = l.product
  GROUP BY c.city ORDER BY 3 DESC LIMIT 5;
SELECT p.title, sum(l.qty) AS n, rank() OVER (ORDER BY sum(l.qty) DESC) FROM line l JOIN product p ON p.id = l.product
  GROUP BY p.id ORDER BY n DESC, p.id LIMIT 5;
SELECT length(group_concat(name, ',')) FROM (SELECT name FROM customer ORDER BY city, name);
SELECT length(json_group_array(json_object('id', o.id, 'day', o.day, 'lines',
         (SELECT json_group_array(json_object('p', product, 'q', qty)) FROM line WHERE orderid = o.id))))
  FROM orders o WHERE o.id % 3 = 0;
SELECT day, count(*), sum(length(note)) FROM orders GROUP BY day ORDER BY 2 DESC, 1 LIMIT 3;

-- The application's writes: price changes, cancelled orders, a compaction.
UPDATE product SET price = price + 1, tags = json_insert(tags, '$[#]', 'sale') WHERE id % 3 = 0;
DELETE FROM line WHERE orderid IN (SELECT id FROM orders WHERE day % 4 = 0);
DELETE FROM orders WHERE day % 4 = 0;
UPDATE orders SET note = printf('%.*c', 100 + id % 400, 'u') WHERE id % 7 = 0;
VACUUM;
SELECT count(*), sum(qty) FROM line;
SELECT count(*), sum(length(note)) FROM orders;
PRAGMA integrity_check;

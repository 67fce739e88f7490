-- backend: test:?yes_if=drama
-- mode: connect

-- statement
CREATE TABLE r AS SELECT * FROM (VALUES (1, 'x'), (2, 'y')) v(id, text);

-- statement
CREATE TABLE g AS SELECT * FROM (VALUES ('drama'), ('comedy')) v(genre);

-- query
SELECT r.id, g.genre FROM r JOIN g ON sem_join('{r.text} is a {g.genre}') ORDER BY 1, 2;
-- expect
-- 1 | drama
-- 2 | drama

-- query
SELECT sem_agg('All of {text}') FROM r;
-- expect
-- All of - x -

-- error: AmbiguousColumnError: ambiguous
SELECT * FROM r a, r b WHERE sem_join('{text} and {text}');

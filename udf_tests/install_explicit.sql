-- backend: test:?yes_if=good
-- mode: install

-- query
SELECT sem_filter('{0} is good, {1}', a, b), sem_map_integer('{0}', a) FROM (VALUES ('good', 'b'), ('no', NULL)) v(a, b);
-- expect
-- true | 4
-- NULL | 2

-- query
SELECT sem_agg('{0}', a) FROM (VALUES ('p'), ('q')) v(a);
-- expect
-- - p - q

-- error: InvalidInputException: not bound
SELECT sem_filter('{a} ok') FROM (VALUES ('x')) v(a);

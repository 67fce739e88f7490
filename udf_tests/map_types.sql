-- backend: test:
-- mode: connect

-- statement
CREATE TABLE t AS SELECT * FROM (VALUES (1, 'one two three four'), (2, NULL)) v(id, text);

-- query
SELECT sem_map('{text}'), sem_map('{text}', 'INTEGER'), sem_map('{text}', 'DOUBLE') FROM t ORDER BY id;
-- expect
-- one two three four | 18 | 1.8
-- NULL | NULL | NULL

-- query
SELECT sem_map('{text}', 'VARCHAR[]'), sem_map('{text}', 'STRUCT(n BIGINT, w VARCHAR[])') FROM t WHERE id = 1;
-- expect
-- ['one', 'two', 'three'] | {'n': 18, 'w': ['one', 'two', 'three']}

-- error: OutputTypeError: unsupported output type 'TIMESTAMP'
SELECT sem_map('{text}', 'TIMESTAMP') FROM t;

-- backend: test:?yes_if=good|great
-- mode: connect

-- statement
CREATE TABLE reviews AS SELECT * FROM (VALUES
    (1, 'a good film', 'drama'), (2, 'a bad film', 'drama'), (3, 'great fun', 'comedy'),
    (4, NULL, 'comedy')) v(id, text, genre);

-- query
SELECT id FROM reviews WHERE sem_filter('{text} is positive') ORDER BY id;
-- expect
-- 1
-- 3

-- query
SELECT id, sem_filter('{reviews.text} is positive') FROM reviews ORDER BY id;
-- expect
-- 1 | true
-- 2 | false
-- 3 | true
-- 4 | NULL

-- query
SELECT genre, count(*) FILTER (WHERE sem_filter('{text} is positive')) FROM reviews GROUP BY genre ORDER BY genre;
-- expect
-- comedy | 1
-- drama | 1

-- error: UnknownColumnError: unknown column {body}
SELECT sem_filter('{body} is positive') FROM reviews;

-- error: TemplateError: unclosed
SELECT sem_filter('{text is positive') FROM reviews;

-- sem_filter in WHERE, beside a relational predicate (which DuckDB runs first).
SELECT review_id, movie, text
FROM reviews
WHERE review_id <= 60 AND length(text) < 100
  AND sem_filter('Is this movie review positive? {text}')
ORDER BY review_id
LIMIT 8;

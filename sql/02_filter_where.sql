-- sem_filter in WHERE, beside a relational predicate (which DuckDB runs first).
SELECT review_id, movie, text
FROM reviews
WHERE review_id <= 60 AND length(text) < 100
  AND sem_filter('The movie review "{text}" is positive')
ORDER BY review_id
LIMIT 8;

-- sem_filter in SELECT: does the model think each review is positive?
-- Scored: `predicted` against the critics' fresh/rotten label.
SELECT review_id,
       fresh AS label,
       sem_filter('Is this movie review positive? {text}') AS predicted
FROM (SELECT * FROM reviews ORDER BY review_id LIMIT 40);

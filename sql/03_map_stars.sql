-- Typed sem_map: an INTEGER per row, parsed and validated.
-- Scored: 3 stars or more counts as a positive review.
SELECT review_id, stars, stars >= 3 AS predicted, fresh AS label
FROM (
    SELECT review_id, fresh,
           sem_map('Rate the movie review "{text}" from 1 (awful) to 5 (excellent)', 'INTEGER') AS stars
    FROM (SELECT * FROM reviews ORDER BY review_id LIMIT 12)
);

-- sem_map to a STRUCT: several typed fields from one call.
SELECT review_id,
       sem_map('From the movie review "{text}", give its tone (positive or negative) and one key word',
               'STRUCT(tone VARCHAR, keyword VARCHAR)') AS facts
FROM (SELECT * FROM reviews ORDER BY review_id LIMIT 5);

-- sem_join over both sides: is this review about the movie with this plot?
-- Scored: `predicted` against whether the review's movie is the plot's movie.
WITH r AS (SELECT * FROM reviews WHERE movie IN (SELECT movie FROM plots ORDER BY movie LIMIT 4)
           ORDER BY review_id LIMIT 6),
     p AS (SELECT * FROM plots ORDER BY movie LIMIT 4)
SELECT r.review_id, p.movie,
       r.movie = p.movie AS label,
       sem_join('Is this review about the movie with this plot? Review: {r.text} Plot: {p.plot}') AS predicted
FROM r, p
ORDER BY r.review_id, p.movie;

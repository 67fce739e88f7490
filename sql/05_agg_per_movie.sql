-- sem_agg: one summary per group.
SELECT movie, count(*) AS reviews,
       sem_agg('In one sentence, what do these critics think of the movie? {text}') AS consensus
FROM reviews
WHERE movie IN (SELECT movie FROM reviews GROUP BY movie ORDER BY count(*) DESC, movie LIMIT 2)
GROUP BY movie
ORDER BY movie;

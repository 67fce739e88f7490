"""The query set, in the spirit of SeqoFlow's Q0 to Q8, over the installed datasets.

From one semantic operator (Q0) to several, with joins (Q4, Q8), a map feeding a filter (Q5, a
data dependency), an aggregate (Q6), and operators of very different cost and selectivity (Q1,
Q7: a long email body against a short subject line). Each query has two hand-written SQL
orders: ``sql`` (Static-1, the order a person would likely write) and ``alt`` (Static-2,
another plausible order, planned as written). Filters in one WHERE run in the order written
(Q1, Q2, Q7); a filter written in a derived table runs below the join (Q4, Q8), and a
``sem_map`` written in a derived table runs before the outer filters (Q3, Q5). Derived tables
keep the flat query's aliases, so Static-2 is one of the flat query's equivalent plans. Q0 and
Q6 have a single plan: their ``alt`` is their ``sql``. ``truth`` is the SQL of the correct
answer over the label columns.

This module is plain data (no duckdb-sem import): the LOTUS side reads it from its own venv.
Every instruction carries a phrase the oracle (``oracle.py``) recognises in any prompt format.
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["QUERIES", "Query", "by_name"]

# Instruction phrases (the oracle keys on these; keep them distinct from each other).
POSITIVE = "is a positive movie review"
ABOUT = "is about the movie whose plot is"
ADVERT = "is unsolicited advertising"
REPLY = "is a reply in an ongoing conversation"
URL = "points the reader to a web address"
GAME = "describes a game"
CONVERT = "converts data between formats"
USED_FOR = "is used for this purpose"
TOPIC = "Classify into one topic (computers, science, food, love, politics, sports)"
MAIN_USE = "Name in two words the main use of the software"
VIEW_EDIT = "involves viewing or editing"
COMPUTERS = "is about computers or programming"
SUMMARY = "Summarize the topics of these email subjects"


@dataclass(frozen=True)
class Query:
    name: str
    dataset: str
    tables: tuple[str, ...]
    sql: str  # Static-1: as written
    alt: str  # Static-2: another hand-written order
    truth: str  # the correct answer from the label columns
    key: tuple[str, ...]  # result columns compared with the truth
    note: str = ""
    lotus: bool = True  # has a LOTUS counterpart in lotus_side.py
    scale: dict[str, int] = field(default_factory=dict)


QUERIES: tuple[Query, ...] = (
    Query(
        "Q0", "rt", ("reviews",),
        f"SELECT id FROM reviews WHERE sem_filter('{{text}} {POSITIVE}')",
        f"SELECT id FROM reviews WHERE sem_filter('{{text}} {POSITIVE}')",
        "SELECT id FROM reviews WHERE fresh",
        ("id",), "one filter",
    ),
    Query(
        "Q1", "spam", ("emails",),
        f"SELECT id FROM emails WHERE sem_filter('{{body}} {ADVERT}') "
        f"AND sem_filter('{{subject}} {REPLY}')",
        f"SELECT id FROM emails WHERE sem_filter('{{subject}} {REPLY}') "
        f"AND sem_filter('{{body}} {ADVERT}')",
        "SELECT id FROM emails WHERE spam AND regexp_matches(subject, '^\\[e\\d+\\] (Re|RE|re):')",
        ("id",), "two filters, long body vs short subject",
    ),
    Query(
        "Q2", "debian", ("packages",),
        f"SELECT id FROM packages WHERE section <> 'libs' "
        f"AND sem_filter('The software {{description}} {VIEW_EDIT}') "
        f"AND sem_filter('{{description}} {CONVERT}')",
        f"SELECT id FROM packages WHERE section <> 'libs' "
        f"AND sem_filter('{{description}} {CONVERT}') "
        f"AND sem_filter('The software {{description}} {VIEW_EDIT}')",
        "SELECT id FROM packages WHERE section <> 'libs' AND use_tags LIKE '%use::converting%' "
        "AND (use_tags LIKE '%use::viewing%' OR use_tags LIKE '%use::editing%')",
        ("id",), "two filters and a relational predicate",
    ),
    Query(
        "Q3", "fortunes", ("fortunes",),
        f"SELECT id, sem_map('{TOPIC}: {{quote}}') AS topic FROM fortunes "
        f"WHERE sem_filter('{{quote}} {COMPUTERS}')",
        f"SELECT id, topic FROM (SELECT id, quote, sem_map('{TOPIC}: {{quote}}') AS topic "
        f"FROM fortunes) AS fortunes WHERE sem_filter('{{quote}} {COMPUTERS}')",
        "SELECT id, category AS topic FROM fortunes WHERE category = 'computers'",
        ("id", "topic"), "filter and map",
    ),
    Query(
        "Q4", "rt", ("reviews", "plots"),
        f"SELECT r.id, p.movie FROM reviews r JOIN plots p "
        f"ON sem_join('{{r.text}} {ABOUT} {{p.plot}}') "
        f"WHERE p.id < 'p2' AND sem_filter('{{r.text}} {POSITIVE}')",
        f"SELECT r.id, p.movie FROM (SELECT id, text FROM reviews "
        f"WHERE sem_filter('{{text}} {POSITIVE}')) AS r JOIN plots p "
        f"ON sem_join('{{r.text}} {ABOUT} {{p.plot}}') WHERE p.id < 'p2'",
        "SELECT r.id, p.movie FROM reviews r JOIN plots p ON r.movie = p.movie "
        "WHERE p.id < 'p2' AND r.fresh",
        ("id", "movie"), "semantic join and filter",
    ),
    Query(
        "Q5", "debian", ("packages",),
        f"SELECT id, sem_map('{MAIN_USE}: {{0}}', description) AS use FROM packages "
        f"WHERE sem_filter('{{0}} {GAME}', description) "
        f"AND sem_filter('The use {{0}} {VIEW_EDIT}', use)",
        f"SELECT id, use FROM (SELECT id, description, "
        f"sem_map('{MAIN_USE}: {{0}}', description) AS use FROM packages) AS packages "
        f"WHERE sem_filter('The use {{0}} {VIEW_EDIT}', use) "
        f"AND sem_filter('{{0}} {GAME}', description)",
        "SELECT id FROM packages WHERE use_tags LIKE '%use::gameplaying%' "
        "AND (use_tags LIKE '%use::viewing%' OR use_tags LIKE '%use::editing%')",
        ("id",), "map feeding a filter (data dependency)",
    ),
    Query(
        "Q6", "spam", ("emails",),
        f"SELECT spam, count(*) AS n, sem_agg('{SUMMARY}: {{subject}}') AS topics FROM emails "
        f"WHERE sem_filter('{{subject}} {REPLY}') GROUP BY spam",
        f"SELECT spam, count(*) AS n, sem_agg('{SUMMARY}: {{subject}}') AS topics FROM emails "
        f"WHERE sem_filter('{{subject}} {REPLY}') GROUP BY spam",
        "SELECT spam, count(*) AS n FROM emails "
        "WHERE regexp_matches(subject, '^\\[e\\d+\\] (Re|RE|re):') GROUP BY spam",
        ("spam", "n"), "filter then aggregate",
    ),
    Query(
        "Q7", "spam", ("emails",),
        f"SELECT id FROM emails WHERE sem_filter('{{body}} {ADVERT}') "
        f"AND sem_filter('{{body}} {URL}') AND sem_filter('{{subject}} {REPLY}')",
        f"SELECT id FROM emails WHERE sem_filter('{{body}} {URL}') "
        f"AND sem_filter('{{subject}} {REPLY}') AND sem_filter('{{body}} {ADVERT}')",
        "SELECT id FROM emails WHERE spam AND regexp_matches(body, 'http|www\\.') "
        "AND regexp_matches(subject, '^\\[e\\d+\\] (Re|RE|re):')",
        ("id",), "three filters of different cost and selectivity",
    ),
    Query(
        "Q8", "debian", ("packages", "tags"),
        f"SELECT p.id, t.tag FROM packages p JOIN tags t "
        f"ON sem_join('The software {{p.description}} {USED_FOR}: {{t.meaning}}') "
        f"WHERE p.section IN ('games', 'text') AND sem_filter('{{p.description}} {GAME}')",
        f"SELECT p.id, t.tag FROM (SELECT id, description FROM packages "
        f"WHERE section IN ('games', 'text') AND sem_filter('{{description}} {GAME}')) AS p "
        f"JOIN tags t ON sem_join('The software {{p.description}} {USED_FOR}: {{t.meaning}}')",
        "SELECT p.id, t.tag FROM packages p JOIN tags t "
        "ON list_contains(string_split(p.use_tags, ';'), t.tag) "
        "WHERE p.section IN ('games', 'text') AND p.use_tags LIKE '%use::gameplaying%'",
        ("id", "tag"), "join with a tag vocabulary and a filter",
    ),
)  # fmt: skip


def by_name(names: list[str] | None) -> list[Query]:
    if not names:
        return list(QUERIES)
    wanted = {n.upper() for n in names}
    return [q for q in QUERIES if q.name in wanted]

"""The queries in chDB's and DataFusion's SQL, derived from queries.sql."""

from __future__ import annotations

from clickbench.dialects import to_chdb, to_datafusion


def test_datafusion_quotes_columns_but_not_literals_or_aliases() -> None:
    sql = "SELECT URL, COUNT(*) AS c FROM hits WHERE URL LIKE '%URL%' AND EventDate >= '2013-07-01' GROUP BY URL"
    assert to_datafusion(sql) == (
        'SELECT "URL", COUNT(*) AS c FROM hits WHERE "URL" LIKE \'%URL%\' AND "EventDate" >= \'2013-07-01\' '
        'GROUP BY "URL"'
    )
    assert (
        to_datafusion("SELECT toDateTime(EventTime) FROM hits") == 'SELECT to_timestamp_seconds("EventTime") FROM hits'
    )


def test_chdb_reads_the_files_and_event_date_as_a_date() -> None:
    sql = "SELECT MIN(EventDate) FROM hits WHERE EventDate >= '2013-07-01' AND URL <> 'EventDate'"
    assert to_chdb(sql) == (
        "SELECT MIN(toDate(EventDate)) FROM file('hits_*.parquet', Parquet) "
        "WHERE toDate(EventDate) >= '2013-07-01' AND URL <> 'EventDate'"
    )


def test_strlen_counts_bytes_in_every_dialect() -> None:
    assert to_datafusion("SELECT AVG(STRLEN(URL)) FROM hits") == 'SELECT AVG(octet_length("URL")) FROM hits'
    assert (
        to_chdb("SELECT AVG(STRLEN(URL)) FROM hits") == "SELECT AVG(length(URL)) FROM file('hits_*.parquet', Parquet)"
    )

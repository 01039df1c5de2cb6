"""The retention rules continuous queries imply: the destination's cutoff (as a policy's, with the
buffer), and the source's, clamped to what every active reader has processed."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

from arcs.continuous_queries.definitions import micros
from arcs.continuous_queries.retention import destination_rules, processed_until, reads, source_rules
from arcs.lifecycle.cutoffs import DEFAULT_BUFFER_DAYS, cutoff
from arcs.ports import ContinuousQuery, RetentionPolicy

CREATED = datetime(2026, 1, 1, 9, 30, tzinfo=UTC)
NOW = datetime(2026, 3, 1, 12, 40, tzinfo=UTC)
SQL = "SELECT time, avg(v) AS v FROM {table} WHERE time >= {{start_time}} AND time < {{end_time}} GROUP BY 1"


def query(query_id: int, source: str = "cpu", destination: str = "cpu_1h", **fields: object) -> ContinuousQuery:
    base = ContinuousQuery(
        query_id=query_id,
        name=f"q{query_id}",
        database="db",
        source_measurement=source,
        destination_measurement=destination,
        query=SQL.format(table=source),
        interval="1h",
        interval_s=3600,
        tag_columns=(),
        retention_days=None,
        delete_source_after_days=None,
        is_active=True,
        created_at=CREATED,
        updated_at=CREATED,
    )
    return replace(base, **fields)  # type: ignore[arg-type]


def mark(moment: datetime) -> int:
    return micros(moment)


# --- retention_days: the destination -------------------------------------------------------------


def test_destination_cutoff_is_a_policys_with_the_default_buffer() -> None:
    [rule] = destination_rules([query(1, retention_days=30)], NOW)
    policy = RetentionPolicy(0, "p", "db", "cpu_1h", 30, DEFAULT_BUFFER_DAYS, True, NOW, NOW)
    assert (rule.field, rule.database, rule.measurement, rule.query_ids) == ("retention_days", "db", "cpu_1h", (1,))
    assert rule.limit == cutoff(policy, NOW) == NOW - timedelta(days=37)


def test_destination_rules_skip_inactive_and_unset_queries_and_keep_the_longest_period() -> None:
    queries = [
        query(1, retention_days=30),
        query(2, source="mem", retention_days=90),  # the same destination: the longest keeps
        query(3, destination="other", retention_days=1, is_active=False),
        query(4, destination="unset"),
    ]
    [rule] = destination_rules(queries, NOW)
    assert (rule.measurement, rule.query_ids, rule.limit) == ("cpu_1h", (1, 2), NOW - timedelta(days=97))


# --- delete_source_after_days: the source --------------------------------------------------------


def test_source_cutoff_is_now_minus_the_days_when_the_query_has_processed_past_it() -> None:
    [rule] = source_rules([query(1, delete_source_after_days=7)], {1: mark(NOW - timedelta(minutes=5))}, NOW)
    assert (rule.field, rule.measurement, rule.query_ids) == ("delete_source_after_days", "cpu", (1,))
    assert (rule.limit, rule.limited_by) == (NOW - timedelta(days=7), "delete_source_after_days 7")


def test_source_cutoff_is_clamped_to_the_processed_mark_aligned_down_to_an_hour() -> None:
    behind = datetime(2026, 2, 10, 15, 45, tzinfo=UTC)  # fell behind: windows after this are unprocessed
    [rule] = source_rules([query(1, delete_source_after_days=7)], {1: mark(behind)}, NOW)
    assert rule.limit == datetime(2026, 2, 10, 15, tzinfo=UTC)  # the 15:00 partition holds unprocessed rows
    assert rule.limited_by == "processed mark of continuous query 1"


def test_every_active_reader_must_have_processed_past_a_source_partition() -> None:
    queries = [
        query(1, delete_source_after_days=7),
        query(2, destination="cpu_1d"),  # reads the same source, no deletion of its own, and is behind
        query(3, source="mem", query=SQL.format(table="mem JOIN cpu USING (time)")),  # reads cpu through a join
        query(4, source="disk"),  # reads something else: holds nothing back
    ]
    marks = {
        1: mark(NOW - timedelta(minutes=5)),
        2: mark(datetime(2026, 2, 20, 8, 10, tzinfo=UTC)),
        3: mark(datetime(2026, 2, 25, 0, 0, tzinfo=UTC)),
        4: mark(CREATED),  # never ran, but does not read cpu
    }
    [rule] = source_rules(queries, marks, NOW)
    assert rule.limit == datetime(2026, 2, 20, 8, tzinfo=UTC)
    assert rule.limited_by == "processed mark of continuous query 2"
    joined = source_rules(queries, {**marks, 2: marks[1], 3: mark(datetime(2026, 2, 11, 3, 59, tzinfo=UTC))}, NOW)
    assert (joined[0].limit, joined[0].limited_by) == (
        datetime(2026, 2, 11, 3, tzinfo=UTC),
        "processed mark of continuous query 3",
    )


def test_a_reader_that_has_not_processed_a_window_holds_the_whole_source() -> None:
    queries = [query(1, delete_source_after_days=7), query(2, destination="cpu_1d")]
    for never_ran in (mark(CREATED), mark(CREATED - timedelta(minutes=30)), None):  # at creation, or no mark
        [rule] = source_rules(queries, {1: mark(NOW), 2: never_ran}, NOW)
        assert (rule.limit, rule.limited_by) == (None, "continuous query 2 has not processed a window yet")
    # The query with the field set is held back by its own first window too.
    [own] = source_rules(queries[:1], {1: mark(CREATED)}, NOW)
    assert own.limit is None


def test_inactive_queries_neither_delete_nor_hold_back() -> None:
    inactive_setter = [query(1, delete_source_after_days=7, is_active=False)]
    assert source_rules(inactive_setter, {1: mark(NOW)}, NOW) == []
    queries = [query(1, delete_source_after_days=7), query(2, destination="cpu_1d", is_active=False)]
    [rule] = source_rules(queries, {1: mark(NOW), 2: mark(CREATED)}, NOW)
    assert rule.limit == NOW - timedelta(days=7)


def test_several_queries_deleting_one_source_keep_it_for_the_longest_period() -> None:
    queries = [query(1, delete_source_after_days=7), query(2, destination="cpu_1d", delete_source_after_days=30)]
    [rule] = source_rules(queries, {1: mark(NOW), 2: mark(NOW)}, NOW)
    assert (rule.query_ids, rule.limit) == ((1, 2), NOW - timedelta(days=30))


def test_processed_until_and_reads() -> None:
    one = query(1)
    assert processed_until(one, mark(CREATED + timedelta(microseconds=1))) == datetime(2026, 1, 1, 9, tzinfo=UTC)
    assert processed_until(one, mark(datetime(2026, 1, 1, 11, tzinfo=UTC))) == datetime(2026, 1, 1, 11, tzinfo=UTC)
    assert processed_until(one, mark(CREATED)) is None
    assert reads(one, "db", "cpu") and not reads(one, "other", "cpu") and not reads(one, "db", "mem")
    qualified = query(2, source="mem", query=SQL.format(table="mem, db.cpu"))
    assert reads(qualified, "db", "cpu")
    unreadable = query(3, source="mem", query="SELECT 'unterminated FROM mem {start_time} {end_time}")
    assert reads(unreadable, "db", "cpu")  # it cannot be read: it is assumed to read everything

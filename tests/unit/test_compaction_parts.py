"""The parts of compaction that need no storage: file order and names, the duplicate filter, settings, the timer."""

from __future__ import annotations

import itertools
import threading
import time
from datetime import UTC, datetime
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from arcs import layout
from arcs.errors import ServiceUnavailable, StorageFault
from arcs.lifecycle.compaction.merge import merge_groups, sort_order
from arcs.lifecycle.compaction.report import RunReport
from arcs.lifecycle.schedule import CompactionTimer, LambdaCompactionTrigger
from arcs.settings import ConfigError, Settings

HOUR = datetime(2024, 3, 1, 5, tzinfo=UTC)


def test_sequence_ids_sort_in_the_order_they_were_made() -> None:
    ids = [layout.sequence_id() for _ in range(2000)]
    assert ids == sorted(ids) and len(set(ids)) == len(ids)
    assert all(len(i) == layout.SEQUENCE_LENGTH and int(i, 16) >= 0 for i in ids)
    micros = int(ids[-1][:13], 16)
    assert abs(micros / 1e6 - time.time()) < 60


def test_a_compacted_file_sorts_right_after_its_latest_input_and_before_anything_later() -> None:
    older, latest, later = (layout.sequence_id() for _ in range(3))
    key = layout.data_key("p", "db", "cpu", HOUR, f"{latest}-0003.parquet")
    job = layout.sequence_id()
    names = [layout.compacted_filename(key, job, n) for n in range(2)]
    assert names == [f"{latest}-c{job}-0000.parquet", f"{latest}-c{job}-0001.parquet"]
    everything = [f"{older}-0000.parquet", f"{latest}-0003.parquet", *names, f"{later}-0000.parquet"]
    assert sorted(everything, key=layout.file_order) == everything
    # Compacting an output again keeps the same sequence: names do not grow.
    again = layout.compacted_filename(layout.data_key("p", "db", "cpu", HOUR, names[1]), "j2", 0)
    assert again == f"{latest}-cj2-0000.parquet"


def test_ingest_file_names_tell_their_commit_and_when_it_began() -> None:
    commit = layout.sequence_id()
    assert layout.ingest_commit_of(f"{commit}-0007.parquet") == commit
    made = layout.sequence_time(commit)
    assert made is not None and abs((made - datetime.now(UTC)).total_seconds()) < 60
    for other in (f"{commit}-c{commit}-0000.parquet", f"{commit}.parquet", "x-0000.parquet", f"{commit}-0007.csv"):
        assert layout.ingest_commit_of(other) is None
    assert layout.sequence_time("not hex") is None


def test_quarantine_and_hour_prefixes() -> None:
    key = layout.data_key("arcs", "db", "cpu", HOUR, "x.parquet")
    target = layout.quarantine_key("arcs", key)
    assert target == "arcs/_arcs/quarantine/db/cpu/2024/03/01/05/x.parquet"
    with pytest.raises(ValueError, match="not a data key"):
        layout.parse_data_key("arcs", target)
    assert (
        layout.quarantine_key("", "db/cpu/2024/03/01/05/x.parquet") == "_arcs/quarantine/db/cpu/2024/03/01/05/x.parquet"
    )
    assert layout.hour_prefix("arcs", "db", "cpu", HOUR) == "arcs/db/cpu/2024/03/01/05/"
    assert key.startswith(layout.hour_prefix("arcs", "db", "cpu", HOUR))


# --- the merge of a point's rows -------------------------------------------------------------------

keys = st.lists(
    st.tuples(st.integers(0, 3), st.sampled_from(["a", "b", None]), st.none() | st.integers(0, 9)), max_size=60
)


@settings(deadline=None)  # the first example also pays for loading Arrow's kernels
@given(rows=keys, cuts=st.lists(st.integers(0, 60), max_size=6))
def test_merge_groups_makes_one_row_per_run_of_equal_keys_field_by_field_across_batches(
    rows: list[tuple[int, str | None, int | None]], cuts: list[int]
) -> None:
    rows = sorted(rows, key=lambda r: (r[0], r[1] or ""))  # stable: write order within a point
    table = pa.table(
        {
            "time": pa.array([r[0] for r in rows], pa.int64()),
            "host": pa.array([r[1] for r in rows], pa.string()),
            "n": pa.array(range(len(rows)), pa.int64()),  # never null: the point's last row's
            "v": pa.array([r[2] for r in rows], pa.int64()),  # its last non-null value
        }
    )
    bounds = sorted({0, len(rows), *(c for c in cuts if c <= len(rows))})
    batches = [table.slice(a, b - a).to_batches()[0] for a, b in itertools.pairwise(bounds) if b > a]
    merged = [row for batch in merge_groups(iter(batches), ["time", "host"]) for row in batch.to_pylist()]
    expected: dict[tuple[int, str | None], dict[str, Any]] = {}
    for index, (when, host, value) in enumerate(rows):
        point = expected.setdefault((when, host), {"time": when, "host": host, "n": index, "v": None})
        point["n"] = index
        if value is not None:
            point["v"] = value
    assert merged == list(expected.values())


# --- settings and the timer ---------------------------------------------------------------------------


def test_compaction_settings_from_the_environment() -> None:
    settings = Settings.from_env(
        {
            "ARCS_COMPACTION_INTERVAL_S": "0",
            "ARCS_COMPACTION_MIN_FILES": "20",
            "ARCS_COMPACTION_TARGET_FILE_MB": "128",
            "ARCS_COMPACTION_SORT": "tags",
            "ARCS_COMPACTION_MEMORY_LIMIT": "2GB",
        }
    ).compaction
    assert (settings.interval_s, settings.min_files, settings.target_file_bytes) == (0, 20, 128 * 1024 * 1024)
    assert (settings.sort, settings.memory_limit, settings.zstd_level) == ("tags", "2GB", 3)
    assert Settings().compaction.target_file_bytes == 512 * 1024 * 1024
    with pytest.raises(ConfigError, match="SORT"):
        Settings.from_env({"ARCS_COMPACTION_SORT": "host"})
    with pytest.raises(ConfigError, match="MIN_FILES"):
        Settings.from_env({"ARCS_COMPACTION_MIN_FILES": "1"})
    with pytest.raises(ConfigError, match="MAX_FILES"):
        Settings.from_env({"ARCS_COMPACTION_MAX_FILES": "5000"})


def test_tiers_and_their_thresholds_from_the_environment() -> None:
    assert Settings().compaction.tiers == ("hour", "day")
    for text in ("hour", "hour,day", "hour, day, month", "hour,month"):
        tiers = Settings.from_env({"ARCS_COMPACTION_TIERS": text}).compaction.tiers
        assert tiers == tuple(part.strip() for part in text.split(","))
    for bad in ("day", "hour,month,day", "hour,week", "month"):
        with pytest.raises(ConfigError, match="ARCS_COMPACTION_TIERS"):
            Settings.from_env({"ARCS_COMPACTION_TIERS": bad})
    month = Settings.from_env({"ARCS_COMPACTION_MONTH_MIN_AGE_S": "60", "ARCS_COMPACTION_MONTH_MIN_FILES": "3"})
    assert (month.compaction.month_min_age_s, month.compaction.month_min_files) == (60, 3)
    with pytest.raises(ConfigError, match="MONTH_MIN_FILES"):
        Settings.from_env({"ARCS_COMPACTION_MONTH_MIN_FILES": "1"})


def test_sort_keys_from_the_environment_and_the_order_a_merge_sorts_by() -> None:
    config = Settings.from_env(
        {"ARCS_SORT_KEYS": "hits: CounterID,EventDate ,UserID; cpu:region,time,usage", "ARCS_COMPACTION_SORT": "tags"}
    ).compaction
    assert config.sort_keys == (("hits", ("CounterID", "EventDate", "UserID")), ("cpu", ("region", "time", "usage")))
    columns = {"time", "CounterID", "EventDate", "UserID", "host", "region", "usage"}
    # Without tags, the keys the files hold, then time (appended unless named).
    assert sort_order("hits", [], columns - {"EventDate"}, config) == ["CounterID", "UserID", "time"]
    # With tags, a field cannot lead (a point's rows must stay together); the other tags follow.
    assert sort_order("cpu", ["host", "region"], columns, config) == ["region", "time", "host"]
    # A measurement without keys sorts as ARCS_COMPACTION_SORT says.
    assert sort_order("mem", ["host"], columns, config) == ["host", "time"]
    assert sort_order("mem", ["host"], columns, Settings().compaction) == ["time", "host"]
    for bad in ("hits", "hits:", "hits:a,,b", "1hits:a", "hits:a;hits:b", "hits:a,a", "hits:a\x01"):
        with pytest.raises(ConfigError, match="ARCS_SORT_KEYS"):
            Settings.from_env({"ARCS_SORT_KEYS": bad.replace("\\x01", "\x01")})


class FakeCompactor:
    def __init__(self) -> None:
        self.calls: list[tuple[str | None, str | None]] = []
        self.ran = threading.Event()

    def run(self, database: str | None = None, measurement: str | None = None) -> RunReport:
        self.calls.append((database, measurement))
        self.ran.set()
        return RunReport(datetime.now(UTC), datetime.now(UTC))


def test_the_timer_runs_on_its_interval_and_when_triggered() -> None:
    fake = FakeCompactor()
    timer = CompactionTimer(lambda: fake, interval_s=0.05)  # type: ignore[arg-type,return-value]
    timer.start()
    try:
        assert fake.ran.wait(5)
        assert timer.trigger("db", "cpu") == {"triggered": True, "database": "db", "measurement": "cpu"}
        deadline = time.monotonic() + 5
        while ("db", "cpu") not in fake.calls and time.monotonic() < deadline:
            time.sleep(0.01)
        assert ("db", "cpu") in fake.calls and (None, None) in fake.calls
        status = timer.status()
        assert status["enabled"] is True and status["runs"] >= 2 and status["last_run"]["jobs"] == []
    finally:
        timer.stop()
        timer.join(5)
    assert not timer.is_alive()


def test_a_trigger_without_the_timer_thread_runs_once_in_the_background() -> None:
    fake = FakeCompactor()
    timer = CompactionTimer(lambda: fake, interval_s=0)  # type: ignore[arg-type,return-value]
    timer.trigger(None, None)
    assert fake.ran.wait(5) and fake.calls == [(None, None)]
    assert timer.status()["enabled"] is False


def test_the_lambda_trigger_invokes_asynchronously_and_needs_a_function() -> None:
    sent: list[tuple[str, bytes]] = []
    trigger = LambdaCompactionTrigger(lambda name, payload: sent.append((name, payload)), "arcs-tasks")
    trigger.trigger("db", None)
    assert sent == [("arcs-tasks", b'{"source": "arcs.trigger", "database": "db", "measurement": null}')]
    with pytest.raises(ServiceUnavailable):
        LambdaCompactionTrigger(lambda name, payload: None, "").trigger(None, None)

    def broken(name: str, payload: bytes) -> Any:
        raise RuntimeError("no network")

    with pytest.raises(StorageFault):
        LambdaCompactionTrigger(broken, "arcs-tasks").trigger(None, None)

"""The benchmark's data on local disk, made once per size and reused.

    <work>/<rows>/hits.parquet             one file, hits.parquet's physical layout (duckdb-parquet, datafusion)
    <work>/<rows>/partitioned/hits_N.parquet  the same rows in 100 files (the *-partitioned entries)
    <work>/<rows>/arcs/                    the standalone server's data directory, loaded by clickbench.load (placed)
    <work>/<rows>/arcs-api/                the same rows written through the write API, then compacted (api)

Generated in chunks of at most a million rows (each chunk its own seed, so the generator's memory
stays bounded) and then sorted once more by ClickHouse's primary key, as the official file is.
"""

from __future__ import annotations

import shutil
import time
from dataclasses import dataclass
from pathlib import Path

import duckdb
import pyarrow.parquet as pq

from clickbench.generate import generate_hits, to_parquet_layout
from clickbench.load import LOADER_VERSION, load_into_data_dir

CHUNK_ROWS = 1_000_000
PARTITIONS = 100
SORT_KEY = ("CounterID", "EventDate", "UserID", "EventTime", "WatchID")
ROW_GROUP_ROWS = 122_880


@dataclass(frozen=True, slots=True)
class Dataset:
    rows: int
    root: Path

    @property
    def single(self) -> Path:
        return self.root / "hits.parquet"

    @property
    def partitioned(self) -> Path:
        return self.root / "partitioned"

    @property
    def arcs_data(self) -> Path:
        return self.root / "arcs"

    @property
    def arcs_api(self) -> Path:
        return self.root / "arcs-api"

    @property
    def arcs_api_default(self) -> Path:
        return self.root / "arcs-api-default"

    @property
    def ready(self) -> bool:
        return (self.root / "READY").is_file()

    @property
    def load_seconds(self) -> float:
        """How long loading hits.parquet into our storage layout took (clickbench.load, placed)."""
        path = self.root / "LOAD_SECONDS"
        return float(path.read_text()) if path.is_file() else 0.0

    @property
    def api_load_seconds(self) -> float:
        """How long writing hits through the write API and compacting took (clickbench.load, api)."""
        path = self.root / "LOAD_SECONDS_API"
        return float(path.read_text()) if path.is_file() else 0.0

    @property
    def api_default_load_seconds(self) -> float:
        """The same, the server on default settings (clickbench.load, api-default)."""
        path = self.root / "LOAD_SECONDS_API_DEFAULT"
        return float(path.read_text()) if path.is_file() else 0.0


def prepare(rows: int, work_dir: Path, seed: int = 1, log: bool = True) -> Dataset:
    dataset = Dataset(rows, work_dir / str(rows))
    if dataset.ready:
        if (dataset.root / "LOADER").is_file() and (dataset.root / "LOADER").read_text().strip() == LOADER_VERSION:
            return dataset
        shutil.rmtree(dataset.arcs_data, ignore_errors=True)  # generated data kept, loaded again
        shutil.rmtree(dataset.arcs_api, ignore_errors=True)
        shutil.rmtree(dataset.arcs_api_default, ignore_errors=True)
        _load(dataset, log)
        return dataset
    shutil.rmtree(dataset.root, ignore_errors=True)
    chunks = dataset.root / "chunks"
    chunks.mkdir(parents=True)
    started = time.perf_counter()
    for index, start in enumerate(range(0, rows, CHUNK_ROWS)):
        count = min(CHUNK_ROWS, rows - start)
        pq.write_table(to_parquet_layout(generate_hits(count, seed=seed + index)), chunks / f"{index:04d}.parquet")
        if log:
            print(f"  generated {start + count:,} of {rows:,} rows ({time.perf_counter() - started:.0f} s)", flush=True)
    con = duckdb.connect(":memory:")
    con.execute("SET enable_progress_bar = false")
    con.execute(f"SET temp_directory = '{dataset.root / 'spill'}'")
    order = ", ".join(SORT_KEY)
    con.execute(
        f"COPY (SELECT * FROM read_parquet('{chunks}/*.parquet') ORDER BY {order}) TO '{dataset.single}' "
        f"(FORMAT parquet, COMPRESSION snappy, ROW_GROUP_SIZE {ROW_GROUP_ROWS})"
    )
    # hits_N.parquet: consecutive slices of the sorted file, as the official partitioned set.
    dataset.partitioned.mkdir()
    per_file = -(-rows // PARTITIONS)
    for part in range(PARTITIONS):
        con.execute(
            f"COPY (SELECT * FROM read_parquet('{dataset.single}') LIMIT {per_file} OFFSET {part * per_file}) "
            f"TO '{dataset.partitioned / f'hits_{part}.parquet'}' (FORMAT parquet, COMPRESSION snappy, "
            f"ROW_GROUP_SIZE {ROW_GROUP_ROWS})"
        )
    con.close()
    shutil.rmtree(chunks)
    shutil.rmtree(dataset.root / "spill", ignore_errors=True)
    _load(dataset, log)
    (dataset.root / "READY").write_text(f"{rows}\n")
    return dataset


def _load(dataset: Dataset, log: bool) -> None:
    """hits.parquet into every layout, marked with the loader's version (a new one loads again)."""
    for layout, data_dir, record in (
        ("placed", dataset.arcs_data, "LOAD_SECONDS"),
        ("api", dataset.arcs_api, "LOAD_SECONDS_API"),
        ("api-default", dataset.arcs_api_default, "LOAD_SECONDS_API_DEFAULT"),
    ):
        report = load_into_data_dir([dataset.single], data_dir, layout_kind=layout)  # type: ignore[arg-type]
        if log:
            print(
                f"  loaded ({layout}): {report.files} files, {report.bytes / 1e6:.0f} MB in {report.seconds:.1f} s",
                flush=True,
            )
        (dataset.root / record).write_text(f"{report.seconds:.3f}\n")
    (dataset.root / "LOADER").write_text(LOADER_VERSION + "\n")

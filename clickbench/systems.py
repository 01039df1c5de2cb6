"""The systems the harness runs, each the way its ClickBench entry runs it.

- ``arcs``: our query path as the container serves it: ``arcs serve`` on the loaded data
  directory, one warm process; each query is an HTTP request to ``/api/v1/query/arrow``, timed by
  the client from sending to the last byte of the Arrow answer. Cold: the server is stopped, the
  page cache dropped, the server started again (ClickBench's restartable systems).
- ``duckdb-parquet``, ``duckdb-parquet-partitioned``, ``chdb-parquet-partitioned``,
  ``datafusion``: embedded engines, a fresh process per try (``clickbench.workers``). Cold: the
  page cache is dropped before the first try.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from abc import ABC, abstractmethod
from pathlib import Path

import pyarrow as pa
from benchmarks.launch import REPO

from clickbench.dataset import Dataset
from clickbench.dialects import to_chdb, to_datafusion
from clickbench.server import ArcsServer


def drop_page_cache() -> bool:
    """``sync; echo 3 > /proc/sys/vm/drop_caches``; False where it is not permitted."""
    os.sync()
    try:
        Path("/proc/sys/vm/drop_caches").write_text("3\n")
    except OSError:
        return False
    return True


class System(ABC):
    name: str
    #: ClickBench's system name and tags for the result JSON.
    title: str
    tags: tuple[str, ...]
    #: Columns of this system's own that ``SELECT *`` adds to the baseline's.
    own_columns: tuple[str, ...] = ()

    def __init__(self, dataset: Dataset) -> None:
        self.dataset = dataset

    def sql(self, query: str) -> str:
        """The query in this system's dialect."""
        return query

    def start(self) -> None:  # noqa: B027 - optional hook
        """Before the first query."""

    def stop(self) -> None:  # noqa: B027 - optional hook
        """After the last query."""

    @abstractmethod
    def cold(self) -> None:
        """Make the next try a cold one (the page cache is dropped by the harness)."""

    @abstractmethod
    def run(self, sql: str) -> tuple[pa.Table, float]:
        """One try: the result and the seconds it took."""

    @property
    def load_time(self) -> float:
        """Seconds to make the data queryable (the embedded engines read the Parquet files as they are)."""
        return 0.0

    @property
    def data_size(self) -> int:
        return sum(path.stat().st_size for path in self.data_files())

    @abstractmethod
    def data_files(self) -> list[Path]: ...


class Embedded(System):
    """A fresh process per try, working in the folder with the system's Parquet files."""

    view = ""

    @property
    def cwd(self) -> Path:
        return self.dataset.root

    def cold(self) -> None:
        return None  # every try is a fresh process already

    def run(self, sql: str) -> tuple[pa.Table, float]:
        with tempfile.TemporaryDirectory(prefix="clickbench-try-") as folder:
            result_path = Path(folder) / "result.arrow"
            process = subprocess.run(
                [sys.executable, "-m", "clickbench.workers", self.name, str(result_path), self.view],
                input=sql,
                capture_output=True,
                text=True,
                cwd=self.cwd,
                env={**os.environ, "PYTHONPATH": str(REPO)},
                check=False,
            )
            if process.returncode != 0:
                raise RuntimeError(process.stderr.strip().splitlines()[-1] if process.stderr.strip() else "failed")
            seconds = float(json.loads(process.stdout.strip().splitlines()[-1])["seconds"])
            with pa.OSFile(str(result_path), "rb") as source:
                return pa.ipc.open_file(source).read_all(), seconds


def _duckdb_view(files: str) -> str:
    """ClickBench's create.sql for duckdb-parquet, read from the reference copy."""
    text = (REPO / "clickbench" / "create_duckdb_view.sql").read_text(encoding="utf-8")
    return text.replace("'hits.parquet'", f"'{files}'")


class DuckdbParquet(Embedded):
    name = "duckdb-parquet"
    title = "DuckDB (Parquet, single)"
    tags = ("C++", "column-oriented", "embedded", "stateless")

    @property
    def view(self) -> str:  # type: ignore[override]
        return _duckdb_view("hits.parquet")

    def data_files(self) -> list[Path]:
        return [self.dataset.single]


class DuckdbParquetPartitioned(Embedded):
    name = "duckdb-parquet-partitioned"
    title = "DuckDB (Parquet, partitioned)"
    tags = ("C++", "column-oriented", "embedded", "stateless")

    @property
    def view(self) -> str:  # type: ignore[override]
        return _duckdb_view("hits_*.parquet")

    @property
    def cwd(self) -> Path:
        return self.dataset.partitioned

    def data_files(self) -> list[Path]:
        return sorted(self.dataset.partitioned.glob("hits_*.parquet"))


class ChdbParquetPartitioned(Embedded):
    name = "chdb-parquet-partitioned"
    title = "chDB (Parquet, partitioned)"
    tags = ("C++", "column-oriented", "ClickHouse derivative", "embedded", "stateless")

    @property
    def cwd(self) -> Path:
        return self.dataset.partitioned

    def sql(self, query: str) -> str:
        return to_chdb(query)

    def data_files(self) -> list[Path]:
        return sorted(self.dataset.partitioned.glob("hits_*.parquet"))


class Datafusion(Embedded):
    name = "datafusion"
    title = "DataFusion (Parquet, single)"
    tags = ("Rust", "column-oriented", "embedded", "stateless")

    def sql(self, query: str) -> str:
        return to_datafusion(query)

    def data_files(self) -> list[Path]:
        return [self.dataset.single]


class Arcs(System):
    """``arcs serve`` over the loaded data directory; queries over HTTP as a client sends them.

    The ``placed`` layout: hits placed as ClickBench's entries place ``hits.parquet`` (few large files)."""

    name = "arcs"
    title = "Arc Serverless (standalone)"
    tags = ("Python", "column-oriented", "DuckDB derivative", "serverless", "time-series")
    own_columns = ("time",)  # every measurement's storage time column

    def __init__(self, dataset: Dataset) -> None:
        super().__init__(dataset)
        self.server = ArcsServer(self.data_dir)

    @property
    def data_dir(self) -> Path:
        return self.dataset.arcs_data

    @property
    def url(self) -> str:
        return self.server.url

    def start(self) -> None:
        self.server.start()
        self.check()

    def check(self) -> None:
        """What ClickBench's driver waits for after ``./start``: the entry's ``check``, a ``SELECT 1``
        sent as ``query`` sends it (so the token is verified, as on EC2, before any timed query)."""
        self.query_over_http("SELECT 1")

    def stop(self) -> None:
        self.server.stop()

    def cold(self) -> None:
        self.stop()

    def restart_if_stopped(self) -> None:
        if not self.server.running:
            self.start()

    def run(self, sql: str) -> tuple[pa.Table, float]:
        self.restart_if_stopped()
        return self.query_over_http(sql)

    def query_over_http(self, sql: str) -> tuple[pa.Table, float]:
        body = json.dumps({"sql": sql}).encode()
        started = time.perf_counter()
        status, payload = self.server.request("POST", "/api/v1/query/arrow", body, {"Content-Type": "application/json"})
        elapsed = time.perf_counter() - started
        if status != 200:
            raise RuntimeError(f"HTTP {status}: {payload[:300].decode(errors='replace')}")
        return pa.ipc.open_stream(payload).read_all(), elapsed

    @property
    def load_time(self) -> float:
        return self.dataset.load_seconds

    def data_files(self) -> list[Path]:
        return sorted(self.data_dir.joinpath("storage").rglob("*.parquet"))


class ArcsApi(Arcs):
    """The same server over hits loaded as a user loads them (``clickbench.load``'s ``api`` layout):
    MessagePack requests of at most 4 MB through the write API, then the product's compaction, with
    ClickBench's sort keys and the month tier set as a user sets them (``load.API_SETTINGS``)."""

    name = "arcs-api"
    title = "Arc Serverless (standalone, loaded through the write API, sort keys)"

    @property
    def data_dir(self) -> Path:
        return self.dataset.arcs_api

    @property
    def load_time(self) -> float:
        return self.dataset.api_load_seconds


class ArcsApiDefault(Arcs):
    """As ``arcs-api``, the server loading on default settings (``api-default``: time-sorted day files)."""

    name = "arcs-api-default"
    title = "Arc Serverless (standalone, loaded through the write API, default settings)"

    @property
    def data_dir(self) -> Path:
        return self.dataset.arcs_api_default

    @property
    def load_time(self) -> float:
        return self.dataset.api_default_load_seconds


ALL: tuple[type[System], ...] = (
    ArcsApi,
    ArcsApiDefault,
    Arcs,
    DuckdbParquet,
    DuckdbParquetPartitioned,
    ChdbParquetPartitioned,
    Datafusion,
)
BASELINE = "duckdb-parquet"

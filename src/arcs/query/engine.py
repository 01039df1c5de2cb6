"""The DuckDB engine: one connection per process, configured once, cursors per query.

DuckDB never downloads anything: httpfs comes from the ``duckdb-extension-httpfs`` wheel, laid out
where DuckDB looks for it (``<dir>/v<version>/<platform>/httpfs.duckdb_extension``), with
autoinstall off. The connection is sandboxed with DuckDB's own controls: external access is
limited to the data root (``allowed_directories`` is set before ``enable_external_access=false``,
as it cannot change afterwards) and the configuration is locked.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import shutil
import threading
import time
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa

from arcs import envvars
from arcs.allocator import DUCKDB_ALLOCATOR
from arcs.errors import BadRequest, QueryTimeout, ResultTooLarge, ServiceUnavailable
from arcs.query.sql_compat import define_macros

logger = logging.getLogger(__name__)
_BATCH_ROWS = 122_880
#: With a byte limit, rows are fetched this many at a time, so a result of wide rows is stopped
#: after a few MB more than the limit, not a whole batch more; they are merged back into batches
#: of ``_BATCH_ROWS`` as they come, for what formats the result afterwards.
_LIMITED_FETCH_ROWS = 256
#: Temporary role credentials last at least an hour; re-read them well within that.
SECRET_REFRESH_S = 300.0
S3_THREADS_PER_CPU = 4
#: File systems httpfs registers besides S3's; disabled so no URL of theirs is ever opened.
_UNUSED_FILESYSTEMS = ("HTTPFileSystem", "HuggingFaceFileSystem")


@dataclass(frozen=True, slots=True)
class BucketEndpoint:
    """A bucket DuckDB must reach at an endpoint of its own: an S3 Express directory bucket's zonal one."""

    bucket: str
    endpoint: str  # host[:port]
    use_ssl: bool
    url_style: str


@dataclass(frozen=True, slots=True)
class S3Access:
    region: str
    endpoint: str | None  # host:port for moto/LocalStack; None for AWS
    use_ssl: bool
    url_style: str  # "path" for emulators, "vhost" for AWS
    key_id: str
    secret: str
    session_token: str | None
    #: The data's directory bucket, if any: same credentials, its own secret scoped to that bucket.
    express: BucketEndpoint | None = None


def extension_directory(work_dir: Path, platform: str) -> Path:
    """Lay the bundled httpfs extension out as DuckDB expects it; returns the directory.

    A symbolic link to the wheel's file, not a copy: 21 MB less to write to ``/tmp`` on every cold
    start (a copy only where links cannot be made).
    """
    import duckdb_extension_httpfs  # only a process that reads S3 needs to find the extension

    source = Path(duckdb_extension_httpfs.__file__).parent / "extensions" / f"v{duckdb.__version__}"
    target_dir = work_dir / "duckdb_extensions"
    target = target_dir / f"v{duckdb.__version__}" / platform / "httpfs.duckdb_extension"
    if not target.exists():
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_suffix(f".{os.getpid()}.tmp")
        tmp.unlink(missing_ok=True)
        try:
            tmp.symlink_to(source / "httpfs.duckdb_extension")
        except OSError:
            shutil.copyfile(source / "httpfs.duckdb_extension", tmp)
        os.replace(tmp, target)
    return target_dir


#: Engines with a connection open or being opened: closed when the interpreter exits.
_LIVE_ENGINES: weakref.WeakSet[Engine] = weakref.WeakSet()


@atexit.register
def _close_live_engines() -> None:
    """A process must not exit while DuckDB runs threads of its own (a connection still opening on
    its daemon thread, the database's workers): C++ teardown then aborts the process ("terminate
    called without an active exception"), and a start that failed with a clear error would end in
    SIGABRT instead. Closing waits for an opening to finish and stops the workers."""
    for engine in list(_LIVE_ENGINES):
        with contextlib.suppress(Exception):  # exiting: nothing left to tell
            engine.close()


class Engine:
    def __init__(
        self,
        allowed_roots: Sequence[str],
        work_dir: Path,
        threads: int | None = None,
        memory_limit: str | None = None,
        s3: Callable[[], S3Access] | None = None,
        secret_refresh_s: float = SECRET_REFRESH_S,
        query_timeout_s: float | None = None,
        max_temp_size: str | None = None,
    ) -> None:
        self.allowed_roots = list(allowed_roots)
        self.work_dir = work_dir
        self.threads = threads
        self.memory_limit = memory_limit
        # Lambda's /tmp is fixed at deploy: spill stops there with a clear error, not a full disk.
        self.max_temp_size = max_temp_size
        # A provider, not fixed keys: role credentials expire, and a warm container outlives them.
        self.s3 = s3
        self.secret_refresh_s = secret_refresh_s
        self._secret_made_at = 0.0
        #: A query still running after this long is interrupted (None or 0: never).
        self.query_timeout_s = query_timeout_s
        self._conn: duckdb.DuckDBPyConnection | None = None
        self._opening: _Opening | None = None
        self._lock = threading.Lock()
        self._secret_lock = threading.Lock()

    def connection(self) -> duckdb.DuckDBPyConnection:
        if self._conn is None:
            with self._lock:
                if self._conn is None:
                    opening, self._opening = self._opening, None
                    conn = opening.result() if opening is not None else self._open()
                    try:
                        self._seal(conn)
                    except BaseException:
                        conn.close()
                        raise
                    self._conn = conn
                    _LIVE_ENGINES.add(self)
        return self._conn

    def open_in_background(self) -> None:
        """Start opening the connection on another thread; ``connection()`` finishes and seals it.

        Opening is mostly DuckDB's own work with the GIL released (loading httpfs above all), so a
        cold start overlaps it with importing the routes. Nothing can use the connection before
        it is sealed.
        """
        with self._lock:
            if self._conn is None and self._opening is None:
                _LIVE_ENGINES.add(self)
                self._opening = _Opening(self._open)

    def _open(self) -> duckdb.DuckDBPyConnection:
        """A new connection, configured, with httpfs loaded when S3 is read: not yet sandboxed."""
        self.work_dir.mkdir(parents=True, exist_ok=True)
        temp = self.work_dir / "duckdb_tmp"
        temp.mkdir(exist_ok=True)
        config: dict[str, Any] = {
            "autoinstall_known_extensions": False,
            "autoload_known_extensions": self.s3 is not None,
            "home_directory": str(self.work_dir),
            "temp_directory": str(temp),
            "preserve_insertion_order": False,
            **DUCKDB_ALLOCATOR,
        }
        if self.threads:
            config["threads"] = self.threads
        elif self.s3 is not None:
            # httpfs reads synchronously, one request per thread: S3 latency wants more threads than cores.
            config["threads"] = S3_THREADS_PER_CPU * (os.cpu_count() or 1)
        if self.memory_limit:
            config["memory_limit"] = self.memory_limit
        if self.max_temp_size:
            config["max_temp_directory_size"] = self.max_temp_size
        conn = duckdb.connect(":memory:", config=config)
        try:
            # GLOBAL: queries run on cursors, which start from the global settings, not this session's.
            conn.execute("SET GLOBAL parquet_metadata_cache = true; SET GLOBAL TimeZone = 'UTC'")
            define_macros(conn)  # in the database's catalog: every cursor sees them
            if self.s3 is not None:
                # Asked of this connection: duckdb.sql() would start a second, default database for it.
                platform = str(conn.execute("PRAGMA platform").fetchone()[0])  # type: ignore[index]
                conn.execute("SET extension_directory = ?", [str(extension_directory(self.work_dir, platform))])
                # Asking for one of its settings autoloads httpfs: the same file a LOAD reads, but
                # loaded while the query runs, with the GIL released (LOAD and load_extension keep it).
                conn.execute("SELECT current_setting('s3_region')")
        except BaseException:
            conn.close()
            raise
        return conn

    def _seal(self, conn: duckdb.DuckDBPyConnection) -> None:
        """Credentials, then the sandbox: the connection as queries may use it."""
        temp = self.work_dir / "duckdb_tmp"
        if self.s3 is not None:
            self._create_secret(conn, self.s3())
            self._secret_made_at = time.monotonic()
            # httpfs also serves http(s):// and hf://; only s3:// is ours to read.
            conn.execute("SET disabled_filesystems = ?", [",".join(_UNUSED_FILESYSTEMS)])
        # The sandbox (SQL side in arcs.query.sandbox): nothing is fetched or loaded from now on, no
        # Python variable is ever a table, external access only under the data root, then frozen.
        conn.execute("SET autoload_known_extensions = false")
        conn.execute("SET allow_community_extensions = false")
        conn.execute("SET python_enable_replacements = false")
        conn.execute("SET allowed_directories = ?", [[*self.allowed_roots, str(temp)]])
        conn.execute("SET enable_external_access = false")
        conn.execute("SET lock_configuration = true")

    def _refresh_secret(self, conn: duckdb.DuckDBPyConnection) -> None:
        """Replace the S3 secret with current credentials once it is ``secret_refresh_s`` old.

        DuckDB's own credential-chain secrets never refresh; ours are re-made from the SDK's
        credentials (which renew themselves), well before temporary keys expire.
        """
        if self.s3 is None or time.monotonic() - self._secret_made_at < self.secret_refresh_s:
            return
        with self._secret_lock:
            if time.monotonic() - self._secret_made_at >= self.secret_refresh_s:
                self._create_secret(conn, self.s3())
                self._secret_made_at = time.monotonic()

    @staticmethod
    def _create_secret(conn: duckdb.DuckDBPyConnection, s3: S3Access) -> None:
        for statement in secret_statements(s3):
            conn.execute(statement)

    def query_arrow(
        self,
        sql: str,
        params: Sequence[object] | None = None,
        max_rows: int | None = None,
        max_bytes: int | None = None,
        timeout_s: float | None = None,
    ) -> pa.Table:
        """Run ``sql``; more than ``max_rows`` rows or ``max_bytes`` bytes (Arrow) of result is an
        error, never a silent truncation, raised as soon as the streamed batches pass the limit.

        ``timeout_s`` replaces the engine's query timeout for this query (what is left of a budget).
        """
        connection = self.connection()
        self._refresh_secret(connection)
        cursor = connection.cursor()
        seconds = timeout_s if timeout_s is not None else self.query_timeout_s
        deadline = _Deadline(cursor, seconds) if seconds else None
        try:
            reader = cursor.execute(sql, params).to_arrow_reader(
                _BATCH_ROWS if max_bytes is None else _LIMITED_FETCH_ROWS
            )
            batches: list[pa.RecordBatch] = []
            pending: list[pa.RecordBatch] = []  # small batches not yet merged
            rows = pending_rows = size = 0
            for batch in reader:
                rows += batch.num_rows
                size += batch.nbytes
                if max_rows is not None and rows > max_rows:
                    raise BadRequest(f"the result has more than {max_rows} rows; add a LIMIT or narrow the query")
                if max_bytes is not None and size > max_bytes:
                    break
                pending.append(batch)
                pending_rows += batch.num_rows
                if pending_rows >= _BATCH_ROWS:
                    batches.append(_merged(pending))
                    pending, pending_rows = [], 0
            else:
                if pending:
                    batches.append(_merged(pending))
                return pa.Table.from_batches(batches, schema=reader.schema)
            # Too large: what was read goes before the refusal is raised (an exception keeps its
            # frames, and so these lists, alive until it is answered).
            del batch, batches, pending
            reader.close()
            raise ResultTooLarge(max_bytes)
        except duckdb.InterruptException as exc:
            if deadline is not None and deadline.fired:
                raise QueryTimeout(
                    f"the query ran longer than {self.query_timeout_s or seconds:g} s and was stopped; "
                    "narrow its time range or aggregate more"
                ) from exc
            raise
        except duckdb.OutOfMemoryException as exc:
            raise ServiceUnavailable(
                f"the query needs more memory than the engine's limit ({self.memory_limit or 'DuckDB default'}, "
                f"{envvars.DUCKDB_MEMORY_LIMIT}); narrow its time range or aggregate more: {_first_line(exc)}"
            ) from exc
        except duckdb.PermissionException as exc:
            raise BadRequest(f"query refused by the sandbox: {_first_line(exc)}") from exc
        except (
            duckdb.ParserException,
            duckdb.BinderException,
            duckdb.CatalogException,
            duckdb.ConversionException,
            duckdb.InvalidInputException,
            duckdb.NotImplementedException,
            duckdb.OutOfRangeException,
            duckdb.TypeMismatchException,
        ) as exc:
            raise BadRequest(f"query failed: {_first_line(exc)}") from exc
        finally:
            if deadline is not None:
                deadline.cancel()
            cursor.close()

    def close(self) -> None:
        with self._lock:
            opening, self._opening = self._opening, None
            if opening is not None:
                with contextlib.suppress(Exception):  # it failed: nothing is open
                    opening.result().close()
            if self._conn is not None:
                self._conn.close()
                self._conn = None


def _merged(batches: list[pa.RecordBatch]) -> pa.RecordBatch:
    return batches[0] if len(batches) == 1 else pa.concat_batches(batches)


def secret_statements(s3: S3Access) -> list[str]:
    """The ``CREATE SECRET`` statements that give httpfs ``s3``'s credentials and endpoints.

    DuckDB picks the secret whose scope is the longest prefix of a URL: the directory bucket's
    scoped secret sends its requests to its own endpoint, every other bucket keeps the default one.
    """
    common = {"KEY_ID": s3.key_id, "SECRET": s3.secret, "REGION": s3.region}
    if s3.session_token:
        common["SESSION_TOKEN"] = s3.session_token
    default = {**common, "URL_STYLE": s3.url_style, "USE_SSL": _flag(s3.use_ssl)}
    if s3.endpoint:
        default["ENDPOINT"] = s3.endpoint
    statements = [_secret("arcs_data", default)]
    if s3.express is not None:
        express = s3.express
        scoped = {
            **common,
            "ENDPOINT": express.endpoint,
            "URL_STYLE": express.url_style,
            "USE_SSL": _flag(express.use_ssl),
            "SCOPE": f"s3://{express.bucket}/",
        }
        statements.append(_secret("arcs_express", scoped))
    return statements


def _flag(value: bool) -> str:
    return "true" if value else "false"


def _secret(name: str, options: dict[str, str]) -> str:
    rendered = ", ".join(f"{key} '{value.replace(chr(39), chr(39) * 2)}'" for key, value in options.items())
    return f"CREATE OR REPLACE SECRET {name} (TYPE s3, {rendered})"


class _Opening:
    """A connection being opened on a daemon thread; ``result()`` waits for it (or re-raises)."""

    def __init__(self, open_connection: Callable[[], duckdb.DuckDBPyConnection]) -> None:
        self._open = open_connection
        self._conn: duckdb.DuckDBPyConnection | None = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="duckdb-open", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            self._conn = self._open()
        except BaseException as exc:  # handed to whoever waits for the connection
            self._error = exc

    def result(self) -> duckdb.DuckDBPyConnection:
        self._thread.join()
        if self._error is not None:
            raise self._error
        assert self._conn is not None
        return self._conn


class _Deadline:
    """Interrupts a cursor's query from a timer thread once ``seconds`` have passed.

    DuckDB releases the GIL while it runs a query and checks for interrupts between vectors, so
    the query stops within milliseconds; the cursor's connection, and the process, stay usable.
    """

    def __init__(self, cursor: duckdb.DuckDBPyConnection, seconds: float) -> None:
        self.fired = False
        self._cursor = cursor
        self._finished = False
        self._lock = threading.Lock()  # no interrupt once the query is over and its cursor closing
        self._timer = threading.Timer(seconds, self._interrupt)
        self._timer.daemon = True
        self._timer.start()

    def _interrupt(self) -> None:
        with self._lock:
            if not self._finished:
                self.fired = True
                self._cursor.interrupt()

    def cancel(self) -> None:
        with self._lock:
            self._finished = True
        self._timer.cancel()


def _first_line(exc: Exception) -> str:
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__

"""The layer build: trims, deterministic zips, the size check; and (marked ``layers``) a real build.

The real build installs the locked wheels for both architectures (from the package index, or
uv's cache), checks both against Lambda's 250 MB and runs the smoke test of each architecture
with Python 3.12: this machine's natively, the other under qemu's user-mode emulation when this
machine has it and an interpreter for it, or it is skipped saying what is missing. It takes about
two minutes, so CI runs it with the rest.
"""

from __future__ import annotations

import zipfile
from datetime import datetime, timedelta
from pathlib import Path
from unittest.mock import MagicMock

import pytest
from functions.compact.handler import COMPACTION, CONTINUOUS_QUERIES, IMPORT, RETENTION
from layers.build import (
    CORE_SOURCE,
    FUNCTION_FOLDERS,
    FUNCTION_LAYERS,
    FUNCTIONS_SOURCE,
    LAMBDA_UNZIPPED_LIMIT,
    LAYERS,
    LayerInfo,
    Manifest,
    botocore_services,
    build,
    find_python,
    trim,
    write_zip,
)
from layers.check import HOST_ARCH, CheckFailed, Unavailable, check_sizes, native_answers, smoke
from layers.native_probe import INTEGERS, TIMESTAMPS_S
from layers.services import UnreadableService, boto3_services
from layers.smoke.routes import IMPORT_TASK, QUERY_ROUTES, ROUTES, SCHEDULED_TASKS, WRITE_ROUTES

from arcs.http.api import routers


def _touch(root: Path, *names: str) -> None:
    for name in names:
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"x" * 10)


def test_trim_removes_what_no_function_imports_and_keeps_what_they_do(tmp_path: Path) -> None:
    kept = [
        "pyarrow/lib.cpython-312-x86_64-linux-gnu.so",
        "pyarrow/libarrow.so.2600",
        "pyarrow/libarrow_python.so.2600",
        "pyarrow/libarrow_dataset.so.2600",
        "pyarrow/libarrow_substrait.so.2600",
        "pyarrow/_parquet.cpython-312-x86_64-linux-gnu.so",
        "pyarrow/fs.py",
        "zstandard/backend_c.cpython-312-x86_64-linux-gnu.so",
        "botocore/data/s3/2006-03-01/service-2.json.gz",
        "botocore/data/sqs/2012-11-05/service-2.json.gz",
        "botocore/data/dynamodb/2012-08-10/service-2.json.gz",
        "botocore/data/lambda/2015-03-31/service-2.json.gz",  # the compaction trigger's client
        "botocore/data/secretsmanager/2017-10-17/service-2.json.gz",
        "botocore/data/sts/2011-06-15/service-2.json.gz",
        "botocore/data/endpoints.json",
        "duckdb_extension_httpfs/extensions/v1.5.5/httpfs.duckdb_extension",
    ]
    removed = [
        "pyarrow/_flight.cpython-312-x86_64-linux-gnu.so",
        "pyarrow/libarrow_flight.so.2600",
        "pyarrow/libarrow_s3.so.2600",
        "pyarrow/libarrow_python.so",
        "pyarrow/libarrow_python.so.2600.1.0",
        "pyarrow/tests/test_array.py",
        "pyarrow/include/arrow/api.h",
        "pyarrow/lib.pyx",
        "pyarrow/__init__.pyi",
        "zstandard/_cffi.cpython-312-x86_64-linux-gnu.so",
        "botocore/data/ec2/2016-11-15/service-2.json.gz",
        "msgpack/__pycache__/fallback.cpython-311.pyc",
    ]
    _touch(tmp_path, *kept, *removed)
    trim(tmp_path)
    assert [name for name in kept if not (tmp_path / name).exists()] == []
    assert [name for name in removed if (tmp_path / name).exists()] == []


def test_layer_zips_are_the_same_bytes_on_every_build(tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    _touch(tree, "python/b.py", "python/a/x.py", "python/a/lib.so")
    (tree / "python/a/lib.so").chmod(0o755)
    write_zip(tree, tmp_path / "one.zip")
    (tree / "python/b.py").touch()  # a newer time must not change the zip
    write_zip(tree, tmp_path / "two.zip")
    assert (tmp_path / "one.zip").read_bytes() == (tmp_path / "two.zip").read_bytes()
    with zipfile.ZipFile(tmp_path / "one.zip") as archive:
        assert archive.namelist() == ["python/a/lib.so", "python/a/x.py", "python/b.py"]
        assert archive.getinfo("python/a/lib.so").external_attr >> 16 == 0o755


def _manifest(**unzipped: int) -> Manifest:
    layers = {name: LayerInfo(name, f"{name}.zip", size // 3, size, []) for name, size in unzipped.items()}
    return Manifest("arm64", "3.12", True, layers)


def test_size_check_fails_a_function_over_lambdas_unzipped_limit(tmp_path: Path) -> None:
    for folder in set(FUNCTION_FOLDERS.values()):
        _touch(tmp_path, f"{folder}/handler.py")
    report = check_sizes(_manifest(duckdb=100_000_000, deps=150_000_000, core=1_000_000), tmp_path)
    assert "query" in report
    with pytest.raises(CheckFailed, match=r"over Lambda's unzipped limit: query, tasks"):
        check_sizes(_manifest(duckdb=100_000_000, deps=162_000_000, core=1_000_000), tmp_path)
    # Functions without DuckDB still fit the same layers.
    check_sizes(_manifest(duckdb=200_000_000, deps=60_000_000, core=1_000_000), tmp_path, limit=LAMBDA_UNZIPPED_LIMIT)
    with pytest.raises(CheckFailed):
        check_sizes(_manifest(duckdb=1, deps=LAMBDA_UNZIPPED_LIMIT, core=1), tmp_path)


def test_every_function_gets_the_core_and_only_sql_functions_get_duckdb() -> None:
    assert set(LAYERS) == {"duckdb", "deps", "core"}
    for function, layers in FUNCTION_LAYERS.items():
        assert {"deps", "core"} <= set(layers), function
        assert ("duckdb" in layers) == (function in {"query", "tasks"}), function
        assert len(layers) <= 5  # Lambda's limit


def test_the_layers_keep_botocore_models_of_every_service_the_code_makes_clients_for() -> None:
    used = boto3_services([CORE_SOURCE, FUNCTIONS_SOURCE])
    assert {"s3", "sqs", "dynamodb", "secretsmanager", "lambda"} <= used
    assert used <= botocore_services()


def test_the_service_scan_reads_literals_and_forwarded_parameters_and_refuses_the_rest(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text(
        "import boto3\n"
        "boto3.client('kinesis')\n"
        "boto3.resource(service_name='dynamodb')\n"
        "def make(session, service, region):\n"
        "    return lambda: session.client(service, region_name=region)\n"
        "make(None, 'events', 'eu-west-1')\n"
        "make(None, service='scheduler', region='eu-west-1')\n"
        "import httpx\n"
        "httpx.Client()\n"
    )
    assert boto3_services([tmp_path]) == {"kinesis", "dynamodb", "events", "scheduler"}
    (tmp_path / "b.py").write_text("import boto3\nNAME = 'sns'\nboto3.client(NAME)\n")
    with pytest.raises(UnreadableService, match=r"b\.py:3"):
        boto3_services([tmp_path])
    (tmp_path / "b.py").write_text("import boto3\ndef make(service):\n    return boto3.client(service)\nmake(NAME)\n")
    with pytest.raises(UnreadableService, match=r"b\.py:4: make\(\) is not given a service name literal"):
        boto3_services([tmp_path])


def test_the_smoke_calls_every_route_of_the_api_through_the_function_that_serves_it() -> None:
    runtime = MagicMock()
    served = {
        part: {
            (method, rule)
            for factory in routers(part)
            for rule, methods, *_ in factory(runtime)._routes
            for method in methods
        }
        for part in ("edge", "query")
    }
    assert served["edge"] == WRITE_ROUTES
    assert served["query"] == QUERY_ROUTES
    assert set(SCHEDULED_TASKS) == {COMPACTION, CONTINUOUS_QUERIES, RETENTION}
    assert IMPORT_TASK == IMPORT


# --- the real build -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Both architectures' layers, built once from the lock for the tests below."""
    python = find_python()
    if python is None or HOST_ARCH is None:
        pytest.skip("needs a Python 3.12 interpreter on x86_64 or arm64 (set LAYERS_PYTHON)")
    build_dir = tmp_path_factory.mktemp("layers")
    for arch in ("arm64", "x86_64"):
        build(arch, build_dir, python)
    return build_dir


@pytest.mark.layers
@pytest.mark.timeout(600)
def test_built_layers_fit_lambda_and_are_reproducible(built: Path) -> None:
    python = find_python()
    assert python is not None
    for arch in ("arm64", "x86_64"):
        manifest = Manifest.load(built / arch / "manifest.json")
        print(check_sizes(manifest))
        with zipfile.ZipFile(built / arch / "duckdb.zip") as archive:
            names = set(archive.namelist())
        assert "python/duckdb_extension_httpfs/extensions/v1.5.5/httpfs.duckdb_extension" in names
        assert not [n for n in names if "/tests/" in n or n.endswith(".pyi")]
        with zipfile.ZipFile(built / arch / "deps.zip") as archive:
            models = {
                n.split("/")[3]
                for n in archive.namelist()
                if n.startswith("python/botocore/data/") and n.count("/") > 3
            }
        assert models == botocore_services()
        with zipfile.ZipFile(built / arch / "core.zip") as archive:
            names = set(archive.namelist())
        assert "python/arcs/query/engine.py" in names
        assert "python/arcs/query/__pycache__/engine.cpython-312.pyc" in names  # /opt is read-only in Lambda
        assert not [n for n in names if not n.startswith("python/")]  # nothing beside python/
        # arcs.native's library, compiled for the layer's architecture (ELF e_machine), without its source.
        assert not [n for n in names if n.endswith(".c")]
        with zipfile.ZipFile(built / arch / "core.zip") as archive:
            library = archive.read("python/arcs/native/_arcs_native.so")
        assert library[:4] == b"\x7fELF"
        assert int.from_bytes(library[18:20], "little") == {"arm64": 183, "x86_64": 62}[arch]
    # Reproducible: another build (elsewhere) of the same lock gives the same zips, byte for byte.
    again = build("arm64", built / "again", python)
    for name in again.layers:
        first = (built / "arm64" / f"{name}.zip").read_bytes()
        assert (built / "again" / "arm64" / f"{name}.zip").read_bytes() == first, name


@pytest.mark.layers
@pytest.mark.timeout(1800)
@pytest.mark.parametrize("arch", ["x86_64", "arm64"])
def test_built_layers_alone_run_every_function_and_route(built: Path, arch: str) -> None:
    try:
        out = smoke(arch, built)
    except Unavailable as exc:
        pytest.skip(str(exc))
    assert out.startswith("smoke ok: python 3.12"), out
    assert f"{len(ROUTES)} routes" in out, out


@pytest.mark.layers
@pytest.mark.timeout(600)
def test_each_architectures_native_library_answers_as_python_does(built: Path) -> None:
    """Where the whole smoke test cannot run a foreign architecture, its C library still runs,
    under emulation, and must give this machine's answers, which are Python's own."""
    assert HOST_ARCH is not None
    here = native_answers(HOST_ARCH, built)["answers"]
    assert here["int64"] == [str(v) for v in INTEGERS]
    epoch = datetime(1970, 1, 1)
    assert here["timestamps_0"] == [(epoch + timedelta(seconds=s)).isoformat() for s in TIMESTAMPS_S]
    for arch in {"arm64", "x86_64"} - {HOST_ARCH}:
        try:
            there = native_answers(arch, built)
        except Unavailable as exc:
            pytest.skip(str(exc))
        assert there["answers"] == here, arch

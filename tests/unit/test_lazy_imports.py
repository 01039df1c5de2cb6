"""Each Lambda function loads only what it runs: checked in fresh interpreters, as cold starts are."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from layers.build import hide_packages_the_layers_lack

ROOT = Path(__file__).resolve().parents[2]

#: Builds a function's app (the query function's also connects DuckDB) without any AWS call.
PROBE = """
import importlib.util, json, sys
spec = importlib.util.spec_from_file_location("probe_handler", sys.argv[1])
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
from arcs.runtime import lambda_runtime
if sys.argv[2] == "runtime":
    lambda_runtime()
elif sys.argv[2] != "none":
    from arcs.http.api import lambda_app
    lambda_app(sys.argv[2])
if sys.argv[2] == "query":
    lambda_runtime().engine.connection()
if sys.argv[2] == "query" and sys.argv[3:] == ["answer"]:
    # A query without tables (no AWS call), answered in both formats, as the routes render it.
    from arcs.query.results import to_arrow_stream, to_json_document
    from arcs.auth.tokens import Principal
    caller = Principal("probe", "probe", frozenset({"admin"}), ())
    sql = "SELECT 1 AS i, 1.0 AS f, 'a' || chr(34) || chr(10) AS s, TIMESTAMPTZ '2024-01-01' AS t, DATE '2024-01-01' d"
    result = lambda_runtime().queries.run(sql, "default", caller)
    row = [1, 1.0, "a" + chr(34) + chr(10), "2024-01-01T00:00:00.000000Z", "2024-01-01"]
    assert json.loads(to_json_document(result))["data"] == [row]
    to_arrow_stream(result.table)
print(json.dumps(sorted(sys.modules)))
"""


def loaded_modules(handler: str, part: str, tmp_path: Path, *extra: str) -> set[str]:
    env = {name: value for name, value in os.environ.items() if not name.startswith(("AWS_", "ARCS_"))}
    env.update(
        {
            "ARCS_BACKEND": "aws",
            "ARCS_BUCKET": "lazy-bucket",
            "ARCS_TOKENS_TABLE": "lazy-tokens",
            "ARCS_CATALOG_TABLE": "lazy-catalog",
            "ARCS_LEASES_TABLE": "lazy-leases",
            "ARCS_QUEUE_URL": "http://127.0.0.1:9/123456789012/lazy",
            "ARCS_WORK_DIR": str(tmp_path / "work"),
            "AWS_ENDPOINT_URL": "http://127.0.0.1:9",
            "AWS_REGION": "us-east-1",
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
        }
    )
    # The layers hold neither pandas nor numpy, but the dev environment does (the clickbench extra),
    # and pyarrow and DuckDB import them whenever they find them: hide them, as the function's path would.
    hidden = hide_packages_the_layers_lack(tmp_path / "not-in-layers")
    env["PYTHONPATH"] = os.pathsep.join([str(hidden), *filter(None, [os.environ.get("PYTHONPATH")])])
    done = subprocess.run(
        [sys.executable, "-c", PROBE, str(ROOT / "functions" / handler), part, *extra],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=120,
    )
    assert done.returncode == 0, f"the probe exited with {done.returncode}: {done.stderr[-4000:]}"
    # The probe's answer is its last line: a function also prints its embedded metrics to stdout.
    return set(json.loads(done.stdout.splitlines()[-1]))


WRITE_SIDE = {
    "arcs.write.decoders",
    "arcs.write.edge",
    "arcs.write.ingest",
    "msgpack",
    "pyarrow.parquet",
    "arcs.http.routes.writes",
}
LOCAL_SIDE = {
    "sqlite3",
    "arcs.adapters.local.catalog",
    "arcs.adapters.local.sqlite_database",
    "arcs.adapters.local.tokens",
    "arcs.adapters.local.queue",
    "arcs.adapters.local.objects",
}


def test_importing_the_query_handler_loads_neither_duckdb_nor_boto3(tmp_path: Path) -> None:
    modules = loaded_modules("query/handler.py", "none", tmp_path)
    assert not {"duckdb", "pyarrow", "boto3"} & modules


def test_the_query_function_loads_no_write_path_and_no_local_adapter(tmp_path: Path) -> None:
    modules = loaded_modules("query/handler.py", "query", tmp_path)
    assert {"duckdb", "arcs.http.routes.queries"} <= modules
    assert not (WRITE_SIDE | LOCAL_SIDE) & modules


def test_answering_a_query_never_loads_the_pyarrow_compute_wrappers(tmp_path: Path) -> None:
    # pyarrow.compute makes a Python function per kernel on import: ~50 ms of a cold start.
    modules = loaded_modules("query/handler.py", "query", tmp_path, "answer")
    assert {"arcs.query.results", "pyarrow._compute"} <= modules
    assert "pyarrow.compute" not in modules


@pytest.mark.parametrize(("handler", "part"), [("ingest/edge.py", "edge"), ("authorizer/handler.py", "runtime")])
def test_the_edge_and_the_authorizer_never_load_duckdb(handler: str, part: str, tmp_path: Path) -> None:
    modules = loaded_modules(handler, part, tmp_path)
    assert not {"duckdb", "arcs.query.engine", "arcs.query.service", "arcs.http.routes.queries"} & modules
    assert not LOCAL_SIDE & modules

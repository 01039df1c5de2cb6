"""Cold start of the query function, as fresh processes, against a moto server it starts itself.

    uv run python -m benchmarks.cold_start [--runs 15] [--keep-work-dir]

Each run is a new interpreter (``python -c``, as Lambda starts one per container) that imports
``functions/query/handler.py`` and answers one ``POST /api/v1/query`` of ``SELECT 1`` through the
handler, as API Gateway invokes it after the authorizer: building the runtime, the boto3 clients,
the DuckDB connection, loading httpfs, creating the S3 secret and running the query. Every run
gets an empty work directory (Lambda's ``/tmp`` of a new container) unless ``--keep-work-dir``.

Printed per phase, median and minimum over the runs (figures are printed, never asserted):

- ``interpreter``: process spawn to the first line of the child (Python itself, ``site``).
- ``import handler``: importing ``functions/query/handler.py`` (Lambda's Init phase, minus the interpreter).
- ``first query``: the first invocation, from the handler call to its response.
- ``init + first query``: process spawn to the first answered query (the issue's cold-start figure).
- ``CPU, all threads``: the child's user + system time, start to exit. On a machine shared with
  other work the wall figures swing with the load; this one much less (but it cannot show work
  that overlaps on two cores, such as DuckDB opening while the routes import).

Also ``python -X importtime`` of the handler once, summed by top-level package.

Packages the layers lack: the dev environment holds numpy and pandas (the clickbench extra brings
them), which pyarrow and DuckDB import whenever they find them (~60-100 ms). The layers hold only
``uv.lock``'s runtime closure (``layers.build.locked_requirements``): each run's path hides those
two, checked absent from that closure first, so the child imports what the function would.

Bytecode: this machine sets ``PYTHONDONTWRITEBYTECODE`` and uv installs without ``.pyc`` files, so
every import would compile its source (~300 ms more). A layer built with pip ships ``.pyc``
files; the runs here read them from a scratch ``PYTHONPYCACHEPREFIX`` the warm-up run fills.
``--no-bytecode-cache`` measures the compile-everything case.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import boto3
from moto.server import ThreadedMotoServer

from arcs import envvars
from arcs.adapters.aws.wiring import AwsClients, create_resources
from arcs.settings import Settings

ROOT = Path(__file__).resolve().parents[1]
HANDLER = ROOT / "functions" / "query" / "handler.py"
EVENT = ROOT / "tests" / "functional" / "events" / "apigw_rest_proxy.json"
KEY = "bench"

#: The child: no import of its own beyond what the Lambda runtime's bootstrap already holds.
CHILD = """
import time
started = time.monotonic()
import importlib.util, json, sys, types
event = json.loads(sys.stdin.read())
spec = importlib.util.spec_from_file_location("query_handler", {handler!r})
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
imported = time.monotonic()
context = types.SimpleNamespace(
    function_name="arcs-query", memory_limit_in_mb=1024, aws_request_id="cold-start",
    invoked_function_arn="arn:aws:lambda:us-east-1:123456789012:function:arcs-query",
)
response = module.handler(event, context)
answered = time.monotonic()
assert response["statusCode"] == 200, response
print(json.dumps({{"started": started, "imported": imported, "answered": answered}}))
"""


def query_event() -> dict[str, Any]:
    event: dict[str, Any] = json.loads(EVENT.read_text())
    path = "/api/v1/query"
    event.update(path=path, httpMethod="POST", isBase64Encoded=False, body=json.dumps({"sql": "SELECT 1 AS one"}))
    event["headers"]["Content-Type"] = "application/json"
    event["multiValueHeaders"]["Content-Type"] = ["application/json"]
    event["pathParameters"] = {"proxy": path.lstrip("/")}
    event["requestContext"].update(path=f"/prod{path}", httpMethod="POST")
    # What the authorizer passes on for an admin token (arcs.auth.tokens.Principal.to_context).
    event["requestContext"]["authorizer"].update(
        token_id="bench", token_name="bench", permissions="admin", databases="", principalId="bench"
    )
    return event


def checked_hiding_dir(scratch: Path) -> Path:
    """``layers.build.hide_packages_the_layers_lack``'s directory, once ``uv.lock``'s runtime
    closure is checked not to ship any of ``NOT_IN_LAYERS`` (else hiding them would mislead)."""
    from layers.build import NOT_IN_LAYERS, hide_packages_the_layers_lack, locked_requirements

    shipped = {requirement.split("==")[0].strip().lower() for requirement in locked_requirements()}
    if leaked := shipped.intersection(NOT_IN_LAYERS):
        raise SystemExit(f"the layers now ship {sorted(leaked)}: stop hiding them from the child")
    return hide_packages_the_layers_lack(scratch)


def child_environment(
    settings: Settings, work_dir: str, pycache: str | None, hidden: Path | None = None
) -> dict[str, str]:
    ours = ("AWS_", "ARCS_", "PYTHONDONTWRITEBYTECODE", "PYTHONPYCACHEPREFIX", "PYTHONPATH")
    env = {name: value for name, value in os.environ.items() if not name.startswith(ours)}
    if hidden is not None:
        env["PYTHONPATH"] = str(hidden)
    if pycache is None:
        env["PYTHONDONTWRITEBYTECODE"] = "1"
    else:
        # Compiled once by the warm-up run, then read: what a layer built with pip ships (.pyc files).
        env["PYTHONPYCACHEPREFIX"] = pycache
    env.update(
        {
            envvars.BACKEND: "aws",
            envvars.BUCKET: settings.bucket,
            envvars.QUEUE_URL: settings.queue_url,
            envvars.TOKENS_TABLE: settings.tokens_table,
            envvars.CATALOG_TABLE: settings.catalog_table,
            envvars.LEASES_TABLE: settings.leases_table,
            envvars.AWS_ENDPOINT_URL: settings.aws_endpoint_url or "",
            envvars.AWS_REGION: settings.aws_region,
            envvars.WORK_DIR: work_dir,
            "AWS_ACCESS_KEY_ID": KEY,
            "AWS_SECRET_ACCESS_KEY": KEY,
            "POWERTOOLS_LOG_LEVEL": "WARNING",
        }
    )
    return env


def run_once(settings: Settings, event: str, work_dir: str, pycache: str | None, hidden: Path) -> dict[str, float]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    spawned = time.monotonic()  # CLOCK_MONOTONIC is system-wide on Linux: comparable with the child's
    done = subprocess.run(
        [sys.executable, "-c", CHILD.format(handler=str(HANDLER))],
        input=event,
        capture_output=True,
        text=True,
        env=child_environment(settings, work_dir, pycache, hidden),
        cwd=ROOT,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"the child failed:\n{done.stderr[-4000:]}")
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    marks = json.loads(done.stdout.strip().splitlines()[-1])
    return {
        "interpreter": marks["started"] - spawned,
        "import handler": marks["imported"] - marks["started"],
        "first query": marks["answered"] - marks["imported"],
        "init + first query": marks["answered"] - spawned,
        "CPU, all threads": after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime,
    }


def slowest_imports(
    settings: Settings, work_dir: str, pycache: str | None, hidden: Path, count: int = 12
) -> list[tuple[float, str]]:
    code = (
        "import importlib.util as u\n"
        f"s = u.spec_from_file_location('h', {str(HANDLER)!r})\n"
        "s.loader.exec_module(u.module_from_spec(s))"
    )
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", code],
        capture_output=True,
        text=True,
        env=child_environment(settings, work_dir, pycache, hidden),
        cwd=ROOT,
        check=True,
    )
    packages: Counter[str] = Counter()
    for line in done.stderr.splitlines():
        if not line.startswith("import time:") or "cumulative" in line:
            continue
        own_us, _cumulative, name = line.removeprefix("import time:").split("|")
        packages[name.strip().split(".")[0]] += int(own_us)
    return [(us / 1000, name) for name, us in packages.most_common(count)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument(
        "--keep-work-dir", action="store_true", help="reuse one work directory (httpfs already laid out)"
    )
    parser.add_argument("--no-bytecode-cache", action="store_true", help="compile every module in every run (no .pyc)")
    args = parser.parse_args()

    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # moto's server logs every request
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        host, port = server.get_host_and_port()
        endpoint = f"http://{host}:{port}"
        session = boto3.Session(aws_access_key_id=KEY, aws_secret_access_key=KEY, region_name="us-east-1")
        made = create_resources(
            AwsClients.create(session, endpoint_url=endpoint), "cold-data", "cold-q", "cold-dlq", "cold"
        )
        settings = Settings(
            backend="aws",
            bucket=made["bucket"],
            queue_url=made["queue_url"],
            tokens_table=made["tokens_table"],
            catalog_table=made["catalog_table"],
            leases_table=made["leases_table"],
            aws_endpoint_url=endpoint,
        )
        event = json.dumps(query_event())
        with tempfile.TemporaryDirectory(prefix="arcs-cold-") as scratch:
            pycache = None if args.no_bytecode_cache else f"{scratch}/pycache"
            hidden = checked_hiding_dir(Path(scratch) / "hidden")
            # The warm-up writes the .pyc files and fills the page cache.
            run_once(settings, event, f"{scratch}/warmup", pycache, hidden)
            results = [
                run_once(settings, event, f"{scratch}/{'shared' if args.keep_work_dir else i}", pycache, hidden)
                for i in range(args.runs)
            ]
            imports = slowest_imports(settings, f"{scratch}/importtime", pycache, hidden)
    finally:
        server.stop()

    python = sys.version.split()[0]
    work = "one, reused" if args.keep_work_dir else "empty each run (a new container)"
    bytecode = "compiled in every run" if args.no_bytecode_cache else "cached .pyc files, as a built layer ships"
    print(f"query function cold start, {args.runs} fresh processes, python {python}, {os.cpu_count()} CPUs")
    print(f"work directory: {work}\nbytecode: {bytecode}")
    print(f"{'phase':<22}{'median ms':>12}{'min ms':>10}")
    for phase in results[0]:
        values = [r[phase] * 1000 for r in results]
        print(f"{phase:<22}{statistics.median(values):>12.1f}{min(values):>10.1f}")
    print("\nimport time of the handler by top-level package (own ms, one run of python -X importtime):")
    for ms, name in imports:
        print(f"  {ms:8.1f}  {name}")


if __name__ == "__main__":
    main()

"""X-Ray tracing: what the query and ingest use cases annotate, on a real runtime (DuckDB over
Parquet), with Powertools Tracer given a provider that records instead of sending; and that
outside Lambda the tracer is off."""

from __future__ import annotations

import json
import numbers
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import AbstractAsyncContextManager, contextmanager
from pathlib import Path
from typing import Any

import pytest
from aws_lambda_powertools import Tracer
from aws_lambda_powertools.tracing.base import BaseProvider

from arcs import tracing
from arcs.http.server import IngestLoop
from arcs.runtime import LocalRuntime
from arcs.write.decoders import WireFormat
from arcs.write.edge import WriteRequest

SECRET = "a-secret-token-value-0123456789"


class Segment:
    def __init__(self, name: str) -> None:
        self.name = name
        self.annotations: dict[str, object] = {}

    def put_annotation(self, key: str, value: str | numbers.Number | bool) -> None:
        self.annotations[key] = value

    def put_metadata(self, key: str, value: Any, namespace: str = "default") -> None:
        raise AssertionError(f"no metadata expected, got {key}")

    def add_exception(self, exception: BaseException, stack: Any, remote: bool = False) -> None:
        return None


class RecordingProvider(BaseProvider):
    """Every subsegment opened, in order, with what was put on it."""

    def __init__(self) -> None:
        self.segments: list[Segment] = []

    @contextmanager
    def in_subsegment(self, name: str | None = None, **kwargs: Any) -> Iterator[Segment]:  # type: ignore[override]
        segment = Segment(name or "")
        self.segments.append(segment)
        yield segment

    def in_subsegment_async(self, name: str | None = None, **kwargs: Any) -> AbstractAsyncContextManager[Any]:
        raise NotImplementedError

    def put_annotation(self, key: str, value: str | numbers.Number | bool) -> None:
        raise AssertionError("annotations belong on a subsegment of ours, not on Lambda's segment")

    def put_metadata(self, key: str, value: Any, namespace: str = "default") -> None:
        raise AssertionError("no metadata expected")

    def patch(self, modules: Any) -> None:
        return None

    def patch_all(self) -> None:
        return None

    def named(self, name: str) -> list[Segment]:
        return [s for s in self.segments if s.name == name]


@pytest.fixture
def recorded(monkeypatch: pytest.MonkeyPatch) -> Iterator[RecordingProvider]:
    provider = RecordingProvider()
    Tracer._reset_config()  # Tracer keeps its settings per process: start from none
    recording = Tracer(service="arcs", provider=provider, disabled=False, auto_patch=False)
    monkeypatch.setattr(tracing, "tracer", lambda: recording)
    yield provider
    Tracer._reset_config()


def ingest(runtime: LocalRuntime) -> None:
    body = "\n".join(f"cpu,host=h{i % 4} v={i}i {1_700_000_000 + i}000000000" for i in range(100)).encode()
    runtime.writes.accept(WriteRequest(WireFormat.LINE_PROTOCOL, body, "default"))
    IngestLoop(runtime).drain_once(runtime.spool.take(10))


def test_ingest_annotates_its_subsegment(runtime: LocalRuntime, recorded: RecordingProvider) -> None:
    ingest(runtime)
    [segment] = recorded.named("## ingest")
    assert segment.annotations == {
        "database": "default",
        "measurement": "cpu",
        "writes": 1,
        "files": 1,
        "committed": 1,
        "duplicate": 0,
        "failed": 0,
        "poison": 0,
        "deferred": 0,
    }
    assert len(recorded.named("## ingest group")) == 1


def test_a_query_annotates_its_subsegment_and_times_duckdb(runtime: LocalRuntime, recorded: RecordingProvider) -> None:
    ingest(runtime)
    principal = runtime.tokens.verify(runtime.tokens.bootstrap(SECRET) or SECRET)
    recorded.segments.clear()

    runtime.queries.run("SELECT host, count(*) FROM cpu GROUP BY host", "default", principal)
    [query] = recorded.named("## query")
    bytes_read = query.annotations.pop("bytes_read")
    assert isinstance(bytes_read, int) and bytes_read > 0
    assert query.annotations == {"database": "default", "measurement": "cpu", "status": "200", "files": 1, "rows": 4}
    assert [s.name for s in recorded.segments] == ["## query", "## duckdb"]

    recorded.segments.clear()
    with pytest.raises(Exception, match="not found"):
        runtime.queries.run("SELECT * FROM nowhere", "default", principal)
    [failed] = recorded.named("## query")
    assert failed.annotations == {"database": "default", "status": "404", "files": 0, "bytes_read": 0, "rows": 0}


def test_a_handler_is_a_subsegment_without_its_response(recorded: RecordingProvider) -> None:
    """The response stays out of the trace (a query's result is no segment's size); ColdStart is put."""
    traced = tracing.traced_handler(lambda event, context: {"body": "x" * 100_000})
    assert traced({}, None) == {"body": "x" * 100_000}
    [segment] = recorded.segments
    assert segment.name == "## <lambda>"
    assert segment.annotations["ColdStart"] in (True, False)


def test_outside_lambda_the_tracer_is_off_and_every_call_a_no_op(runtime: LocalRuntime) -> None:
    """No LAMBDA_TASK_ROOT (the standalone server, ``arcs local``, tests): no Tracer, so nothing
    reaches for a daemon or imports X-Ray's SDK."""
    assert tracing.tracer() is None
    with tracing.subsegment("## anything") as annotate:
        annotate(database="default")
    ingest(runtime)  # the use cases run as ever


REAL_SDK_PROBE = """
from aws_xray_sdk.core import xray_recorder
from arcs import tracing
ended = []
end_subsegment = xray_recorder.end_subsegment
def recording_end(*args, **kwargs):
    segment = xray_recorder.current_subsegment()
    ended.append([segment.name, segment.annotations])
    return end_subsegment(*args, **kwargs)
xray_recorder.end_subsegment = recording_end
@tracing.traced_handler
def handler(event, context):
    with tracing.subsegment("## query") as annotate:
        annotate(database="metrics", status="200", files=3, measurement=None)
    return {"ok": True}
assert handler({}, None) == {"ok": True}
print(json.dumps([tracing.tracer().disabled, ended]))
"""


def test_inside_lambda_the_real_sdk_takes_the_annotations_on_our_subsegments(tmp_path: Path) -> None:
    """As Lambda runs it (``LAMBDA_TASK_ROOT`` and a sampled trace header), through X-Ray's own SDK:
    annotations on Lambda's own segment would raise; on our subsegments they are kept."""
    env = {
        **os.environ,
        "LAMBDA_TASK_ROOT": str(tmp_path),
        "AWS_LAMBDA_FUNCTION_NAME": "arcs-query",
        "_X_AMZN_TRACE_ID": "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1",
        "AWS_XRAY_DAEMON_ADDRESS": "127.0.0.1:9",  # nothing listens; X-Ray's SDK sends over UDP
    }
    done = subprocess.run(
        [sys.executable, "-c", "import json\n" + REAL_SDK_PROBE], capture_output=True, text=True, env=env, timeout=120
    )
    assert done.returncode == 0, done.stderr[-3000:]
    disabled, ended = json.loads(done.stdout.splitlines()[-1])
    assert not disabled
    assert ended == [
        ["## query", {"database": "metrics", "status": "200", "files": 3}],
        ["## handler", {"ColdStart": True, "Service": "arcs"}],
    ]


OUTSIDE_PROBE = """
import sys
from pathlib import Path
from arcs import tracing
from arcs.http.server import IngestLoop
from arcs.runtime import local_runtime
from arcs.settings import Settings
from arcs.write.decoders import WireFormat
from arcs.write.edge import WriteRequest
runtime = local_runtime(Settings(data_dir=Path(sys.argv[1])))
runtime.writes.accept(WriteRequest(WireFormat.LINE_PROTOCOL, b"cpu,host=a v=1i 1700000000000000000", "default"))
IngestLoop(runtime).drain_once(runtime.spool.take(10))
@tracing.traced_handler
def handler(event, context):
    with tracing.subsegment("## query") as annotate:
        annotate(database="metrics")
    return "ok"
assert handler({}, None) == "ok"
print(sorted(name for name in sys.modules if name.startswith("aws_xray_sdk")))
"""


def test_outside_lambda_x_ray_s_sdk_is_never_imported(tmp_path: Path) -> None:
    """Its import costs the standalone server a fifth of a second of the interpreter on the first write."""
    env = {key: value for key, value in os.environ.items() if key != "LAMBDA_TASK_ROOT"}
    done = subprocess.run(
        [sys.executable, "-c", OUTSIDE_PROBE, str(tmp_path)], capture_output=True, text=True, env=env, timeout=120
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.splitlines()[-1] == "[]"

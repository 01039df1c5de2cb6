"""The tasks function: scheduled compaction, the trigger route's asynchronous invoke, retention
policies, and uploaded imports finished by Lambda's retry.

The world each test gets (``fn``): tests/functional/conftest.py and lambdas.py.
"""

from __future__ import annotations

import json
import time
from typing import Any

import httpx
import pytest

from tests.functional.lambdas import EVENTS, PREFIX, T0_NS, Lambda, context, lp, name

pytestmark = [
    pytest.mark.functional,
]


# --- compaction ----------------------------------------------------------------------------------
def test_scheduled_event_compacts_and_queries_answer_the_same(fn: Lambda) -> None:
    m = name("cpu")
    for n in range(4):
        fn.write(lp(m, 5, T0_NS + n * 10**6, host=f"h{n}"))
        assert fn.ingest(fn.receive(1)) == []
    sql = f"SELECT time, host, v FROM {m} ORDER BY time, host"
    before = fn.rows(sql)
    assert len(fn.runtime.catalog.list_files("default", m)) == 4
    event = json.loads((EVENTS / "eventbridge_scheduled.json").read_text())
    report = fn.handlers.tasks(event, context("arcs-tasks"))
    (job,) = report["jobs"]
    assert (job["status"], job["files_compacted"], job["files_written"]) == ("settled", 4, 1)
    assert report["inputs_deleted"] == 4
    assert fn.rows(sql) == before
    (output,) = fn.runtime.catalog.list_files("default", m)
    assert output.rows == 20
    keys = [o["Key"] for o in fn.aws.s3.list_objects_v2(Bucket=fn.aws.bucket, Prefix=f"{PREFIX}/default/")["Contents"]]
    assert keys == [output.key]


def test_trigger_route_invokes_the_tasks_function_asynchronously(fn: Lambda) -> None:
    m = name("cpu")
    for n in range(3):
        fn.write(lp(m, 2, T0_NS + n * 10**6, host=f"h{n}"))
        assert fn.ingest(fn.receive(1)) == []
    invoked: list[tuple[str, dict[str, Any]]] = []
    fn.runtime._invoke = lambda function, payload: invoked.append((function, json.loads(payload)))
    body = json.dumps({"database": "default", "measurement": m}).encode()
    response = fn.handlers.query(fn.api_event("POST", "/api/v1/compaction/trigger", body), context("arcs-query"))
    assert response["statusCode"] == 202, response
    assert invoked == [("arcs-tasks", {"source": "arcs.trigger", "database": "default", "measurement": m})]
    # What Lambda does with the asynchronous invocation:
    report = fn.handlers.tasks(invoked[0][1], context("arcs-tasks"))
    assert [job["measurement"] for job in report["jobs"]] == [m]
    history = fn.handlers.query(fn.api_event("GET", "/api/v1/compaction/history"), context("arcs-query"))
    assert [job["status"] for job in json.loads(history["body"])["jobs"]] == ["done"]


def test_tasks_function_runs_retention_policies_on_its_retention_task(fn: Lambda) -> None:
    m = name("cpu")
    fn.write(lp(m, 3))  # 2023: long expired
    fn.write(lp(m, 2, start_ns=time.time_ns() - 10**9, host="now"))  # within any retention
    assert fn.ingest(fn.receive(2)) == []
    body = json.dumps({"name": m, "database": "default", "measurement": m, "retention_days": 1, "buffer_days": 0})
    created = fn.handlers.query(fn.api_event("POST", "/api/v1/retention", body.encode()), context("arcs-query"))
    assert created["statusCode"] == 201, created
    dry = fn.handlers.tasks({"task": "retention", "dry_run": True}, context("arcs-tasks"))
    assert (dry["dry_run"], dry["partitions_deleted"], dry["rows_deleted"]) == (True, 1, 3)
    assert fn.count(m) == 5  # a dry run only counts
    answer = fn.handlers.tasks({"task": "retention"}, context("arcs-tasks"))
    assert (answer["task"], answer["partitions_deleted"], answer["rows_deleted"]) == ("retention", 1, 3)
    assert fn.count(m) == 2
    policy_id = json.loads(created["body"])["policy"]["id"]
    path = f"/api/v1/retention/{policy_id}/executions"
    history = json.loads(fn.handlers.query(fn.api_event("GET", path), context("arcs-query"))["body"])
    assert [(e["kind"], e["dry_run"], e["deleted_count"]) for e in history["executions"]] == [
        ("scheduled", False, 3),
        ("scheduled", True, 3),
    ]


# --- bulk import ----------------------------------------------------------------------------------
def test_an_empty_upload_is_refused_at_completion_and_may_be_put_again(fn: Lambda) -> None:
    m = name("cpu")
    query = {"format": "lp", "import_id": "empty-1", "db": "default"}
    created = fn.handlers.query(fn.api_event("POST", "/api/v1/import/uploads", query=query), context("arcs-query"))
    url = json.loads(created["body"])["upload"]["url"]
    assert httpx.put(url, content=b"").status_code == 200
    invoked: list[dict[str, Any]] = []
    fn.runtime._invoke = lambda function, payload: invoked.append(json.loads(payload))
    path = "/api/v1/import/uploads/empty-1/complete"
    refused = fn.handlers.query(fn.api_event("POST", path, query={"db": "default"}), context("arcs-query"))
    assert refused["statusCode"] == 400, refused
    assert "empty" in json.loads(refused["body"])["error"]
    assert invoked == []
    status = fn.handlers.query(
        fn.api_event("GET", "/api/v1/import/status/empty-1", query={"db": "default"}), context("arcs-query")
    )
    assert json.loads(status["body"])["import"]["state"] == "awaiting_upload"
    # The file put again (the URL is valid for an hour) completes and is imported.
    assert httpx.put(url, content=(lp(m, 10) + "\n").encode()).status_code == 200
    done = fn.handlers.query(fn.api_event("POST", path, query={"db": "default"}), context("arcs-query"))
    assert done["statusCode"] == 202, done
    assert fn.handlers.tasks(invoked[0], context("arcs-tasks"))["state"] == "done"
    assert fn.count(m) == 10


def test_an_uploaded_import_cut_short_is_finished_by_lambdas_retry_and_stored_once(
    fn: Lambda, monkeypatch: pytest.MonkeyPatch
) -> None:
    from arcs.write.imports import chunks, store

    monkeypatch.setattr(chunks, "CHUNK_BYTES", 4096)  # about 100 lines a chunk
    m = name("cpu")
    _url, task = _completed_upload(fn, "upload-1", (lp(m, 2000) + "\n").encode())
    assert task == {"task": "import", "database": "default", "import_id": "upload-1"}

    class Timeout(BaseException):
        """The function's timeout: the invocation ends where it is."""

    sink = store.IngestSink.__call__
    calls = {"n": 0}

    def cut_short(self: store.IngestSink, writes: list[Any]) -> None:
        calls["n"] += 1
        if calls["n"] == 5:
            raise Timeout
        sink(self, writes)

    monkeypatch.setattr(store.IngestSink, "__call__", cut_short)
    fn.runtime.importer.group_bytes = 1  # every chunk an ingest attempt of its own
    with pytest.raises(Timeout):
        fn.handlers.tasks(task, context("arcs-tasks"))
    assert 0 < fn.count(m) < 2000
    # Lambda retries the event; a duplicate delivery of it changes nothing.
    assert fn.handlers.tasks(task, context("arcs-tasks"))["state"] == "done"
    assert fn.handlers.tasks(task, context("arcs-tasks"))["state"] == "done"
    assert fn.count(m) == 2000
    status = fn.handlers.query(
        fn.api_event("GET", "/api/v1/import/status/upload-1", query={"db": "default"}), context("arcs-query")
    )
    assert json.loads(status["body"])["import"]["rows_imported"] == 2000
    assert (
        fn.runtime.uploads is not None
        and fn.runtime.uploads.uploaded(str(fn.runtime.import_ledger.upload_key("default", "upload-1"))) is None
    )


def _completed_upload(fn: Lambda, import_id: str, data: bytes) -> tuple[str, dict[str, Any]]:
    """An upload put and completed; its URL (still valid) and the task event completion queued."""
    query = {"format": "lp", "import_id": import_id, "db": "default"}
    created = fn.handlers.query(fn.api_event("POST", "/api/v1/import/uploads", query=query), context("arcs-query"))
    assert created["statusCode"] == 200, created
    url = json.loads(created["body"])["upload"]["url"]
    assert httpx.put(url, content=data).status_code == 200
    invoked: list[dict[str, Any]] = []
    fn.runtime._invoke = lambda function, payload: invoked.append(json.loads(payload))
    path = f"/api/v1/import/uploads/{import_id}/complete"
    done = fn.handlers.query(fn.api_event("POST", path, query={"db": "default"}), context("arcs-query"))
    assert done["statusCode"] == 202, done
    return url, invoked[0]


def test_an_upload_put_again_after_its_completion_is_not_imported(fn: Lambda) -> None:
    m = name("cpu")
    url, task = _completed_upload(fn, "replaced-1", (lp(m, 100) + "\n").encode())
    # The URL stays valid for its hour: another file put before the import reads it.
    assert httpx.put(url, content=(lp(m, 50) + "\nnot line protocol\n").encode()).status_code == 200
    assert fn.handlers.tasks(task, context("arcs-tasks"))["state"] == "failed"
    answer = fn.handlers.query(
        fn.api_event("GET", "/api/v1/import/status/replaced-1", query={"db": "default"}), context("arcs-query")
    )
    status = json.loads(answer["body"])["import"]
    assert status["error_status"] == 409 and "changed" in status["error"], status
    assert fn.count(m) == 0


def test_an_upload_put_again_while_it_is_imported_changes_nothing_imported(
    fn: Lambda, monkeypatch: pytest.MonkeyPatch
) -> None:
    from arcs.adapters.aws import objects
    from arcs.write.imports import chunks, decompress, store

    monkeypatch.setattr(chunks, "CHUNK_BYTES", 4096)  # about 100 lines a chunk
    # Each chunk read from the bucket as it is needed, not the whole file at once.
    monkeypatch.setattr(objects, "_RANGE_BYTES", 4096)
    monkeypatch.setattr(decompress, "_READ", 4096)
    m = name("cpu")
    url, task = _completed_upload(fn, "replaced-2", (lp(m, 3000) + "\n").encode())
    sink = store.IngestSink.__call__
    calls = {"n": 0}

    def replaced_midway(self: store.IngestSink, writes: list[Any]) -> None:
        calls["n"] += 1
        if calls["n"] == 2:  # the first chunks are stored: the rest must come from the same file
            assert httpx.put(url, content=b"bad line\n" * 5000).status_code == 200
        sink(self, writes)

    monkeypatch.setattr(store.IngestSink, "__call__", replaced_midway)
    fn.runtime.importer.group_bytes = 1  # every chunk an ingest attempt of its own
    assert fn.handlers.tasks(task, context("arcs-tasks"))["state"] == "done"
    assert calls["n"] > 2 and fn.count(m) == 3000

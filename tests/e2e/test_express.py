"""``arcs local`` with an S3 Express directory bucket (a plain moto bucket under a directory
bucket's name): data files go there and only there, everything else stays in the general bucket,
and writes, queries, hand-offs, compaction, retention, deletes and a database drop all work.

This proves the routing and the DuckDB wiring, not S3 Express itself: moto neither requires
sessions nor lists like a directory bucket (tests/unit/test_express.py fakes that listing).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING

import boto3
import pytest
from botocore.config import Config

from tests.e2e.servers import Client, local
from tests.e2e.test_compaction import file_count, wait_for, write_small_files
from tests.e2e.test_retention_delete import count, fill, ok

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

pytestmark = pytest.mark.e2e

EXPRESS = "arcs-e2e--use1-az4--x-s3"
GENERAL = "arcs-e2e-general"  # the emulation's general-purpose bucket


def keys(s3: S3Client, bucket: str, prefix: str = "") -> list[str]:
    pages = s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
    return [item["Key"] for page in pages for item in page.get("Contents", [])]


@pytest.fixture(scope="module")
def express() -> Iterator[tuple[Client, S3Client]]:
    process = local(
        ARCS_LOCAL_RESOURCE_PREFIX=GENERAL,
        ARCS_EXPRESS_BUCKET=EXPRESS,
        ARCS_INGEST_BATCH_MESSAGES="1",  # one file per write: small files to compact
        ARCS_CLAIM_CHECK_BYTES="1",  # every write is staged as a claim-check object
        ARCS_QUERY_INLINE_MAX_BYTES="20000",  # big results are handed off through storage, buffered
        ARCS_QUERY_STREAM_MAX_BYTES="20000",  # or streamed
        ARCS_COMPACTION_MIN_AGE_S="0",
        ARCS_COMPACTION_MIN_FILES="4",
        ARCS_COMPACTION_GRACE_S="0",
        ARCS_LOCAL_CQ_SCHEDULE_S="0",
        ARCS_LOCAL_RETENTION_SCHEDULE_S="0",
    ).start()
    emulator = next(json.loads(line) for line in process.output if line.startswith('{"event": "emulator"'))
    assert (emulator["bucket"], emulator["express_bucket"]) == (GENERAL, EXPRESS)
    s3 = boto3.client(
        "s3",
        endpoint_url=emulator["endpoint"],
        region_name="us-east-1",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
        config=Config(signature_version="s3v4", s3={"addressing_style": "path"}),
    )
    client = Client(process.url)
    try:
        yield client, s3
    finally:
        client.http.close()
        s3.close()
        process.stop()


def test_writes_land_in_the_directory_bucket_and_queries_read_them_there(express: tuple[Client, S3Client]) -> None:
    client, s3 = express
    write_small_files(client, "net", 4)
    written = keys(s3, EXPRESS, "default/net/")
    assert len(written) == 4 and all(key.endswith(".parquet") for key in written)
    assert keys(s3, GENERAL, "default/") == []
    listing = client.http.get("/api/v1/databases/default/measurements").json()["measurements"]
    [net] = [m for m in listing if m["name"] == "net"]
    assert net["storage_path"] == f"s3://{EXPRESS}/default/net/"
    # A result too big for a Lambda response: handed off through the general bucket.
    response = client.http.post(
        "/api/v1/query", json={"sql": "SELECT repeat('x', 1000) AS pad, v FROM net ORDER BY v"}, follow_redirects=True
    )
    assert response.status_code == 200 and response.json()["row_count"] == 40
    assert len(keys(s3, GENERAL, "_arcs/results/")) == 1
    assert [key for key in keys(s3, EXPRESS) if key.startswith("_arcs/")] == []


def test_compaction_rewrites_in_the_directory_bucket(express: tuple[Client, S3Client]) -> None:
    client, s3 = express
    before = client.rows("SELECT time, host, v FROM net ORDER BY time, host")
    assert client.http.post("/api/v1/compaction/trigger", json={}).status_code == 202
    wait_for(client, "/api/v1/compaction/history", lambda a: [j["status"] for j in a["jobs"]] == ["done"])
    assert client.rows("SELECT time, host, v FROM net ORDER BY time, host") == before
    assert file_count(client, "net") == 1
    assert [key for key in keys(s3, EXPRESS, "default/net/") if "-c" in key.rsplit("/", 1)[-1]] != []


def test_retention_delete_and_drop_work_on_the_directory_bucket(express: tuple[Client, S3Client]) -> None:
    client, s3 = express
    old, recent = fill(client, "ret", "cpu")
    assert keys(s3, EXPRESS, "ret/cpu/") != [] and keys(s3, GENERAL, "ret/") == []
    body = {"name": "day", "database": "ret", "measurement": "cpu", "retention_days": 1, "buffer_days": 0}
    policy = ok(client.http.post("/api/v1/retention", json=body), 201)["policy"]
    done = ok(client.http.post(f"/api/v1/retention/{policy['id']}/execute", json={"confirm": True}))
    assert (done["status"], done["deleted_count"]) == ("succeeded", old)
    assert count(client, "ret", "cpu") == recent
    deleted = ok(client.http.post("/api/v1/delete", json={"database": "ret", "measurement": "cpu", "where": "v = 0"}))
    assert (deleted["deleted_count"], deleted["failed_files"]) == (1, [])
    assert count(client, "ret", "cpu") == recent - 1
    assert ok(client.http.delete("/api/v1/databases/ret", params={"confirm": "true"}))["success"]
    deadline = time.monotonic() + 10
    while keys(s3, EXPRESS, "ret/") and time.monotonic() < deadline:
        time.sleep(0.2)
    assert keys(s3, EXPRESS, "ret/") == []
    # Nothing but data in the directory bucket; no data in the general one.
    assert [key for key in keys(s3, EXPRESS) if key.startswith("_arcs/")] == []
    assert [key for key in keys(s3, GENERAL) if not key.startswith("_arcs/")] == []

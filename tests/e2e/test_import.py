"""Bulk import over HTTP: Arc's routes on the standalone server and through ``arcs local``."""

from __future__ import annotations

import gzip
import time
import zlib
from pathlib import Path

import httpx
import pytest
import zstandard

from tests.e2e.servers import TOKEN, Client, ServerProcess, standalone

pytestmark = pytest.mark.e2e


def lp(count: int, start: int = 0, measurement: str = "cpu") -> bytes:
    return b"".join(
        f"{measurement},host=h{i % 5},dc=d{i % 2} v={i}i,u={i}.25 {1_700_000_000_000_000_000 + i * 10**9}\n".encode()
        for i in range(start, start + count)
    )


def form(data: bytes, name: str = "file") -> tuple[bytes, str]:
    boundary = "----arcs-import-boundary"
    body = (
        (
            f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"; filename="export.lp"\r\n'
            "Content-Type: application/octet-stream\r\n\r\n"
        ).encode()
        + data
        + f"\r\n--{boundary}--\r\n".encode()
    )
    return body, f"multipart/form-data; boundary={boundary}"


def two_files(first: bytes, second: bytes) -> bytes:
    """A form of two ``file`` fields: which one would be the import is anybody's guess."""
    body, _ = form(first)
    closing = body.rindex(b"--\r\n")
    return body[:closing] + b"\r\n" + form(second)[0].split(b"\r\n", 1)[1]


def post(
    client: Client, kind: str, body: bytes, database: str, content_type: str = "text/plain", **params: str
) -> httpx.Response:
    return client.http.post(
        f"/api/v1/import/{kind}",
        content=body,
        params=params,
        headers={"x-arc-database": database, "Content-Type": content_type},
        timeout=300,
    )


def count(client: Client, database: str, measurement: str = "cpu") -> int:
    response = client.query(f"SELECT count(*) FROM {measurement}", database)
    if response.status_code != 200:
        return 0
    return int(response.json()["data"][0][0])


def test_import_of_a_form_file_is_stored_once_and_retried_imports_store_nothing(client: Client) -> None:
    body, content_type = form(gzip.compress(lp(5000)))
    first = post(client, "lp", body, "imp1", content_type, import_id="backfill-1", precision="ns")
    assert first.status_code == 200, first.text
    result = first.json()["result"]
    assert (result["rows_imported"], result["measurements"], result["database"]) == (5000, ["cpu"], "imp1")
    # Stored before the answer on the standalone server; on AWS the edge queued it, as a write.
    assert client.wait_count("cpu", 5000, "imp1") == 5000
    again = post(client, "lp", body, "imp1", content_type, import_id="backfill-1")
    assert again.status_code == 200 and again.json()["result"]["rows_imported"] == 5000
    status = client.http.get("/api/v1/import/status/backfill-1", headers={"x-arc-database": "imp1"})
    assert status.status_code == 200, status.text
    shown = status.json()["import"]
    assert (shown["state"], shown["rows_imported"], shown["chunks_stored"]) == ("done", 5000, shown["chunks"])
    assert count(client, "imp1") == 5000
    other = post(client, "lp", lp(3), "imp1", import_id="backfill-1")
    assert other.status_code == 409, other.text


def test_csv_and_parquet_at_arcs_paths(client: Client) -> None:
    csv = b"time,host,usage\n" + b"".join(f"{1_700_000_000 + i},h{i % 3},{i}.5\n".encode() for i in range(100))
    body, content_type = form(csv)
    response = post(
        client, "csv", body, "imp2", content_type, measurement="usage", time_format="epoch_s", tag_columns="host"
    )
    assert response.status_code == 200, response.text
    result = response.json()["result"]
    assert (result["measurement"], result["rows_imported"], result["columns"]) == (
        "usage",
        100,
        ["time", "host", "usage"],
    )
    assert result["time_range_min"] == "2023-11-14T22:13:20.000000000Z" and result["partitions_created"] == 1
    assert client.wait_count("usage", 100, "imp2") == 100
    assert client.rows("SELECT count(DISTINCT host) FROM usage", "imp2") == [[3]]
    refused = post(client, "parquet", csv, "imp2", measurement="p")
    assert refused.status_code == 400 and "not a Parquet file" in refused.text


@pytest.mark.parametrize(
    ("body", "content_type", "status", "message"),
    [
        (lp(10) + b"cpu,host=x v=zz 1\n" + lp(10, 10), "text/plain", 400, "line 11"),
        (form(lp(10))[0][:-40], form(b"")[1], 400, "truncated"),
        (form(lp(10), name="upload")[0], form(b"")[1], 400, "field name 'file'"),
        (lp(10), "multipart/form-data", 400, "boundary"),
        (gzip.compress(lp(10))[:-8], "text/plain", 400, "corrupt or truncated"),
        (zstandard.ZstdCompressor().compress(lp(10))[:-3], "text/plain", 400, "corrupt or truncated"),
        (b"", "text/plain", 400, "file is empty"),
        (b"# nothing but a comment\n", "text/plain", 400, "no rows"),
        (two_files(lp(10), b"not line protocol at all\n"), form(b"")[1], 400, "more than one 'file' field"),
    ],
    ids=[
        "bad-line",
        "truncated-form",
        "no-file-field",
        "no-boundary",
        "truncated-gzip",
        "truncated-zstd",
        "empty",
        "no-rows",
        "two-file-fields",
    ],
)
def test_hostile_files_are_a_4xx_that_stores_nothing(
    client: Client, body: bytes, content_type: str, status: int, message: str
) -> None:
    response = post(client, "lp", body, "hostile", content_type)
    assert response.status_code == status, response.text
    assert message in response.json()["error"]
    assert count(client, "hostile") == 0


def test_imports_need_write_permission_on_the_database(client: Client) -> None:
    made = client.http.post(
        "/api/v1/auth/tokens", json={"name": "import-reader", "permissions": ["read"], "databases": ["imp3"]}
    )
    reader = Client(client.url, made.json()["token"])
    scoped = client.http.post(
        "/api/v1/auth/tokens", json={"name": "import-writer", "permissions": ["write"], "databases": ["other"]}
    )
    writer = Client(client.url, scoped.json()["token"])
    try:
        assert post(reader, "lp", lp(5), "imp3").status_code == 403
        assert post(writer, "lp", lp(5), "imp3").status_code == 403
        assert count(client, "imp3") == 0
    finally:
        reader.http.close()
        writer.http.close()


# -- the standalone server alone: files of any size, crashes, memory -------------------------------


@pytest.fixture
def server_dir(tmp_path: Path) -> Path:
    return tmp_path / "data"


def big_file(path: Path, megabytes: int) -> int:
    """cpu-shaped lines, 50 hosts a second; the rows written."""
    rows = 0
    with open(path, "wb") as out:
        second = 1_700_000_000
        while out.tell() < megabytes * 1_000_000:
            block = "".join(
                f"cpu,host=host{h:02d},region=r{h % 4} user={(h + s) % 97}.5,system={s % 13}.25,procs={h}i "
                f"{(second + s) * 10**9}\n"
                for s in range(200)
                for h in range(50)
            )
            out.write(block.encode())
            rows += 200 * 50
            second += 200
    return rows


def vm(process: ServerProcess, field: str) -> int:
    assert process.process is not None
    for line in Path(f"/proc/{process.process.pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    raise AssertionError(field)


def test_a_large_file_streams_to_disk_and_memory_stays_far_below_its_size(tmp_path: Path, server_dir: Path) -> None:
    path = tmp_path / "big.lp"
    rows = big_file(path, 200)
    process = standalone(server_dir).start()
    client = Client(process.url)
    try:
        client.write("/api/v1/write/line-protocol", b"warm,host=a v=1 1700000000000000000")
        idle = vm(process, "VmRSS")
        with open(path, "rb") as body:
            response = client.http.post(
                "/api/v1/import/lp", content=body, headers={"x-arc-database": "big"}, timeout=600
            )
        assert response.status_code == 200, response.text
        assert response.json()["result"]["rows_imported"] == rows
        growth = vm(process, "VmHWM") - idle
        assert growth < 150 * 2**20, f"peak resident memory grew {growth / 2**20:.0f} MiB for a 200 MB file"
        assert count(client, "big") == rows
    finally:
        client.http.close()
        process.stop()


def test_kill_9_while_storing_loses_nothing_and_duplicates_nothing(tmp_path: Path, server_dir: Path) -> None:
    path = tmp_path / "crash.lp"
    rows = big_file(path, 60)
    process = standalone(server_dir).start()
    client = Client(process.url)
    try:
        with httpx.Client(base_url=process.url, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=600) as sender:
            import threading

            def send() -> None:
                with open(path, "rb") as body, pytest.raises(httpx.HTTPError):
                    sender.post(
                        "/api/v1/import/lp",
                        content=body,
                        params={"import_id": "crash-1"},
                        headers={"x-arc-database": "crash"},
                    )

            thread = threading.Thread(target=send)
            thread.start()
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline:
                status = client.http.get("/api/v1/import/status/crash-1", headers={"x-arc-database": "crash"})
                if status.status_code == 200 and status.json()["import"]["chunks_stored"] > 0:
                    break
                time.sleep(0.005)
            else:
                raise AssertionError("the import never started storing")
            process.kill()
            thread.join(30)
        restarted = standalone(server_dir).start()
        client.http.close()
        client = Client(restarted.url)
        try:
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline:
                shown = client.http.get("/api/v1/import/status/crash-1", headers={"x-arc-database": "crash"}).json()
                if shown["import"]["state"] == "done":
                    break
                time.sleep(0.1)
            assert shown["import"]["state"] == "done", shown
            assert count(client, "crash") == rows
            with open(path, "rb") as body:  # the client's retry after the lost answer
                retried = client.http.post(
                    "/api/v1/import/lp",
                    content=body,
                    params={"import_id": "crash-1"},
                    headers={"x-arc-database": "crash"},
                    timeout=600,
                )
            assert retried.status_code == 200 and retried.json()["result"]["rows_imported"] == rows
            assert count(client, "crash") == rows
            assert not any((server_dir / "imports").iterdir())  # the upload is gone once done
        finally:
            restarted.stop()
    finally:
        client.http.close()
        process.stop()


def test_a_decompression_bomb_stops_at_the_import_limit(server_dir: Path) -> None:
    squeeze = zlib.compressobj(9, zlib.DEFLATED, 31)
    bomb = b"".join(squeeze.compress(b"\n" * (1 << 20)) for _ in range(64)) + squeeze.flush()  # 64 MiB of newlines
    process = standalone(server_dir, ARCS_IMPORT_MAX_BYTES=str(16 << 20)).start()
    client = Client(process.url)
    try:
        response = post(client, "lp", bomb, "bomb")
        assert response.status_code == 413 and "import limit" in response.text, response.text
        too_big = post(client, "lp", lp(1) * 400_000, "bomb")  # 21 MB as sent
        assert too_big.status_code == 413, too_big.text
    finally:
        client.http.close()
        process.stop()


# -- AWS (arcs local): the file goes to the bucket through presigned URLs ---------------------------


def wait_done(client: Client, database: str, import_id: str) -> dict[str, object]:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        shown = client.http.get(f"/api/v1/import/status/{import_id}", headers={"x-arc-database": database})
        assert shown.status_code == 200, shown.text
        status: dict[str, object] = shown.json()["import"]
        if status["state"] in ("done", "failed"):
            return status
        time.sleep(0.1)
    raise AssertionError(f"import {import_id} did not finish")


def test_an_upload_through_a_presigned_url_is_imported_by_the_tasks_function(server: ServerProcess) -> None:
    client = Client(server.url)
    try:
        created = client.http.post(
            "/api/v1/import/uploads",
            params={"format": "lp", "import_id": "up-1"},
            headers={"x-arc-database": "upl"},
        )
        if server.args[0] == "serve":
            assert created.status_code == 400 and "POST it to /api/v1/import" in created.text
            return
        assert created.status_code == 200, created.text
        answer = created.json()
        data = lp(3000)
        put = httpx.put(answer["upload"]["url"], content=gzip.compress(data), timeout=60)
        assert put.status_code == 200, put.text
        completed = client.http.post(answer["complete"], headers={"x-arc-database": "upl"})
        assert completed.status_code == 202, completed.text
        status = wait_done(client, "upl", "up-1")
        assert (status["state"], status["rows_imported"]) == ("done", 3000)
        assert count(client, "upl") == 3000
        # Completing again, or asking for the same upload again, changes nothing.
        assert client.http.post(answer["complete"], headers={"x-arc-database": "upl"}).status_code == 202
        again = client.http.post(
            "/api/v1/import/uploads", params={"format": "lp", "import_id": "up-1"}, headers={"x-arc-database": "upl"}
        )
        assert again.status_code == 409
        assert count(client, "upl") == 3000
    finally:
        client.http.close()


def test_a_multipart_upload_and_a_refused_file_through_arcs_local(server: ServerProcess) -> None:
    if server.args[0] == "serve":
        pytest.skip("uploads through presigned URLs are the AWS deployment's")
    client = Client(server.url)
    try:
        data = lp(120_000)  # about 7 MB: a part of 5 MiB (S3's least but for the last) and the rest
        created = client.http.post(
            "/api/v1/import/uploads",
            params={"format": "lp", "import_id": "up-2", "parts": "2", "size": str(len(data))},
            headers={"x-arc-database": "upl2"},
        ).json()
        cut = 5 * 1024 * 1024
        etags = []
        for part, piece in zip(created["parts"], (data[:cut], data[cut:]), strict=True):
            put = httpx.put(part["url"], content=piece, timeout=60)
            assert put.status_code == 200, put.text
            etags.append({"part_number": part["part_number"], "etag": put.headers["ETag"]})
        done = client.http.post(created["complete"], json={"parts": etags}, headers={"x-arc-database": "upl2"})
        assert done.status_code == 202, done.text
        status = wait_done(client, "upl2", "up-2")
        assert (status["state"], status["rows_imported"]) == ("done", 120_000)
        small = client.http.post(
            "/api/v1/import/uploads",
            params={"format": "lp", "import_id": "up-small", "parts": "2"},
            headers={"x-arc-database": "upl2"},
        ).json()
        etags = [
            {
                "part_number": part["part_number"],
                "etag": httpx.put(part["url"], content=lp(10), timeout=60).headers["ETag"],
            }
            for part in small["parts"]
        ]
        too_small = client.http.post(small["complete"], json={"parts": etags}, headers={"x-arc-database": "upl2"})
        assert too_small.status_code == 400 and "EntityTooSmall" in too_small.text  # S3's 5 MiB least part
        bad = client.http.post(
            "/api/v1/import/uploads", params={"format": "lp", "import_id": "up-3"}, headers={"x-arc-database": "upl2"}
        ).json()
        httpx.put(bad["upload"]["url"], content=lp(10) + b"cpu,host=a v=bad 1\n", timeout=60)
        assert client.http.post(bad["complete"], headers={"x-arc-database": "upl2"}).status_code == 202
        refused = wait_done(client, "upl2", "up-3")
        assert refused["state"] == "failed" and "line 11" in str(refused["error"])
        assert count(client, "upl2") == 120_000
        too_big = client.http.post(
            "/api/v1/import/uploads",
            params={"format": "lp", "size": str(6 * 1024**3)},
            headers={"x-arc-database": "upl2"},
        )
        assert too_big.status_code == 413, too_big.text
    finally:
        client.http.close()


def test_a_file_posted_whole_beyond_what_an_invoke_carries_is_pointed_to_uploads(server: ServerProcess) -> None:
    if server.args[0] == "serve":
        pytest.skip("the standalone server streams any file to disk")
    client = Client(server.url)
    try:
        response = post(client, "lp", lp(120_000), "upl3")  # about 7 MB
        assert response.status_code == 413, response.text
        assert "/api/v1/import/uploads" in response.json()["error"]
    finally:
        client.http.close()


def test_a_line_longer_than_64_mib_is_refused_with_its_number(server: ServerProcess) -> None:
    if server.args[0] != "serve":
        pytest.skip("through the emulated gateway a body stops at the write limit first")
    client = Client(server.url)
    try:
        huge = lp(3) + b"cpu,host=a v=" + b"1" * (65 << 20) + b" 1700000000000000000\n"
        response = post(client, "lp", huge, "huge")
        assert response.status_code == 400, response.text
        assert "line 4: longer than 67108864 bytes" in response.json()["error"]
        assert count(client, "huge") == 0
    finally:
        client.http.close()

"""Telegraf's outputs as they post, byte for byte in shape: ``outputs.arc`` (columnar MessagePack,
gzip, the token in ``x-api-key``, the database in ``x-arc-database``; tags are plain columns, no
tag list; a field a metric lacks is nil), ``outputs.influxdb`` (line protocol, gzip, ``?db=``, Basic
auth) and ``outputs.influxdb_v2`` (line protocol, gzip, ``?bucket=&org=``, ``Authorization: Token``);
the stored rows are read back, against both runtimes.
"""

from __future__ import annotations

import base64
import gzip
import uuid
from typing import Any

import httpx
import msgpack
import pytest

from tests.e2e.servers import TOKEN, Client

pytestmark = pytest.mark.e2e

T0_MS = 1_700_000_000_000
USER_AGENT = "Telegraf/1.36.1 Go/1.24.4"


def database() -> str:
    return f"tg{uuid.uuid4().hex[:10]}"


def rows(client: Client, db: str, sql: str) -> list[list[Any]]:
    return client.rows(sql, db)


def arc_metrics(name: str, count: int) -> dict[str, Any]:
    """What ``outputs.arc`` makes of ``count`` metrics of one measurement: every column, tags and
    fields alike, one value per metric; ``load`` missing from the odd ones, ``note`` from all but
    the first, time in milliseconds."""
    return {
        "m": name,
        "columns": {
            "usage": [float(n) + 0.5 for n in range(count)],
            "count": list(range(count)),
            "big": [2**40 + n for n in range(count)],  # a uint64 field: msgpack's uint 64
            "up": [n % 2 == 0 for n in range(count)],
            "load": [n if n % 2 == 0 else None for n in range(count)],
            "note": ["first", *([None] * (count - 1))],
            "host": [f"h{n % 2}" for n in range(count)],
            "time": [T0_MS + n for n in range(count)],
        },
    }


def post_arc(client: Client, db: str, payload: Any) -> None:
    body = gzip.compress(msgpack.packb(payload))
    headers = {
        "Content-Type": "application/msgpack",
        "Content-Encoding": "gzip",
        "User-Agent": USER_AGENT,
        "x-api-key": TOKEN,
        "x-arc-database": db,
    }
    # Telegraf sends the key alone: no Authorization header.
    response = httpx.post(f"{client.url}/api/v1/write/msgpack", content=body, headers=headers, timeout=30)
    assert response.status_code in (200, 204), response.text


def test_outputs_arc_one_measurement(client: Client) -> None:
    db = database()
    post_arc(client, db, arc_metrics("cpu", 4))
    assert client.wait_count("cpu", 4, db) == 4
    got = rows(client, db, "SELECT epoch_ms(time), host, usage, count, big, up, load, note FROM cpu ORDER BY time")
    assert got == [
        [T0_MS, "h0", 0.5, 0, 2**40, True, 0, "first"],
        [T0_MS + 1, "h1", 1.5, 1, 2**40 + 1, False, None, None],
        [T0_MS + 2, "h0", 2.5, 2, 2**40 + 2, True, 2, None],
        [T0_MS + 3, "h1", 3.5, 3, 2**40 + 3, False, None, None],
    ]


def test_outputs_arc_uint64_past_int64_is_refused_whole_as_arc_does(client: Client) -> None:
    db = database()
    body = gzip.compress(msgpack.packb({"m": "cpu", "columns": {"big": [1, 2**63], "time": [T0_MS, T0_MS + 1]}}))
    headers = {
        "Content-Type": "application/msgpack",
        "Content-Encoding": "gzip",
        "x-api-key": TOKEN,
        "x-arc-database": db,
    }
    response = httpx.post(f"{client.url}/api/v1/write/msgpack", content=body, headers=headers, timeout=30)
    assert response.status_code == 400 and "int64" in response.json()["error"]


def test_outputs_arc_several_measurements_in_one_array(client: Client) -> None:
    db = database()
    post_arc(
        client, db, [arc_metrics("cpu", 3), {"m": "mem", "columns": {"used": [1.0, None], "time": [T0_MS, T0_MS + 5]}}]
    )
    assert client.wait_count("cpu", 3, db) == 3
    assert client.wait_count("mem", 2, db) == 2
    assert rows(client, db, "SELECT epoch_ms(time), used FROM mem ORDER BY time") == [[T0_MS, 1.0], [T0_MS + 5, None]]


LINES = (
    # As Telegraf's influx serializer writes them: sorted tags, ints with i, uints with u, escapes.
    "disk,device=sda1,host=h0,path=/var\\ log "
    'free=1024i,used_percent=12.5,label="a \\"b\\"",ok=true 1700000000000000000\n'
    "disk,device=sda2,host=h1 free=7u,used_percent=0 1700000001000000000\n"
)


def check_disk(client: Client, db: str) -> None:
    assert client.wait_count("disk", 2, db) == 2
    got = rows(
        client, db, "SELECT epoch_ns(time), device, host, path, free, used_percent, label, ok FROM disk ORDER BY time"
    )
    assert got == [
        [1_700_000_000_000_000_000, "sda1", "h0", "/var log", 1024, 12.5, 'a "b"', True],
        [1_700_000_001_000_000_000, "sda2", "h1", None, 7, 0.0, None, None],
    ]


def test_outputs_influxdb_v1(client: Client) -> None:
    db = database()
    basic = base64.b64encode(f"telegraf:{TOKEN}".encode()).decode()
    headers = {
        "Content-Type": "text/plain; charset=utf-8",
        "Content-Encoding": "gzip",
        "User-Agent": USER_AGENT,
        "Authorization": f"Basic {basic}",
    }
    response = client.http.post(f"/write?db={db}&rp=autogen", content=gzip.compress(LINES.encode()), headers=headers)
    assert response.status_code == 204, response.text
    check_disk(client, db)


def test_outputs_influxdb_v2(client: Client) -> None:
    db = database()
    headers = {
        "Content-Type": "text/plain; charset=utf-8",
        "Content-Encoding": "gzip",
        "User-Agent": USER_AGENT,
        "Authorization": f"Token {TOKEN}",
    }
    response = client.http.post(
        f"/api/v2/write?bucket={db}&org=my-org", content=gzip.compress(LINES.encode()), headers=headers
    )
    assert response.status_code == 204, response.text
    check_disk(client, db)

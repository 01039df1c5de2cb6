"""Values at the edges of what a write may hold, in all three formats over HTTP: integers beyond
2^53 into a float column, keys said twice, NaN and infinities."""

from __future__ import annotations

import json
import uuid

import msgpack
import pytest

from tests.e2e.servers import Client

pytestmark = pytest.mark.e2e

T0_NS = 1_700_000_000_000_000_000
BIG = 2**53 + 1  # the first integer a float64 cannot hold: it rounds to 2^53


def name(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:8]}"


def packed_map(pairs: list[tuple[str, bytes]]) -> bytes:
    """A MessagePack map written pair by pair, so a key may come twice (msgpack.packb takes a dict)."""
    assert len(pairs) < 16
    return bytes([0x80 | len(pairs)]) + b"".join(msgpack.packb(key) + value for key, value in pairs)


def big_integer_bodies(m: str) -> list[tuple[str, bytes]]:
    columns = {"time": [T0_NS + 1], "v": [BIG]}
    return [
        ("/api/v1/write/line-protocol", f"{m} v={BIG}i {T0_NS + 1}".encode()),
        ("/api/v1/write/msgpack", msgpack.packb({"m": m, "columns": columns})),
        ("/api/v1/write/json", json.dumps({"m": m, "columns": columns}).encode()),
        ("/api/v1/write/json", json.dumps([{"m": m, "fields": {"v": -BIG}, "time": T0_NS + 2}]).encode()),
    ]


def test_integers_beyond_2_to_the_53_widen_into_a_float_column_in_every_format(client: Client) -> None:
    m = name("wide")
    assert client.write("/api/v1/write/line-protocol", f"{m} v=1.5 {T0_NS}".encode()).status_code == 204
    for path, body in big_integer_bodies(m):
        response = client.write(path, body)
        assert response.status_code == 204, (path, response.text)
    # One request whose items disagree (an integer, then a float) widens the same way.
    mixed = [{"m": m, "fields": {"v": BIG}, "time": T0_NS + 3}, {"m": m, "fields": {"v": 2.5}, "time": T0_NS + 4}]
    assert client.write("/api/v1/write/msgpack", msgpack.packb(mixed)).status_code == 204
    assert client.wait_count(m, 7) == 7
    assert [row[0] for row in client.rows(f"SELECT v FROM {m} ORDER BY time")] == [
        1.5,
        2.0**53,  # the three bodies of the first time (same time, so in write order)
        2.0**53,
        2.0**53,
        -(2.0**53),
        2.0**53,
        2.5,
    ]


def repeated_key_bodies(m: str) -> list[tuple[str, str, bytes]]:
    """(the key said twice, route, body)."""
    columns_twice = packed_map(
        [("time", msgpack.packb([T0_NS])), ("v", msgpack.packb([1.0])), ("v", msgpack.packb([2.0]))]
    )
    fields_twice = packed_map([("v", msgpack.packb(1.0)), ("v", msgpack.packb(2.0))])
    tags_twice = packed_map([("host", msgpack.packb("a")), ("host", msgpack.packb("b"))])
    return [
        ("v", "/api/v1/write/msgpack", packed_map([("m", msgpack.packb(m)), ("columns", columns_twice)])),
        (
            "m",
            "/api/v1/write/msgpack",
            packed_map(
                [("m", msgpack.packb(m)), ("m", msgpack.packb(m + "x")), ("columns", msgpack.packb({"v": [1.0]}))]
            ),
        ),
        (
            "v",
            "/api/v1/write/msgpack",
            msgpack.packb([0])[:1] + packed_map([("m", msgpack.packb(m)), ("fields", fields_twice)]),
        ),
        (
            "host",
            "/api/v1/write/msgpack",
            packed_map([("m", msgpack.packb(m)), ("fields", msgpack.packb({"v": 1.0})), ("tags", tags_twice)]),
        ),
        (
            "v",
            "/api/v1/write/json",
            f'{{"m": "{m}", "columns": {{"time": [{T0_NS}], "v": [1.0], "v": [2.0]}}}}'.encode(),
        ),
        ("m", "/api/v1/write/json", f'{{"m": "{m}", "m": "{m}x", "columns": {{"v": [1.0]}}}}'.encode()),
        ("v", "/api/v1/write/json", f'[{{"m": "{m}", "fields": {{"v": 1.0, "v": 2.0}}}}]'.encode()),
        (
            "host",
            "/api/v1/write/json",
            f'{{"m": "{m}", "fields": {{"v": 1}}, "tags": {{"host": "a", "host": "b"}}}}'.encode(),
        ),
    ]


def test_a_key_said_twice_is_a_400_naming_it_and_stores_nothing(client: Client) -> None:
    m = name("twice")
    for key, path, body in repeated_key_bodies(m):
        response = client.write(path, body)
        assert response.status_code == 400, (key, path, body, response.text)
        assert f"{key!r}" in response.json()["error"] and "twice" in response.json()["error"], response.text
    assert client.query(f"SELECT count(*) FROM {m}").status_code == 404


@pytest.mark.parametrize("value", [float("nan"), float("inf"), float("-inf")], ids=["nan", "inf", "-inf"])
def test_nan_and_infinities_are_a_400_in_every_format_and_store_nothing(client: Client, value: float) -> None:
    m = name("finite")
    spelled = {"nan": "NaN", "inf": "Infinity", "-inf": "-Infinity"}[str(value)]
    overflow = "-1e999" if value < 0 else "1e999"  # JSON's only way to an infinity
    bodies = [  # (route, body, what the error says)
        ("/api/v1/write/line-protocol", f"{m} v={spelled} {T0_NS}".encode(), "field 'v'"),
        (
            "/api/v1/write/msgpack",
            msgpack.packb({"m": m, "columns": {"time": [T0_NS, T0_NS + 1], "v": [1.0, value]}}),
            "column 'v'",
        ),
        ("/api/v1/write/msgpack", msgpack.packb([{"m": m, "fields": {"v": value, "w": 1}, "time": T0_NS}]), "'v'"),
        ("/api/v1/write/json", f'{{"m": "{m}", "columns": {{"time": [{T0_NS}], "v": [{spelled}]}}}}'.encode(), "JSON"),
        ("/api/v1/write/json", f'{{"m": "{m}", "columns": {{"time": [{T0_NS}], "v": [{overflow}]}}}}'.encode(), "'v'"),
        ("/api/v1/write/json", f'[{{"m": "{m}", "fields": {{"v": {overflow}}}}}]'.encode(), "'v'"),
    ]
    for path, body, says in bodies:
        response = client.write(path, body)
        assert response.status_code == 400, (path, body, response.text)
        assert says in response.json()["error"], response.text
    assert client.query(f"SELECT count(*) FROM {m}").status_code == 404


def test_a_request_of_more_measurements_than_the_limit_is_a_400_and_stores_nothing(client: Client) -> None:
    from arcs.write.schema import MAX_MEASUREMENTS_PER_REQUEST

    prefix = name("many")
    lines = [f"{prefix}_{i} v={i}i {T0_NS + i}" for i in range(MAX_MEASUREMENTS_PER_REQUEST + 1)]
    response = client.write("/api/v1/write/line-protocol", "\n".join(lines).encode())
    assert response.status_code == 400, response.text
    assert f"the limit is {MAX_MEASUREMENTS_PER_REQUEST} per request" in response.json()["error"]
    assert client.query(f"SELECT count(*) FROM {prefix}_0").status_code == 404
    rows = client.rows("SHOW MEASUREMENTS")
    assert not any(str(row[0]).startswith(prefix) for row in rows)

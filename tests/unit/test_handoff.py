"""Handing results too big for a Lambda response off through storage: what counts, where they go, the URL."""

from __future__ import annotations

import base64
import json
from urllib.parse import parse_qs, urlparse

import boto3
import pytest

from arcs.adapters.aws.objects import S3Store
from arcs.adapters.aws.wiring import AwsClients
from arcs.query.handoff import ResultHandoff, proxy_body_cost


class RecordingStore:
    def __init__(self) -> None:
        self.objects: dict[str, tuple[bytes, str]] = {}

    def put_download(self, key: str, data: bytes, content_type: str) -> None:
        self.objects[key] = (data, content_type)

    def download_url(self, key: str, expires_in_s: int) -> str:
        return f"https://downloads.example/{key}?expires={expires_in_s}"


@pytest.mark.parametrize(
    "body",
    ['{"data":[["plain"]]}', '{"data":[["a \\"quoted\\" word"]]}', '["é", "日本", "🎉", "\\n"]', "", "x" * 1000],
)
def test_text_costs_what_json_dumps_makes_of_it_in_the_proxy_response(body: str) -> None:
    assert proxy_body_cost(body) == len(json.dumps({"body": body})) - len('{"body": }')


@pytest.mark.parametrize("size", [0, 1, 2, 3, 4, 1000, 6 * 1024 * 1024])
def test_bytes_cost_their_base64(size: int) -> None:
    assert proxy_body_cost(b"\xff" * size) == len(base64.b64encode(b"\xff" * size))


def test_a_body_under_the_limit_whose_escaping_is_over_it_is_handed_off() -> None:
    handoff = ResultHandoff(RecordingStore(), "arcs", inline_max_bytes=100, url_expiry_s=60)
    assert not handoff.too_big_to_answer("x" * 98)  # 100 with its quotes
    assert handoff.too_big_to_answer("x" * 99)
    assert handoff.too_big_to_answer('"' * 60)  # 60 characters, 122 escaped
    assert not handoff.too_big_to_answer(b"\x00" * 75)  # 100 in base64
    assert handoff.too_big_to_answer(b"\x00" * 76)


def test_hand_off_stores_the_body_under_the_results_prefix_and_links_to_it() -> None:
    store = RecordingStore()
    handoff = ResultHandoff(store, "arcs", inline_max_bytes=10, url_expiry_s=120)
    text = handoff.hand_off('{"é": 1}', "application/json", "json")
    binary = handoff.hand_off(b"\x00\x01", "application/vnd.apache.arrow.stream", "arrows")
    (text_key, text_object), (binary_key, binary_object) = store.objects.items()
    assert text_key.startswith("arcs/_arcs/results/") and text_key.endswith(".json")
    assert binary_key.startswith("arcs/_arcs/results/") and binary_key.endswith(".arrows")
    assert text_object == ('{"é": 1}'.encode(), "application/json")
    assert binary_object == (b"\x00\x01", "application/vnd.apache.arrow.stream")
    assert (text.url, text.size, text.expires_in_s) == (f"https://downloads.example/{text_key}?expires=120", 9, 120)
    assert binary.size == 2 and text_key != binary_key


def test_s3_download_urls_are_sigv4_on_the_buckets_regional_endpoint() -> None:
    session = boto3.Session(aws_access_key_id="testing", aws_secret_access_key="testing", region_name="eu-west-1")
    clients = AwsClients.create(session, region="eu-west-1")
    url = urlparse(S3Store(clients.s3, "arcs-data").download_url("arcs/_arcs/results/r.json", 300))
    query = parse_qs(url.query)
    assert (url.scheme, url.netloc) == ("https", "arcs-data.s3.eu-west-1.amazonaws.com")
    assert url.path == "/arcs/_arcs/results/r.json"
    assert query["X-Amz-Algorithm"] == ["AWS4-HMAC-SHA256"] and query["X-Amz-Expires"] == ["300"]
    assert "/eu-west-1/s3/aws4_request" in query["X-Amz-Credential"][0]
    clients.close()

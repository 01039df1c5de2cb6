"""S3 Express One Zone: directory bucket names, the routing of keys between the two buckets, the
clients boto3 and DuckDB use for the directory bucket. No network: fakes and request hooks."""

from __future__ import annotations

import io
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.awsrequest import AWSPreparedRequest, AWSResponse
from botocore.exceptions import ClientError

from arcs.adapters.aws.express import ExpressStore, duckdb_endpoint, zonal_endpoint, zone_id
from arcs.adapters.aws.objects import S3Store
from arcs.adapters.aws.wiring import AwsClients, aws_runtime_parts, s3_access
from arcs.errors import NotFound
from arcs.ports import ObjectInfo
from arcs.query.engine import BucketEndpoint, Engine, S3Access, secret_statements
from arcs.settings import ConfigError, Settings

EXPRESS = "arcs-data--use1-az4--x-s3"
GENERAL = "arcs-data"


# --- names and endpoints ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("bucket", "zone"),
    [(EXPRESS, "use1-az4"), ("a--b--usw2-az1--x-s3", "usw2-az1"), ("lz--usw2-lax1-az1--x-s3", "usw2-lax1-az1")],
)
def test_the_zone_id_comes_from_the_directory_bucket_name(bucket: str, zone: str) -> None:
    assert zone_id(bucket) == zone


@pytest.mark.parametrize(
    "bucket",
    [
        "arcs-data",
        "arcs-data--x-s3",
        "arcs--use1-az4",
        "Arcs--use1-az4--x-s3",
        "-a--use1-az4--x-s3",
        "a" * 50 + "--use1-az4--x-s3",
    ],
)
def test_a_name_that_is_not_a_directory_bucket_is_a_configuration_error(bucket: str) -> None:
    with pytest.raises(ConfigError, match="ARCS_EXPRESS_BUCKET"):
        zone_id(bucket)


def test_duckdb_reads_the_zonal_endpoint_on_aws_and_the_emulator_by_path() -> None:
    assert zonal_endpoint(EXPRESS, "us-east-1") == "s3express-use1-az4.us-east-1.amazonaws.com"
    assert duckdb_endpoint(EXPRESS, "us-east-1", None) == BucketEndpoint(
        EXPRESS, "s3express-use1-az4.us-east-1.amazonaws.com", True, "vhost"
    )
    assert duckdb_endpoint(EXPRESS, "us-east-1", "http://127.0.0.1:5000") == BucketEndpoint(
        EXPRESS, "127.0.0.1:5000", False, "path"
    )


def test_settings_name_the_data_bucket() -> None:
    env = {"ARCS_BACKEND": "aws", "ARCS_BUCKET": GENERAL}
    assert Settings.from_env(env).data_bucket == GENERAL
    express = Settings.from_env({**env, "ARCS_EXPRESS_BUCKET": f" {EXPRESS} "})
    assert (express.express_bucket, express.data_bucket, express.bucket) == (EXPRESS, EXPRESS, GENERAL)


# --- DuckDB: a second secret, scoped to the directory bucket ---------------------------------------


def access(express: BucketEndpoint | None, endpoint: str | None = None, token: str | None = "tok") -> S3Access:
    return S3Access(
        "us-east-1", endpoint, endpoint is None, "vhost" if endpoint is None else "path", "AK", "SK", token, express
    )


def test_the_secrets_on_aws_send_the_directory_bucket_to_its_zonal_endpoint() -> None:
    statements = secret_statements(access(duckdb_endpoint(EXPRESS, "us-east-1", None)))
    assert statements == [
        "CREATE OR REPLACE SECRET arcs_data (TYPE s3, KEY_ID 'AK', SECRET 'SK', REGION 'us-east-1', "
        "SESSION_TOKEN 'tok', URL_STYLE 'vhost', USE_SSL 'true')",
        "CREATE OR REPLACE SECRET arcs_express (TYPE s3, KEY_ID 'AK', SECRET 'SK', REGION 'us-east-1', "
        "SESSION_TOKEN 'tok', ENDPOINT 's3express-use1-az4.us-east-1.amazonaws.com', URL_STYLE 'vhost', "
        f"USE_SSL 'true', SCOPE 's3://{EXPRESS}/')",
    ]


def test_the_secrets_on_an_emulator_keep_its_endpoint_by_path() -> None:
    statements = secret_statements(
        access(duckdb_endpoint(EXPRESS, "us-east-1", "http://127.0.0.1:5000"), "127.0.0.1:5000", None)
    )
    assert statements == [
        "CREATE OR REPLACE SECRET arcs_data (TYPE s3, KEY_ID 'AK', SECRET 'SK', REGION 'us-east-1', "
        "URL_STYLE 'path', USE_SSL 'false', ENDPOINT '127.0.0.1:5000')",
        "CREATE OR REPLACE SECRET arcs_express (TYPE s3, KEY_ID 'AK', SECRET 'SK', REGION 'us-east-1', "
        f"ENDPOINT '127.0.0.1:5000', URL_STYLE 'path', USE_SSL 'false', SCOPE 's3://{EXPRESS}/')",
    ]


def test_without_a_directory_bucket_there_is_one_unscoped_secret() -> None:
    [statement] = secret_statements(access(None))
    assert "SCOPE" not in statement and "ENDPOINT" not in statement


def test_duckdb_picks_the_scoped_secret_for_the_directory_bucket_only(tmp_path: Path) -> None:
    made = access(duckdb_endpoint(EXPRESS, "us-east-1", None))
    engine = Engine([f"s3://{EXPRESS}/"], tmp_path, s3=lambda: made, secret_refresh_s=3600)
    try:

        def secret_for(url: str) -> str:
            return str(engine.query_arrow("SELECT name FROM which_secret(?, 's3')", [url]).column(0)[0].as_py())

        assert secret_for(f"s3://{EXPRESS}/db/cpu/2024/01/01/00/f.parquet") == "arcs_express"
        assert secret_for(f"s3://{GENERAL}/_arcs/results/r.json") == "arcs_data"
        scopes = engine.query_arrow("SELECT name, scope FROM duckdb_secrets() ORDER BY name").to_pylist()
        assert scopes[1] == {"name": "arcs_express", "scope": [f"s3://{EXPRESS}/"]}
    finally:
        engine.close()


def test_s3_access_adds_the_directory_bucket_only_when_configured() -> None:
    session = boto3.Session(aws_access_key_id="AK", aws_secret_access_key="SK", region_name="eu-west-1")
    plain = Settings(backend="aws", bucket=GENERAL, aws_region="eu-west-1")
    assert s3_access(session, plain).express is None
    made = s3_access(session, plain.with_(express_bucket="d--euw1-az1--x-s3"))
    assert made.express == BucketEndpoint(
        "d--euw1-az1--x-s3", "s3express-euw1-az1.eu-west-1.amazonaws.com", True, "vhost"
    )
    assert (made.endpoint, made.url_style) == (None, "vhost")  # the general bucket's stay as they were


# --- boto3: the directory bucket's client opens sessions; the general one keeps SigV4 --------------


class _Raw:
    def __init__(self, body: bytes) -> None:
        self.body = body

    def stream(self, **_: Any) -> Iterator[bytes]:
        yield self.body


_SESSION = b"""<?xml version="1.0" encoding="UTF-8"?>
<CreateSessionResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Credentials>
<SessionToken>session-token</SessionToken><SecretAccessKey>session-secret</SecretAccessKey>
<AccessKeyId>session-key</AccessKeyId><Expiration>2099-01-01T00:00:00Z</Expiration>
</Credentials></CreateSessionResult>"""


def test_the_express_client_opens_a_session_at_the_zonal_endpoint() -> None:
    session = boto3.Session(aws_access_key_id="AK", aws_secret_access_key="SK", region_name="us-east-1")
    clients = AwsClients.create(session)
    sent: list[AWSPreparedRequest] = []

    def answer(request: AWSPreparedRequest, **_: Any) -> AWSResponse:
        sent.append(request)
        return AWSResponse(request.url, 200, {}, _Raw(_SESSION if request.url.endswith("?session") else b""))

    try:
        for client in (clients.s3_express, clients.s3):
            client.meta.events.register("before-send.s3", answer)
        S3Store(clients.s3_express, EXPRESS).put_if_absent("db/cpu/2024/01/01/00/f.parquet", b"x")
        S3Store(clients.s3, GENERAL).put("_arcs/claims/w.bin", b"y")
    finally:
        clients.close()
    create_session, put, general = sent
    zonal = f"https://{EXPRESS}.s3express-use1-az4.us-east-1.amazonaws.com"
    assert create_session.url == f"{zonal}/?session"
    assert put.url == f"{zonal}/db/cpu/2024/01/01/00/f.parquet"
    assert put.headers["x-amz-s3session-token"] == b"session-token"
    assert b"Credential=session-key/" in put.headers["Authorization"]
    assert b"/s3express/aws4_request" in put.headers["Authorization"]
    assert put.headers["If-None-Match"] == b"*"
    assert general.url == f"https://{GENERAL}.s3.amazonaws.com/_arcs/claims/w.bin"
    assert b"Credential=AK/" in general.headers["Authorization"] and "x-amz-s3session-token" not in general.headers


def test_on_an_emulator_the_directory_bucket_shares_the_path_style_client() -> None:
    session = boto3.Session(aws_access_key_id="AK", aws_secret_access_key="SK", region_name="us-east-1")
    clients = AwsClients.create(session, endpoint_url="http://127.0.0.1:9")
    assert clients.s3_express is clients.s3
    clients.close()


# --- routing keys between the buckets -------------------------------------------------------------


class FakeS3:
    """An in-memory S3 client for one bucket: the calls ``S3Store`` makes. As a directory bucket,
    it refuses prefixes not ending in "/" and lists in no particular order (here: reversed)."""

    def __init__(self, bucket: str) -> None:
        self.bucket = bucket
        self.directory = bucket.endswith("--x-s3")
        self.objects: dict[str, bytes] = {}
        self.listed: list[str] = []

    def _key(self, request: dict[str, Any]) -> str:
        assert request["Bucket"] == self.bucket
        return str(request["Key"])

    @staticmethod
    def _error(code: str, status: int) -> ClientError:
        return ClientError({"Error": {"Code": code}, "ResponseMetadata": {"HTTPStatusCode": status}}, "op")  # type: ignore[typeddict-item]

    # botocore's parameter names (Bucket, Key, ...) arrive as keywords.
    def put_object(self, **request: Any) -> None:
        key = self._key(request)
        if request.get("IfNoneMatch") == "*" and key in self.objects:
            raise self._error("PreconditionFailed", 412)
        self.objects[key] = request["Body"]

    def get_object(self, **request: Any) -> dict[str, Any]:
        key = self._key(request)
        if key not in self.objects:
            raise self._error("NoSuchKey", 404)
        return {"Body": io.BytesIO(self.objects[key])}

    def head_object(self, **request: Any) -> None:
        if self._key(request) not in self.objects:
            raise self._error("404", 404)

    def delete_object(self, **request: Any) -> None:
        self.objects.pop(self._key(request), None)

    def generate_presigned_url(self, operation: str, **request: Any) -> str:
        params = request["Params"]
        return f"https://{params['Bucket']}.example/{params['Key']}?expires={request['ExpiresIn']}"

    def get_paginator(self, operation: str) -> FakeS3:
        return self

    def paginate(self, **request: Any) -> Iterator[dict[str, Any]]:
        assert request["Bucket"] == self.bucket
        prefix: str = request["Prefix"]
        if self.directory and prefix and not prefix.endswith("/"):
            raise self._error("InvalidArgument", 400)
        self.listed.append(prefix)
        keys = sorted((key for key in self.objects if key.startswith(prefix)), reverse=self.directory)
        size = request["PaginationConfig"]["PageSize"]
        for start in range(0, len(keys), size):
            yield {"Contents": [{"Key": key, "Size": len(self.objects[key])} for key in keys[start : start + size]]}


@pytest.fixture
def buckets() -> tuple[FakeS3, FakeS3, ExpressStore]:
    express, general = FakeS3(EXPRESS), FakeS3(GENERAL)
    store = ExpressStore(
        S3Store(express, EXPRESS, list_page_size=2), S3Store(general, GENERAL, list_page_size=2), "arcs"
    )  # type: ignore[arg-type]
    return express, general, store


DATA = [f"arcs/db/cpu/2024/03/01/{hour:02d}/f{i}.parquet" for hour in range(2) for i in range(2)]
SYSTEM = [
    "arcs/_arcs/claims/w.bin",
    "arcs/_arcs/results/r.json",
    "arcs/_arcs/quarantine/db/cpu/2024/03/01/00/x.parquet",
]


def test_data_keys_go_to_the_directory_bucket_and_system_keys_to_the_general_one(
    buckets: tuple[FakeS3, FakeS3, ExpressStore],
) -> None:
    express, general, store = buckets
    for key in DATA:
        assert store.put_if_absent(key, key.encode())
    for key in SYSTEM:
        store.put(key, key.encode())
    assert sorted(express.objects) == sorted(DATA)
    assert sorted(general.objects) == sorted(SYSTEM)
    assert not store.put_if_absent(DATA[0], b"again")
    assert store.get(DATA[0]) == DATA[0].encode() and store.get(SYSTEM[0]) == SYSTEM[0].encode()
    assert store.exists(DATA[1]) and store.exists(SYSTEM[1]) and not store.exists("arcs/db/cpu/none.parquet")
    assert store.url(DATA[0]) == f"s3://{EXPRESS}/{DATA[0]}"
    assert store.url(SYSTEM[0]) == f"s3://{GENERAL}/{SYSTEM[0]}"
    store.delete(DATA[0])
    store.delete(SYSTEM[0])
    assert DATA[0] not in express.objects and SYSTEM[0] not in general.objects
    with pytest.raises(NotFound):
        store.get(DATA[0])


def test_handed_off_results_stay_in_the_general_bucket(buckets: tuple[FakeS3, FakeS3, ExpressStore]) -> None:
    _, general, store = buckets
    store.put_download("arcs/_arcs/results/r.json", b"{}", "application/json")
    assert general.objects == {"arcs/_arcs/results/r.json": b"{}"}
    assert store.download_url("arcs/_arcs/results/r.json", 60).startswith(f"https://{GENERAL}.example/")


def test_listings_are_in_key_order_from_folder_prefixes_whatever_the_directory_bucket_does(
    buckets: tuple[FakeS3, FakeS3, ExpressStore],
) -> None:
    express, general, store = buckets
    for key in [*DATA, *SYSTEM, "arcs/db/cpu2/2024/03/01/00/z.parquet"]:
        store.put(key, b"x")
    assert [i.key for i in store.list("arcs/db/cpu/")] == sorted(DATA)
    assert [i.key for i in store.list("arcs/db/cpu/2024/03/01/01/")] == sorted(DATA)[2:]
    # A prefix that is not a folder: the folder above is listed, the rest filtered out here.
    assert [i.key for i in store.list("arcs/db/cpu/2024/03/01/01/f1")] == [DATA[3]]
    assert all(prefix == "" or prefix.endswith("/") for prefix in express.listed)
    assert [i.key for i in store.list("arcs/_arcs/")] == sorted(SYSTEM)
    assert express.listed[-1] != "arcs/_arcs/"  # system listings never reach the directory bucket
    # Above the system folder: both buckets, merged in key order.
    everything = list(store.list("arcs/"))
    assert everything == sorted(everything, key=lambda i: i.key)
    assert {i.key for i in everything} == {*DATA, *SYSTEM, "arcs/db/cpu2/2024/03/01/00/z.parquet"}
    assert list(store.list("arcs/db/disk/")) == []
    assert general.listed == ["arcs/_arcs/", "arcs/"]
    assert all(isinstance(i, ObjectInfo) for i in everything)


def test_the_runtime_puts_data_in_the_directory_bucket_and_lets_duckdb_read_only_there() -> None:
    session = boto3.Session(aws_access_key_id="AK", aws_secret_access_key="SK", region_name="us-east-1")
    settings = Settings(
        backend="aws", bucket=GENERAL, express_bucket=EXPRESS, prefix="arcs", queue_url="q", catalog_table="t"
    )
    parts = aws_runtime_parts(settings, session)
    store, queue, roots = parts.store, parts.queue, parts.allowed_roots
    assert isinstance(store, ExpressStore)
    assert (store.data.bucket, store.general.bucket) == (EXPRESS, GENERAL)
    assert queue.store is store.general  # claim checks: the general bucket, where a lifecycle rule expires them
    assert roots == [f"s3://{EXPRESS}/arcs/"]
    with pytest.raises(ConfigError):
        aws_runtime_parts(settings.with_(express_bucket="not-a-directory-bucket"), session)
    plain = aws_runtime_parts(settings.with_(express_bucket=""), session)
    assert isinstance(plain.store, S3Store) and plain.allowed_roots == [f"s3://{GENERAL}/arcs/"]
    assert parts.uploads is store.general and plain.uploads is plain.store  # import files are system keys

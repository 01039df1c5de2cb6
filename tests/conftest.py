"""Shared fixtures: one moto server per test session, and fresh AWS resources per test.

Nothing here touches ``os.environ``: every client gets the endpoint, region and dummy keys
explicitly (``aws.session`` / ``aws.clients``), so tests cannot leak configuration.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

import boto3
import pytest

from arcs.adapters.aws.wiring import AwsClients, create_resources
from arcs.settings import Settings

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_s3 import S3Client
    from mypy_boto3_sqs import SQSClient

REGION = "us-east-1"
ACCESS_KEY = "testing"
SECRET_KEY = "testing"  # moto accepts any keys; real ones must never be needed here


def moto_session() -> boto3.Session:
    return boto3.Session(aws_access_key_id=ACCESS_KEY, aws_secret_access_key=SECRET_KEY, region_name=REGION)


@dataclass(frozen=True)
class MotoServer:
    host: str
    port: int
    session: boto3.Session
    #: Shared by every test: a new session reloads the service models (~0.3 s), clients are thread-safe.
    clients: AwsClients

    @property
    def endpoint(self) -> str:
        return f"http://{self.host}:{self.port}"


@pytest.fixture(scope="session")
def moto_server() -> Iterator[MotoServer]:
    """One in-process moto server (S3, SQS, DynamoDB over HTTP) on a free loopback port."""
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()  # port 0 asks the OS; this is the real one
    session = moto_session()
    clients = AwsClients.create(session, endpoint_url=f"http://{host}:{port}", region=REGION)
    yield MotoServer(host, port, session, clients)
    clients.close()
    server.stop()


@dataclass(frozen=True)
class AwsEnv:
    """Uniquely named resources on the session's moto server, and clients to reach them."""

    server: MotoServer
    session: boto3.Session
    clients: AwsClients
    bucket: str
    queue_url: str
    dlq_url: str
    tokens_table: str
    catalog_table: str
    leases_table: str
    prefix: str

    @property
    def endpoint(self) -> str:
        return self.server.endpoint

    @property
    def region(self) -> str:
        return REGION

    @property
    def s3(self) -> S3Client:
        return self.clients.s3

    @property
    def sqs(self) -> SQSClient:
        return self.clients.sqs

    @property
    def dynamodb(self) -> DynamoDBClient:
        return self.clients.dynamodb

    def settings(self, **changes: object) -> Settings:
        """Settings for the AWS backend on these resources; build clients with ``self.session``."""
        base = Settings(
            backend="aws",
            bucket=self.bucket,
            prefix=self.prefix,
            queue_url=self.queue_url,
            tokens_table=self.tokens_table,
            catalog_table=self.catalog_table,
            leases_table=self.leases_table,
            aws_endpoint_url=self.endpoint,
            aws_region=REGION,
        )
        return base.with_(**changes) if changes else base


@pytest.fixture
def aws(moto_server: MotoServer) -> AwsEnv:
    # Fresh names instead of a server reset: cheaper, and no test sees another's leftovers.
    suffix = uuid.uuid4().hex[:12]
    made = create_resources(
        moto_server.clients,
        bucket=f"arcs-{suffix}",
        queue_name=f"arcs-writes-{suffix}",
        dlq_name=f"arcs-writes-dlq-{suffix}",
        table_prefix=f"arcs-{suffix}",
    )
    return AwsEnv(
        server=moto_server,
        session=moto_server.session,
        clients=moto_server.clients,
        bucket=made["bucket"],
        queue_url=made["queue_url"],
        dlq_url=made["dlq_url"],
        tokens_table=made["tokens_table"],
        catalog_table=made["catalog_table"],
        leases_table=made["leases_table"],
        prefix="arcs",
    )

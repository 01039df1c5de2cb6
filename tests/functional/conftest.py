"""Fixtures of the functional tests: the Lambda handlers, and a fresh world for each test that invokes
them (tests/functional/lambdas.py).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from arcs.adapters.aws.wiring import AwsResources
from arcs.emulation import load_handler
from arcs.emulation.local import function_environment
from arcs.http.api import lambda_app
from arcs.runtime import LocalRuntime, lambda_runtime, local_runtime
from arcs.settings import Settings
from tests.conftest import ACCESS_KEY, SECRET_KEY, AwsEnv
from tests.functional.lambdas import PREFIX, Handlers, Lambda


@pytest.fixture
def runtime(tmp_path: Path) -> Iterator[LocalRuntime]:
    """A standalone server's runtime on a fresh data directory (no server: its parts are called)."""
    runtime = local_runtime(Settings(data_dir=tmp_path / "data"))
    yield runtime
    runtime.engine.close()
    runtime.sqlite.close()


@pytest.fixture(scope="module")
def handlers() -> Handlers:
    # Loading runs only module-level code; the runtime is built on the first invocation.
    return Handlers(
        edge=load_handler("ingest", "edge.py"),
        ingest=load_handler("ingest"),
        query=load_handler("query"),
        authorizer=load_handler("authorizer"),
        tasks=load_handler("compact"),
    )


@pytest.fixture
def fn(aws: AwsEnv, handlers: Handlers, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Lambda]:
    queue_arn = aws.sqs.get_queue_attributes(QueueUrl=aws.queue_url, AttributeNames=["QueueArn"])["Attributes"][
        "QueueArn"
    ]
    resources = AwsResources(
        bucket=aws.bucket,
        queue_url=aws.queue_url,
        queue_arn=queue_arn,
        dlq_url=aws.dlq_url,
        dlq_arn="",
        tokens_table=aws.tokens_table,
        catalog_table=aws.catalog_table,
        leases_table=aws.leases_table,
    )
    for name, value in function_environment(resources, aws.endpoint, aws.region, str(tmp_path / "work")).items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("ARCS_PREFIX", PREFIX)
    # Compaction in these tests: any past hour with 3 files, replaced objects deleted at once.
    for variable, value in (("MIN_AGE_S", "0"), ("MIN_FILES", "3"), ("GRACE_S", "0")):
        monkeypatch.setenv(f"ARCS_COMPACTION_{variable}", value)
    monkeypatch.setenv("ARCS_TASKS_FUNCTION", "arcs-tasks")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", ACCESS_KEY)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET_KEY)
    for name in (
        "AWS_SESSION_TOKEN",
        "AWS_PROFILE",
        "ARCS_CLAIM_CHECK_BYTES",
        "ARCS_BOOTSTRAP_TOKEN",
        "ARCS_QUERY_INLINE_MAX_BYTES",
        "ARCS_QUERY_MAX_ROWS",
    ):
        monkeypatch.delenv(name, raising=False)
    lambda_runtime.cache_clear()
    lambda_app.cache_clear()
    token = lambda_runtime().tokens.bootstrap(None)
    assert token is not None
    caller = lambda_runtime().tokens.verify(token).to_context()
    yield Lambda(aws, handlers, queue_arn, token, caller)
    lambda_runtime.cache_clear()
    lambda_app.cache_clear()

"""The ``ports`` fixture: each contract test runs on the local adapters and on the AWS ones (moto)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from arcs.adapters.aws.catalog import DynamoCatalog
from arcs.adapters.aws.objects import S3Store
from arcs.adapters.aws.tokens import DynamoTokenStore
from arcs.adapters.local.catalog import SqliteCatalog
from arcs.adapters.local.objects import DirectoryStore
from arcs.adapters.local.sqlite_database import SqliteDatabase
from arcs.adapters.local.tokens import SqliteTokenStore
from tests.functional.ports.contract import Ports

if TYPE_CHECKING:
    from tests.conftest import AwsEnv


@pytest.fixture(params=["local", "aws"])
def ports(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Ports]:
    if request.param == "local":
        db = SqliteDatabase(tmp_path / "catalog.sqlite")
        yield Ports("local", DirectoryStore(tmp_path / "data"), SqliteCatalog(db), SqliteTokenStore(db))
        db.close()
        return
    aws: AwsEnv = request.getfixturevalue("aws")
    # Tiny pages so every listing and query goes through pagination.
    yield Ports(
        "aws",
        S3Store(aws.s3, aws.bucket, list_page_size=2),
        DynamoCatalog(aws.dynamodb, aws.catalog_table, aws.leases_table, page_size=2),
        DynamoTokenStore(aws.dynamodb, aws.tokens_table, page_size=2),
    )

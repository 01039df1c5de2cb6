from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.servers import Client, ServerProcess, local, standalone

RUNTIMES = ["standalone", "local"]


@pytest.fixture(scope="session", params=RUNTIMES)
def server(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    if request.param == "local":
        process = local().start()
    else:
        data_dir: Path = tmp_path_factory.mktemp(f"{request.param}-data")
        process = standalone(data_dir).start()
    yield process
    process.stop()


@pytest.fixture
def client(server: ServerProcess) -> Iterator[Client]:
    client = Client(server.url)
    yield client
    client.http.close()

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.e2e.servers import Client, ServerProcess, runtime_fixture

#: Each runtime with its defaults, shared by every module that needs no settings of its own.
server = runtime_fixture("session")


@pytest.fixture
def client(server: ServerProcess) -> Iterator[Client]:
    client = Client(server.url)
    yield client
    client.http.close()

"""The ObjectStore contract, on a directory and on S3 (moto)."""

from __future__ import annotations

import pytest

from arcs.errors import NotFound
from arcs.ports import (
    ObjectInfo,
)
from tests.functional.ports.contract import Ports

pytestmark = pytest.mark.functional


def test_put_if_absent_refuses_overwrite_and_keeps_first(ports: Ports) -> None:
    key = "arcs/db/cpu/2024/03/01/00/a.parquet"
    assert ports.store.put_if_absent(key, b"first")
    assert not ports.store.put_if_absent(key, b"second")
    assert ports.store.get(key) == b"first"
    ports.store.put(key, b"third")  # a plain put does overwrite
    assert ports.store.get(key) == b"third"


def test_get_missing_key_is_not_found(ports: Ports) -> None:
    with pytest.raises(NotFound):
        ports.store.get("arcs/db/cpu/nothing.parquet")
    assert not ports.store.exists("arcs/db/cpu/nothing.parquet")


def test_exists_delete_and_url(ports: Ports) -> None:
    key = "arcs/db/cpu/2024/03/01/00/b.parquet"
    ports.store.put(key, b"\x00\x01binary\xff")
    assert ports.store.exists(key)
    assert ports.store.url(key).endswith(key)
    ports.store.delete(key)
    assert not ports.store.exists(key)
    ports.store.delete(key)  # deleting what is gone is not an error


def test_list_by_prefix(ports: Ports) -> None:
    wanted = [f"arcs/db/cpu/2024/03/01/{hour:02d}/f{i}.parquet" for hour in range(3) for i in range(2)]
    others = ["arcs/db/cpu2/2024/03/01/00/x.parquet", "arcs/db/mem/2024/03/01/00/y.parquet", "arcs/_arcs/claims/w.bin"]
    for n, key in enumerate(wanted + others):
        ports.store.put(key, b"x" * (n + 1))
    listed = sorted(ports.store.list("arcs/db/cpu/"), key=lambda info: info.key)
    assert listed == [ObjectInfo(key, n + 1) for n, key in enumerate(wanted)]
    assert list(ports.store.list("arcs/db/disk/")) == []

"""DirectoryStore: a plain join for the keys the catalog holds, nothing outside the root, and no
partial file left by a failed write."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from arcs.adapters.local.objects import DirectoryStore
from arcs.errors import StorageFault


def test_url_joins_keys_under_the_root(tmp_path: Path) -> None:
    store = DirectoryStore(tmp_path)
    assert store.url("db/m/2026/01/01/00/a.parquet") == f"{tmp_path.resolve()}/db/m/2026/01/01/00/a.parquet"
    assert store.url("db/m/") == f"{tmp_path.resolve()}/db/m"


@pytest.mark.parametrize("key", ["../x", "db/../../x", "/etc/passwd", "db//x", "db/./x", ""])
def test_url_refuses_keys_that_leave_the_root(tmp_path: Path, key: str) -> None:
    with pytest.raises(ValueError, match="escapes"):
        DirectoryStore(tmp_path).url(key)


@pytest.mark.parametrize("key", ["../x", "db/../../x", "/etc/passwd", "db//x", "db/./x", ""])
def test_every_operation_refuses_keys_that_leave_the_root(tmp_path: Path, key: str) -> None:
    store = DirectoryStore(tmp_path / "root")
    for operation in (
        lambda: store.put(key, b"x"),
        lambda: store.put_if_absent(key, b"x"),
        lambda: store.get(key),
        lambda: store.exists(key),
        lambda: store.delete(key),
    ):
        with pytest.raises(ValueError, match="escapes"):
            operation()
    assert [p.name for p in tmp_path.iterdir()] == ["root"]


def test_a_write_the_disk_refuses_leaves_no_file_behind(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = DirectoryStore(tmp_path)
    assert store.put_if_absent("db/m/a.parquet", b"first")

    def full(_fd: int, _data: object) -> int:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "write", full)
    with pytest.raises(StorageFault, match="No space left"):
        store.put_if_absent("db/m/b.parquet", b"second")
    with pytest.raises(StorageFault, match="No space left"):
        store.put("db/m/a.parquet", b"replaced")
    monkeypatch.undo()
    assert sorted(p.name for p in (tmp_path / "db" / "m").iterdir()) == ["a.parquet"]
    assert store.get("db/m/a.parquet") == b"first"


def test_a_large_body_is_written_whole(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``os.write`` may take part of a buffer: the rest follows."""
    real_write = os.write
    monkeypatch.setattr(os, "write", lambda fd, data: real_write(fd, bytes(data)[:1000]))
    body = bytes(range(256)) * 100
    assert DirectoryStore(tmp_path).put_if_absent("db/m/a.parquet", memoryview(body))
    monkeypatch.undo()
    assert (tmp_path / "db" / "m" / "a.parquet").read_bytes() == body

"""DirectoryStore.url: a plain join for the keys the catalog holds, and nothing outside the root."""

from __future__ import annotations

from pathlib import Path

import pytest

from arcs.adapters.local.objects import DirectoryStore


def test_url_joins_keys_under_the_root(tmp_path: Path) -> None:
    store = DirectoryStore(tmp_path)
    assert store.url("db/m/2026/01/01/00/a.parquet") == f"{tmp_path.resolve()}/db/m/2026/01/01/00/a.parquet"
    assert store.url("db/m/") == f"{tmp_path.resolve()}/db/m"


@pytest.mark.parametrize("key", ["../x", "db/../../x", "/etc/passwd", "db//x", "db/./x", ""])
def test_url_refuses_keys_that_leave_the_root(tmp_path: Path, key: str) -> None:
    with pytest.raises(ValueError, match="escapes"):
        DirectoryStore(tmp_path).url(key)

"""Fixtures the unit tests share."""

from __future__ import annotations

from typing import Any

import pytest

from arcs import native


@pytest.fixture(scope="module")
def library() -> Any:
    """arcs.native's C library, which the native readers' tests need built."""
    loaded = native.library()
    assert loaded is not None, "run `make setup` to build arcs.native"
    return loaded

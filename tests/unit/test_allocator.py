"""The allocator setting: taken by glibc, validated, and applied by the runtimes."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from arcs import envvars
from arcs.allocator import keep_large_blocks_on_heap
from arcs.settings import ConfigError, Settings

GLIBC = (os.confstr("CS_GNU_LIBC_VERSION") or "").startswith("glibc")


@pytest.mark.skipif(not GLIBC, reason="glibc only")
def test_glibc_takes_the_threshold() -> None:
    assert keep_large_blocks_on_heap(256 * 1024 * 1024)
    assert keep_large_blocks_on_heap(Settings().mmap_threshold_mb * 1024 * 1024)


def test_zero_leaves_the_allocator_alone() -> None:
    assert not keep_large_blocks_on_heap(0)


def test_a_threshold_beyond_a_c_int_is_refused() -> None:
    with pytest.raises(ValueError, match="at most"):
        keep_large_blocks_on_heap(2**31)


@pytest.mark.parametrize("raw", ["-1", "2048", "lots"])
def test_settings_refuse_a_bad_threshold(raw: str) -> None:
    with pytest.raises(ConfigError, match=envvars.MMAP_THRESHOLD_MB):
        Settings.from_env({envvars.MMAP_THRESHOLD_MB: raw})


def test_settings_read_the_threshold() -> None:
    assert Settings.from_env({}).mmap_threshold_mb == 256
    assert Settings.from_env({envvars.MMAP_THRESHOLD_MB: "0"}).mmap_threshold_mb == 0


@pytest.mark.skipif(not GLIBC, reason="glibc only")
def test_the_standalone_runtime_keeps_a_freed_result_mapped(tmp_path: Path) -> None:
    """With the runtime built, a freed 64 MiB block stays in the process (heap), so the next one
    faults no page in; with glibc's default it is unmapped and every page faults again."""
    probe = """
import resource, sys
from pathlib import Path
from arcs.runtime import local_runtime
from arcs.settings import Settings
local_runtime(Settings(data_dir=Path(sys.argv[1]), mmap_threshold_mb=int(sys.argv[2])))
def faults_of_one_block():
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    block = bytearray(64 * 1024 * 1024)
    block[::4096] = b"x" * len(block[::4096])
    del block
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before
faults_of_one_block()
print(faults_of_one_block())
"""

    def faults(threshold_mb: int) -> int:
        done = subprocess.run(
            [sys.executable, "-c", probe, str(tmp_path / f"data-{threshold_mb}"), str(threshold_mb)],
            capture_output=True,
            text=True,
            check=True,
            timeout=60,
        )
        return int(done.stdout.strip().splitlines()[-1])

    pages = 64 * 1024 * 1024 // 4096
    assert faults(256) < pages // 10
    assert faults(0) > pages // 2

"""The allocator settings: taken by glibc, validated, and applied by the runtimes (Arrow's pool too)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from arcs import envvars
from arcs.allocator import ARROW_POOL, glibc, keep_large_blocks_on_heap
from arcs.settings import ConfigError, Settings

GLIBC = glibc()


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


def _fresh_interpreter(script: str, environment: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``script`` run by a new interpreter whose environment names no Arrow pool but ``environment``'s."""
    env = {key: value for key, value in os.environ.items() if key != envvars.ARROW_MEMORY_POOL}
    env.update(environment or {})
    return subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, env=env)


def _arrow_pool_in_fresh_process(script: str, environment: dict[str, str] | None = None) -> str:
    """The pool Arrow's C++ parts use (the one its variable chose) after ``script`` runs in a new
    interpreter; ``pyarrow.default_memory_pool`` reports it as long as nothing set another."""
    done = _fresh_interpreter(
        script + "\nimport pyarrow\nprint(pyarrow.default_memory_pool().backend_name)", environment
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip().splitlines()[-1]


def test_arrow_allocates_from_the_c_heap_when_chosen_before_it_loads() -> None:
    script = "from arcs.allocator import arrow_on_c_heap\nassert arrow_on_c_heap()"
    assert _arrow_pool_in_fresh_process(script) == ARROW_POOL == "system"
    assert _arrow_pool_in_fresh_process("") != "system"  # Arrow's default: else this test proves nothing


def test_too_late_once_pyarrow_is_loaded() -> None:
    """Arrow fixed its pool as it loaded: the call says so (False, and a warning) and changes nothing."""
    script = (
        "import os, pyarrow\nfrom arcs.allocator import arrow_on_c_heap\nassert not arrow_on_c_heap()\n"
        f"assert {envvars.ARROW_MEMORY_POOL!r} not in os.environ"
    )
    done = _fresh_interpreter(script)
    assert done.returncode == 0, done.stderr
    assert "pyarrow was imported before its pool was chosen" in done.stderr


@pytest.mark.parametrize("named", ["mimalloc", "system"])
def test_a_pool_named_in_the_environment_is_kept(named: str) -> None:
    script = f"from arcs.allocator import arrow_on_c_heap\nassert arrow_on_c_heap() is {named == 'system'}"
    assert _arrow_pool_in_fresh_process(script, {envvars.ARROW_MEMORY_POOL: named}) == named


def test_an_empty_variable_counts_as_unset() -> None:
    script = "from arcs.allocator import arrow_on_c_heap\nassert arrow_on_c_heap()"
    assert _arrow_pool_in_fresh_process(script, {envvars.ARROW_MEMORY_POOL: ""}) == "system"


def test_loaded_on_the_chosen_pool_is_reported_so() -> None:
    script = "import pyarrow\nfrom arcs.allocator import arrow_on_c_heap\nassert arrow_on_c_heap()"
    assert _arrow_pool_in_fresh_process(script, {envvars.ARROW_MEMORY_POOL: "system"}) == "system"


def test_the_cli_chooses_before_anything_loads_pyarrow() -> None:
    script = "from arcs.cli import main\ntry:\n    main(['--help'])\nexcept SystemExit:\n    pass"
    assert _arrow_pool_in_fresh_process(script) == "system"

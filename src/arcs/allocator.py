"""The allocators: the C heap tuned for a process that builds big results, and Arrow's buffers on it.

glibc serves every block above its mmap threshold (128 KiB at first, raised up to 32 MiB as blocks
are freed) with a fresh ``mmap``, and gives it back with ``munmap`` on free. A query result of tens
of megabytes (the Arrow stream, its copy into a Python ``bytes``, the base64 of a Lambda response)
thus faults every page in anew on each query: at 1 M rows that is most of the Arrow stream's cost
(measured by ``benchmarks.serialization``: 22 M rows/s with glibc's default, 60 to 68 M with 256 MiB).
Here blocks up to the threshold come from the heap, and the heap keeps up to as much free memory
at its top instead of trimming it (glibc's trim threshold, 128 KiB by default): the next query's
result reuses pages already mapped. The price is resident memory: up to the threshold stays with
the process after a large result (256 MiB by default, ``ARCS_MMAP_THRESHOLD_MB``).

Arrow's buffers come from the same heap (``arrow_on_c_heap``) rather than from the mimalloc that
Arrow's wheels default to, which keeps the pages a Parquet write frees: an ingest of 100 requests
grew the process by 4.05 times their bodies with it, 1.35 to 1.48 on the heap (``benchmarks.ingest``),
and 25 of them in a row by 31 MB against 6, for the same speed there and in
``benchmarks.serialization``.

Only glibc is tuned (Lambda's and the container's C library); elsewhere this does nothing.
"""

from __future__ import annotations

import ctypes
import logging
import os
import sys

from arcs import envvars

logger = logging.getLogger(__name__)

#: glibc's ``mallopt`` parameters (``M_MMAP_THRESHOLD`` and ``M_TRIM_THRESHOLD`` in malloc.h).
_M_MMAP_THRESHOLD = -3
_M_TRIM_THRESHOLD = -1
#: ``mallopt`` takes an ``int``.
_LARGEST = 2**31 - 1
#: What every runtime sets Arrow's pool to (``envvars.ARROW_MEMORY_POOL``).
ARROW_POOL = "system"
#: Configuration every DuckDB database of the process opens with. DuckDB's allocator (jemalloc on
#: Linux) is one per process, and each database opened sets whether its background thread runs: on,
#: it hands freed pages back to the system within seconds (a refused 1.2 GB result left 1.34 GB
#: resident without it, 0.2 GB with it); one database opened with the default turns it off for all.
DUCKDB_ALLOCATOR: dict[str, str | bool | int | float | list[str]] = {"allocator_background_threads": True}


def arrow_on_c_heap() -> bool:
    """Have Arrow allocate from the C library's heap; True when it does or will.

    Arrow fixes the pool of its C++ parts (the Parquet writer's among them) from its variable as
    pyarrow is imported; ``pyarrow.set_memory_pool`` later would move only the buffers Python asks
    for. So this must run before anything imports pyarrow: the CLI calls it first thing, and the
    stack sets the variable for the Lambda functions, whose handlers import pyarrow before they
    build a runtime. A pool named by whoever starts the process is left as it is.
    """
    pyarrow = sys.modules.get("pyarrow")
    if pyarrow is not None:
        chosen = pyarrow.default_memory_pool().backend_name
        if chosen != ARROW_POOL:
            logger.warning("pyarrow was imported before its pool was chosen; it keeps %s", chosen)
        return bool(chosen == ARROW_POOL)
    if not os.environ.get(envvars.ARROW_MEMORY_POOL):  # unset, or set empty (Arrow's default)
        os.environ[envvars.ARROW_MEMORY_POOL] = ARROW_POOL
    return os.environ[envvars.ARROW_MEMORY_POOL] == ARROW_POOL


def keep_large_blocks_on_heap(threshold_bytes: int) -> bool:
    """Serve blocks up to ``threshold_bytes`` from the heap and keep as much of it when freed;
    True when the allocator took the setting.

    0 leaves the allocator as it is. Safe to call again (the last call wins).
    """
    if threshold_bytes > _LARGEST:
        raise ValueError(f"an mmap threshold is at most {_LARGEST} bytes, got {threshold_bytes}")
    if threshold_bytes <= 0 or not glibc():
        return False
    try:
        libc = ctypes.CDLL(None)  # the process's own symbols, libc's among them (find_library runs ldconfig)
        # Both, or a freed result at the heap's top is trimmed away and faults in again all the same.
        accepted = bool(libc.mallopt(_M_MMAP_THRESHOLD, ctypes.c_int(threshold_bytes))) and bool(
            libc.mallopt(_M_TRIM_THRESHOLD, ctypes.c_int(threshold_bytes))
        )
    except (OSError, AttributeError):
        accepted = False
    if not accepted:
        logger.warning("the C allocator refused an mmap threshold of %d bytes; left as it was", threshold_bytes)
    return accepted


def glibc() -> bool:
    """Whether the process's C library is glibc (the one tuned here)."""
    try:
        return (os.confstr("CS_GNU_LIBC_VERSION") or "").startswith("glibc")
    except (ValueError, OSError, AttributeError):  # not a glibc system
        return False

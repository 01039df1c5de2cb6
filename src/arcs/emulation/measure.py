"""What each emulated Lambda invocation used: CPU time, wall time and peak memory (the cost benchmark).

Off unless ``ARCS_LOCAL_INVOCATION_LOG`` names a file; each invocation then appends one JSON line:
the function, its wall seconds, the CPU seconds the whole ``arcs local`` process spent meanwhile
(DuckDB's and Arrow's worker threads included, so a caller that runs one invocation at a time gets
the invocation's own), the CPU seconds of the handler's thread alone, and the process's resident
memory before and at its peak (sampled every 5 ms). Nothing of it runs on AWS: the Lambda handlers
never import this module.
"""

from __future__ import annotations

import json
import os
import resource
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

from arcs import envvars

_PAGE = os.sysconf("SC_PAGE_SIZE")
_SAMPLE_S = 0.005
_write_lock = threading.Lock()


def rss_bytes() -> int:
    """The process's resident memory now (Linux's ``/proc/self/statm``)."""
    with open("/proc/self/statm", "rb") as statm:
        return int(statm.read().split()[1]) * _PAGE


def process_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


@contextmanager
def measured(function: str) -> Iterator[None]:
    """Measure the block as one invocation of ``function`` when the log is on; a no-op otherwise."""
    path = os.environ.get(envvars.LOCAL_INVOCATION_LOG)
    if not path:
        yield
        return
    before = rss_bytes()
    peak = [before]
    done = threading.Event()

    def sample() -> None:
        while not done.wait(_SAMPLE_S):
            peak[0] = max(peak[0], rss_bytes())

    sampler = threading.Thread(target=sample, name=f"measure-{function}", daemon=True)
    sampler.start()
    wall, cpu, thread_cpu = time.perf_counter(), process_cpu_s(), time.thread_time()
    try:
        yield
    finally:
        record = {
            "function": function,
            "wall_s": time.perf_counter() - wall,
            "cpu_s": process_cpu_s() - cpu,
            "thread_cpu_s": time.thread_time() - thread_cpu,
            "rss_before": before,
            "rss_peak": max(peak[0], rss_bytes()),
        }
        done.set()
        sampler.join()
        with _write_lock, open(path, "a", encoding="utf-8") as log:
            log.write(json.dumps(record) + "\n")

"""Benchmarks: figures printed, never asserted.

Arrow's memory pool is chosen here, before any benchmark loads pyarrow, as the runtimes choose it.
"""

from arcs.allocator import arrow_on_c_heap

arrow_on_c_heap()

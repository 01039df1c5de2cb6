"""Compaction: an hour partition's many small files become a few large ones, swapped atomically.

``compactor`` holds the protocol (docs/compaction.md), ``merge`` the bounded-memory merge, and
``report`` how candidates, runs and jobs are shown; only ``report`` is light to import.
"""

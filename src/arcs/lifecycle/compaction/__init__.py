"""Compaction: an hour partition's many small files become a few large ones, swapped atomically.

``compactor`` holds the protocol (docs/compaction.md) and runs its jobs; ``inputs`` reads a job's
inputs (quarantining what is not Parquet), ``merge`` merges them in bounded memory, ``outputs``
uploads the merged files; ``tiers`` plans and runs the day and month jobs; ``rewrite`` is
retention's and delete's rewrite of a partition; ``recovery`` finishes what a crash left and
deletes what nothing lists; ``report`` is how candidates, runs and jobs are shown (the only module
light to import).
"""

"""Peak memory of one ingest call over large writes, with and without the byte bound on a group.

    uv run python -m benchmarks.ingest_groups [--writes 16] [--rows 1000000] [--group-mib 64]

Each run is a fresh interpreter (peak RSS cannot be reset): ``--writes`` writes of ``--rows`` rows
each (time, a tag, a float: about 20 MiB decoded per million rows), each built only when ingest
reads it, as a claim-checked write is fetched only then, stored through ``Ingestor.ingest`` on a
local store and catalog. Printed per bound: the groups made, the largest group's decoded bytes, and
how much the peak RSS grew during the call (figures are printed, never asserted).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

CHILD = r"""
import json, resource, sys, tempfile, uuid
from pathlib import Path
import numpy as np
import pyarrow as pa
from arcs.adapters.local.objects import DirectoryStore
from arcs.adapters.local.catalog import SqliteCatalog
from arcs.adapters.local.sqlite_database import SqliteDatabase
from arcs.write.batch import TIME_TYPE, MeasurementRows, WriteBatch
from arcs.write.ingest import Ingestor, QueuedWrite

writes, rows, bound = (int(a) for a in sys.argv[1:4])
root = Path(tempfile.mkdtemp())
store = DirectoryStore(root / "storage")
catalog = SqliteCatalog(SqliteDatabase(root / "catalog.sqlite"))
base_us = 1_699_999_200_000_000

def loader(i, write_id):
    def load():
        times = pa.array(np.arange(rows, dtype=np.int64) + base_us + i * 10**7)
        table = pa.table({
            "time": times.cast(pa.timestamp("us", tz="UTC")).cast(TIME_TYPE),
            "host": pa.array(["a"] * rows),
            "value": pa.array(np.random.default_rng(i).random(rows)),
        })
        return WriteBatch(write_id, "db", (MeasurementRows("cpu", table, ("host",)),)).to_bytes()
    return load

ids = [uuid.uuid4().hex for _ in range(writes)]
queued = [QueuedWrite(ids[i], ids[i], loader(i, ids[i])) for i in range(writes)]
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
result = Ingestor(catalog, store, group_bytes=bound).ingest(queued)
grown = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
assert len(result.committed) == writes
print(json.dumps({"groups": result.groups, "largest_mib": result.largest_group_bytes / 2**20, "rss_mib": grown / 1024}))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--writes", type=int, default=16)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--group-mib", type=int, default=64)
    args = parser.parse_args()
    for label, bound in ((f"{args.group_mib} MiB groups", args.group_mib << 20), ("no bound", 1 << 50)):
        out = subprocess.run(
            [sys.executable, "-c", CHILD, str(args.writes), str(args.rows), str(bound)],
            capture_output=True,
            text=True,
            check=True,
        )
        figures = json.loads(out.stdout.strip().splitlines()[-1])
        print(
            f"{label:>16}: {figures['groups']} groups, largest {figures['largest_mib']:.0f} MiB decoded, "
            f"peak RSS +{figures['rss_mib']:.0f} MiB"
        )


if __name__ == "__main__":
    main()

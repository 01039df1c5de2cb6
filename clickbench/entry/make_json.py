"""ClickBench's result JSON from the driver loop's '[t1, t2, t3],' lines."""

import json
import sys
from pathlib import Path

lines, machine, date, load_time, data_size = sys.argv[1:6]
tries = [
    json.loads(line.rstrip().rstrip(","))
    for line in Path(lines).read_text(encoding="utf-8").splitlines()
    if line.strip()
]
print(
    json.dumps(
        {
            "system": "Arc Serverless (standalone)",
            "date": date,
            "machine": machine,
            "cluster_size": 1,
            "proprietary": "no",
            "hardware": "cpu",
            "tuned": "no",
            "tags": ["Python", "column-oriented", "DuckDB derivative", "serverless", "time-series"],
            "load_time": round(float(load_time), 3),
            "data_size": int(data_size),
            "concurrent_qps": None,
            "concurrent_error_ratio": None,
            "result": tries,
        },
        indent=4,
    )
)

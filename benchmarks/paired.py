"""Two checkouts' write paths measured at once on one core: a change's effect on the ingest
benchmark's flow, with the machine's swings shared by both sides.

    uv run python -m benchmarks.paired OTHER_CHECKOUT [--format msgpack-columnar] [--pairs 3] [--rounds 15]

The machines here change speed by half within minutes, so two runs one after the other cannot tell
a 10 % change. Each pair runs this checkout's and OTHER's steady-state edge + ingest
(``benchmarks.ingest.Pipeline``, which both need) as two processes pinned to the same core: both
meet the same conditions, and each counts its own CPU time. OTHER runs on this interpreter with its
own sources and its own native library (build it there first with this interpreter: ``python -m
layers.native`` run in OTHER).
Printed per request of 1,000 rows, the first quartile of the rounds: edge, ingest step, and their
sum. Both share the core, so the figures are higher than the ingest benchmark's; the comparison is
what counts.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]


def child(fmt: str, rounds: int, core: int) -> None:
    """In a checkout: ``rounds`` steady-state runs of the flow, their figures as one JSON line."""
    from benchmarks.ingest import Pipeline  # the checkout's own, found through PYTHONPATH

    os.sched_setaffinity(0, {core})
    with tempfile.TemporaryDirectory(prefix="arcs-paired-") as tmp:
        pipeline = Pipeline(fmt, 100, 1000, Path(tmp))
        runs = [pipeline.run() for _ in range(rounds)]

    def quartile(values: list[float]) -> float:
        return sorted(values)[len(values) // 4] * 1e6 / 100  # µs per request of the 100

    edge = [run["edge_cpu"] for run in runs]
    ingest = [run["ingest_cpu"] for run in runs]
    total = [e + i for e, i in zip(edge, ingest, strict=True)]
    print(json.dumps({"edge": quartile(edge), "ingest": quartile(ingest), "total": quartile(total)}))


def start(checkout: Path, fmt: str, rounds: int, core: int) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": f"{checkout}{os.pathsep}{checkout / 'src'}"}
    # This file runs as a script, so the checkout's own benchmarks and arcs are the ones imported.
    command = [sys.executable, str(Path(__file__).resolve()), "--child", fmt, str(rounds), str(core)]
    return subprocess.Popen(command, cwd=checkout, env=env, stdout=subprocess.PIPE, text=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("other", nargs="?", type=Path, help="the checkout to compare this one with")
    parser.add_argument("--format", default="msgpack-columnar", help="one of benchmarks.ingest.FORMATS")
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=15, help="steady-state runs of the flow per side")
    parser.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        fmt, rounds, core = args.child
        child(fmt, int(rounds), int(core))
        return
    if args.other is None:
        parser.error("name the checkout to compare with")
    core = min(os.sched_getaffinity(0))
    sides = {"this": HERE, "other": args.other.resolve()}
    print(f"{args.format}, µs of CPU per request of 1,000 rows (first quartile of {args.rounds} rounds), core {core}")
    print(f"  this:  {sides['this']}\n  other: {sides['other']}")
    for pair in range(1, args.pairs + 1):
        began = time.perf_counter()
        running = {name: start(path, args.format, args.rounds, core) for name, path in sides.items()}
        figures = {}
        for name, process in running.items():
            out, _ = process.communicate()
            if process.returncode:
                raise SystemExit(f"the {name} side failed (exit {process.returncode})")
            figures[name] = json.loads(out.strip().splitlines()[-1])
        line = "  ".join(
            f"{name}: edge {f['edge']:6,.0f} ingest {f['ingest']:6,.0f} total {f['total']:6,.0f}"
            for name, f in figures.items()
        )
        print(f"pair {pair}: {line}  ({time.perf_counter() - began:.0f} s)")


if __name__ == "__main__":
    main()

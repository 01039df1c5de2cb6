"""ClickBench's result JSON, its relative scores, the per-query table and the chart.

Scores follow ClickBench's ``index.html``: per query cold = try 1, hot = min(try 2, try 3); the
baseline of a query is the fastest system of this run; ratio = (0.01 + t) / (0.01 + baseline); a
missing result counts as 2 x max(300 s, the system's slowest time); the score is the geometric
mean of the ratios. Only systems run here, on this machine and data, are compared.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

CONSTANT_TIME_ADD = 0.01
MISSING_RESULT_PENALTY = 2.0
MISSING_RESULT_TIME = 300.0

Tries = list[float | None]


@dataclass(frozen=True, slots=True)
class SystemResult:
    name: str
    title: str
    tags: tuple[str, ...]
    tries: list[Tries]  # per query: [cold, hot, hot]
    load_time: float
    data_size: int
    lukewarm: bool

    def cold(self) -> list[float | None]:
        return [t[0] for t in self.tries]

    def hot(self) -> list[float | None]:
        """min(try 2, try 3); with a single try (the CI check) that try."""
        hot = []
        for t in self.tries:
            rest = t[1:] or t[:1]
            hot.append(None if any(v is None for v in rest) else min(v for v in rest if v is not None))
        return hot


def clickbench_json(result: SystemResult, machine: str, date: str) -> dict[str, object]:
    tags = list(result.tags) + (["lukewarm-cold-run"] if result.lukewarm else [])
    return {
        "system": result.title,
        "date": date,
        "machine": machine,
        "cluster_size": 1,
        "proprietary": "no",
        "hardware": "cpu",
        "tuned": "no",
        "tags": tags,
        "load_time": round(result.load_time, 3),
        "data_size": result.data_size,
        "concurrent_qps": None,
        "concurrent_error_ratio": None,
        "result": [[None if t is None else round(t, 3) for t in tries] for tries in result.tries],
    }


def write_json(result: SystemResult, folder: Path, machine: str, date: str) -> Path:
    path = folder / f"{result.name}.json"
    path.write_text(json.dumps(clickbench_json(result, machine, date), indent=4) + "\n", encoding="utf-8")
    return path


def scores(times: Mapping[str, Sequence[float | None]]) -> dict[str, float]:
    """ClickBench's relative score of each system for one metric (cold or hot times per query)."""
    queries = len(next(iter(times.values())))
    best: list[float | None] = []
    for q in range(queries):
        present = [t[q] for t in times.values() if t[q] is not None]
        best.append(min(present) if present else None)  # type: ignore[type-var]
    result = {}
    for name, values in times.items():
        slowest = max((v for v in values if v is not None), default=0.0)
        missing = MISSING_RESULT_PENALTY * max(MISSING_RESULT_TIME, slowest)
        logs = [
            math.log((CONSTANT_TIME_ADD + (missing if values[q] is None else values[q])) / (CONSTANT_TIME_ADD + b))  # type: ignore[operator]
            for q, b in enumerate(best)
            if b is not None
        ]
        result[name] = math.exp(sum(logs) / len(logs)) if logs else float("nan")
    return result


def _total(values: Sequence[float | None]) -> float:
    return sum(v for v in values if v is not None)


def _cell(value: float | None) -> str:
    return "   null" if value is None else f"{value:7.3f}"


def table(
    results: Sequence[SystemResult], baseline: str, mismatches: Mapping[str, list[int]], numbers: Sequence[int]
) -> str:
    """Markdown: cold and hot per query and system, then totals, ratios to the baseline and scores."""
    names = [r.name for r in results]
    base = next(r for r in results if r.name == baseline)
    lines = ["| query | " + " | ".join(f"{n} cold | {n} hot" for n in names) + " |"]
    lines.append("|---:|" + "---:|---:|" * len(names))
    for q in range(len(base.tries)):
        cells = []
        for r in results:
            flag = " ≠" if numbers[q] in mismatches.get(r.name, []) else ""
            cells.append(f"{_cell(r.cold()[q])}{flag} | {_cell(r.hot()[q])}{flag}")
        lines.append(f"| Q{numbers[q]} | " + " | ".join(cells) + " |")
    cold_scores = scores({r.name: r.cold() for r in results})
    hot_scores = scores({r.name: r.hot() for r in results})
    lines += [
        "",
        "| system | cold total s | hot total s | cold / baseline | hot / baseline | cold score | hot score "
        "| results equal |",
        "|---|---:|---:|---:|---:|---:|---:|---|",
    ]
    for r in results:
        cold, hot = _total(r.cold()), _total(r.hot())
        equal = (
            "baseline"
            if r.name == baseline
            else (
                f"all {len(numbers)}"
                if not mismatches.get(r.name)
                else "differ: " + ", ".join(f"Q{q}" for q in mismatches[r.name])
            )
        )
        lukewarm = " (lukewarm)" if r.lukewarm else ""
        lines.append(
            f"| {r.name}{lukewarm} | {cold:.3f} | {hot:.3f} | {cold / _total(base.cold()):.2f} | "
            f"{hot / _total(base.hot()):.2f} | {cold_scores[r.name]:.2f} | {hot_scores[r.name]:.2f} | {equal} |"
        )
    return "\n".join(lines) + "\n"


def chart(results: Sequence[SystemResult], path: Path, title: str) -> None:
    """Per-query hot and cold times of each system, log scale, and the totals."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, (per_query, totals) = plt.subplots(
        2, 1, figsize=(16, 10), gridspec_kw={"height_ratios": [3, 1.2]}, layout="constrained"
    )
    count = len(results[0].tries)
    width = 0.8 / len(results)
    for index, r in enumerate(results):
        xs = [q + index * width for q in range(count)]
        per_query.bar(xs, [v or 0 for v in r.hot()], width, label=f"{r.name} hot")
        per_query.scatter(xs, [v or 0 for v in r.cold()], s=8, marker="_", color="black")
    per_query.set_yscale("log")
    per_query.set_xticks([q + 0.4 for q in range(count)], [f"Q{q + 1}" for q in range(count)], rotation=90)
    per_query.set_ylabel("seconds (bars: hot; ticks: cold)")
    per_query.set_title(title)
    per_query.legend(ncols=len(results), fontsize="small")
    names = [r.name for r in results]
    ys = range(len(results))
    totals.barh([y - 0.2 for y in ys], [_total(r.cold()) for r in results], 0.4, label="cold total")
    totals.barh([y + 0.2 for y in ys], [_total(r.hot()) for r in results], 0.4, label="hot total")
    totals.set_yticks(list(ys), names)
    totals.invert_yaxis()
    totals.set_xlabel("seconds, sum over the 43 queries")
    totals.legend(fontsize="small")
    figure.savefig(path, dpi=110)
    plt.close(figure)

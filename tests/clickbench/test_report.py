"""ClickBench's scoring formula and result JSON, as the harness writes them."""

from __future__ import annotations

import json
import math
from pathlib import Path

from clickbench.report import SystemResult, clickbench_json, scores, table, write_json


def test_scores_follow_clickbench_formula() -> None:
    got = scores({"fast": [1.0, 0.0], "slow": [2.0, 0.01]})
    assert got["fast"] == 1.0
    expected = math.exp((math.log(2.01 / 1.01) + math.log(0.02 / 0.01)) / 2)
    assert math.isclose(got["slow"], expected)
    # A missing result counts as twice max(300 s, the system's slowest time).
    missing = scores({"a": [1.0, 1.0], "b": [1.0, None]})
    assert math.isclose(missing["b"], math.exp(math.log(600.01 / 1.01) / 2))


def result(name: str, tries: list[list[float | None]], lukewarm: bool = False) -> SystemResult:
    return SystemResult(name, name.title(), ("embedded",), tries, 0.0, 123, lukewarm)


def test_json_is_clickbench_format(tmp_path: Path) -> None:
    path = write_json(result("x", [[0.12345, 0.05, None]], lukewarm=True), tmp_path, "c6a.4xlarge", "2026-11-22")
    document = json.loads(path.read_text())
    example = clickbench_json(result("y", [[1.0, 1.0, 1.0]]), "c6a.4xlarge", "2026-11-22")
    assert set(document) == set(example)
    assert document["result"] == [[0.123, 0.05, None]]
    assert "lukewarm-cold-run" in document["tags"]
    assert "lukewarm-cold-run" not in example["tags"]  # type: ignore[operator]


def test_table_has_totals_ratios_and_flags_mismatches() -> None:
    base = result("base", [[1.0, 0.5, 0.4], [2.0, 1.0, 1.0]])
    other = result("other", [[0.5, 0.2, 0.3], [1.0, 0.5, 0.5]])
    text = table([base, other], "base", {"other": [2]}, [1, 2])
    assert "| other | 1.500 | 0.700 | 0.50 | 0.50 |" in text
    assert "differ: Q2" in text
    assert "| Q2 |" in text and "≠" in text

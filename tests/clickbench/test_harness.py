"""The harness end to end on a small size: every system answers all 43 queries, equal to the baseline."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from clickbench.systems import ALL

from clickbench import harness

pytestmark = pytest.mark.clickbench
ROWS = 20_000


@pytest.mark.timeout(1800)
def test_all_systems_answer_every_query_like_the_baseline(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "results"
    code = harness.main(
        [
            "--rows",
            str(ROWS),
            "--work-dir",
            str(tmp_path / "work"),
            "--out",
            str(out),
            "--tries",
            "1",
            "--no-chart",
            "--no-progress",
        ]
    )
    printed = capsys.readouterr().out
    assert code == 0, printed
    for system in ALL:
        document = json.loads((out / f"{system.name}.json").read_text())
        assert len(document["result"]) == 43
        assert all(t is not None for tries in document["result"] for t in tries), system.name
    comparison = (out / "comparison.md").read_text()
    assert comparison.count("| all 43 |") == len(ALL) - 1, comparison

"""arcs local's per-invocation measures: on only when asked, one JSON line per invocation."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from arcs import envvars
from arcs.emulation.functions import LambdaFunction


def burn(event: dict[str, int], context: object) -> int:
    buffer = bytearray(event["bytes"])  # resident memory the invocation holds
    for i in range(0, len(buffer), 4096):
        buffer[i] = 1
    return sum(i * i for i in range(event["loops"])) % 7


def test_each_invocation_logs_its_cpu_wall_and_peak_memory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    log = tmp_path / "invocations.jsonl"
    monkeypatch.setenv(envvars.LOCAL_INVOCATION_LOG, str(log))
    function = LambdaFunction("arcs-burn", burn, timeout_s=30)
    function.invoke({"bytes": 200 * 2**20, "loops": 3_000_000})
    function.invoke({"bytes": 0, "loops": 10})
    heavy, light = (json.loads(line) for line in log.read_text().splitlines())
    assert heavy["function"] == "arcs-burn"
    assert heavy["cpu_s"] >= heavy["thread_cpu_s"] > 0.05 and heavy["wall_s"] > 0.05
    assert heavy["rss_peak"] - heavy["rss_before"] > 100 * 2**20
    assert light["cpu_s"] < heavy["cpu_s"]


def test_off_unless_asked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(envvars.LOCAL_INVOCATION_LOG, raising=False)
    monkeypatch.chdir(tmp_path)
    assert LambdaFunction("arcs-burn", burn, timeout_s=30).invoke({"bytes": 0, "loops": 10}) == burn(
        {"bytes": 0, "loops": 10}, None
    )
    assert not list(tmp_path.iterdir())

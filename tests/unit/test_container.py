"""The container image, checked without Docker (none here): what it copies exists, its dependency
export works from the lock, its handler imports, and its entry point runs the CLI or hands over to
Lambda's own entry point."""

from __future__ import annotations

import importlib
import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from infra.function import RUNTIME

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = (ROOT / "Dockerfile").read_text()
ENTRYPOINT = ROOT / "container" / "entrypoint.sh"


def _instructions(name: str) -> list[str]:
    joined = re.sub(r"\\\n", " ", DOCKERFILE)
    return [line.split(None, 1)[1] for line in joined.splitlines() if line.startswith(name + " ")]


def test_base_image_is_the_lambda_python_the_functions_run() -> None:
    [base] = _instructions("FROM")
    assert base == f"public.ecr.aws/lambda/python:{RUNTIME.name.removeprefix('python')}"


def test_everything_it_copies_exists_and_is_not_ignored() -> None:
    ignored = {line.strip() for line in (ROOT / ".dockerignore").read_text().splitlines() if line and line[0] != "#"}
    copies = _instructions("COPY")
    assert copies
    for copy in copies:
        *sources, _target = shlex.split(copy)
        for source in sources:
            assert (ROOT / source).exists(), source
            assert source.rstrip("/") not in ignored, source
    copied = {source.rstrip("/") for c in copies for source in shlex.split(c)[:-1]}
    assert {"src/arcs", "functions", "uv.lock"} <= copied
    # Local state never reaches the build context.
    assert {".venv", "layers/build", "cdk.out", "data", ".git"} <= ignored


def test_its_uv_is_the_makefiles_and_its_export_works_from_the_lock() -> None:
    [uv_version] = _instructions("ARG")
    makefile = (ROOT / "Makefile").read_text()
    assert re.search(rf"^UV_VERSION := {re.escape(uv_version.split('=')[1])}$", makefile, re.MULTILINE)
    [export] = [run for run in _instructions("RUN") if "uv export" in run]
    command = shlex.split(re.search(r"uv export [^&]*", export).group(0))  # type: ignore[union-attr]
    command = [ROOT.as_posix() if part == "/tmp/lock" else part for part in command]
    command = command[: command.index("--output-file")]
    out = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=True).stdout
    pinned = {line.split("==")[0] for line in out.splitlines() if "==" in line}
    assert {"duckdb", "duckdb-extension-httpfs", "pyarrow", "aws-lambda-powertools", "uvicorn"} <= pinned
    assert not {"pytest", "mypy", "aws-cdk-lib"} & pinned  # no dev tools in the image


def test_the_default_command_is_the_query_handler_and_imports() -> None:
    [cmd] = _instructions("CMD")
    [handler] = json.loads(cmd)
    module, attribute = handler.rsplit(".", 1)
    assert callable(getattr(importlib.import_module(module), attribute))
    assert _instructions("ENTRYPOINT") == ['["/usr/local/bin/arcs-entrypoint"]']


def _run_entrypoint(args: list[str], tmp_path: Path) -> subprocess.CompletedProcess[str]:
    fake_lambda = tmp_path / "lambda-entrypoint.sh"
    fake_lambda.write_text('#!/bin/sh\necho "lambda entry: $*"\n')
    fake_lambda.chmod(0o755)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    (bin_dir / "python3").symlink_to(sys.executable)  # the image's python3, with its packages
    env = {
        "PATH": f"{bin_dir}:/usr/bin:/bin",
        "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT)]),
        "ARCS_LAMBDA_ENTRYPOINT": str(fake_lambda),
        "HOME": str(tmp_path),
    }
    return subprocess.run(["sh", str(ENTRYPOINT), *args], env=env, capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("prefix", [[], ["arcs"]])
@pytest.mark.parametrize("command", ["serve", "local"])
def test_entrypoint_runs_the_cli_for_serve_and_local(prefix: list[str], command: str, tmp_path: Path) -> None:
    done = _run_entrypoint([*prefix, command, "--help"], tmp_path)
    assert done.returncode == 0, done.stderr
    assert f"usage: arcs {command}" in done.stdout


def test_the_clickbench_entry_starts_the_image_as_the_entrypoint_understands() -> None:
    start = (ROOT / "clickbench" / "entry" / "start").read_text()
    assert "arcs-serverless:clickbench arcs serve " in start


def test_entrypoint_hands_a_handler_to_lambdas_entrypoint(tmp_path: Path) -> None:
    done = _run_entrypoint(["functions.query.handler.handler"], tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "lambda entry: functions.query.handler.handler"
    assert os.access(ENTRYPOINT, os.X_OK)

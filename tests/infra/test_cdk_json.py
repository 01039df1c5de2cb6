"""``cdk.json``: how the CDK CLI runs the app, and the feature flags it runs it with."""

from __future__ import annotations

import json
import stat
import subprocess
import tarfile
from pathlib import Path

import aws_cdk
import pytest
from aws_cdk import App
from infra.app import CDK_JSON, build, feature_flags

pytestmark = pytest.mark.infra


def _tool(folder: Path, name: str) -> None:
    script = folder / name
    script.write_text(f'#!/bin/sh\necho "{name} $*"\n')
    script.chmod(script.stat().st_mode | stat.S_IXUSR)


def _run_app_command(path: Path) -> str:
    """The ``app`` command as the CDK CLI runs it (a shell), with only ``path`` to find programs in."""
    command = json.loads(CDK_JSON.read_text())["app"]
    done = subprocess.run(
        ["/bin/sh", "-c", command], env={"PATH": str(path)}, capture_output=True, text=True, check=True
    )
    return done.stdout.strip()


def test_the_app_runs_with_uv_from_the_path(tmp_path: Path) -> None:
    _tool(tmp_path, "uv")
    _tool(tmp_path, "python3")
    assert _run_app_command(tmp_path) == "uv run --frozen python -m infra.app"


def test_without_uv_on_the_path_the_app_runs_with_uv_as_a_python_module(tmp_path: Path) -> None:
    # As the Makefile does: `make setup` installs uv with pip when it is not on the PATH.
    _tool(tmp_path, "python3")
    assert _run_app_command(tmp_path) == "python3 -m uv run --frozen python -m infra.app"


def _recommended_flags() -> dict[str, object]:
    """What ``cdk init`` writes for the locked aws-cdk-lib: its recommended-feature-flags.json."""
    bundle = next((Path(aws_cdk.__file__).parent / "_jsii").glob("aws-cdk-lib@*.jsii.tgz"))
    with tarfile.open(bundle) as archive:
        member = archive.extractfile("package/recommended-feature-flags.json")
        assert member is not None
        flags: dict[str, object] = json.load(member)
    return flags


def test_cdk_json_has_the_feature_flags_of_a_new_app_for_the_locked_cdk() -> None:
    assert feature_flags() == _recommended_flags()


def test_the_flags_apply_when_the_app_is_run_directly_and_the_command_line_wins(tmp_path: Path) -> None:
    app, _ = build(App(context={"layers_dir": str(tmp_path), "@aws-cdk/core:checkSecretUsage": False}))
    assert app.node.try_get_context("@aws-cdk/aws-lambda:recognizeLayerVersion") is True
    assert app.node.try_get_context("@aws-cdk/core:checkSecretUsage") is False

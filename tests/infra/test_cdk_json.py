"""``cdk.json``: how the CDK CLI runs the app, and the feature flags it runs it with."""

from __future__ import annotations

import json
import re
import stat
import subprocess
import tarfile
from datetime import date
from pathlib import Path

import aws_cdk
import jsii
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


def _jsii_supported_node_majors(today: date) -> set[int]:
    """The Node majors the locked jsii runtime supports today, by its own table (NodeRelease):
    tested, and not past its end of jsii support (given, or six months after end of life)."""
    runtime = Path(jsii.__file__).parent / "_embedded" / "jsii" / "bin__jsii-runtime.js"
    supported = set()
    for major, options in re.findall(r"new NodeRelease\((\d+),\{([^}]*)\}\)", runtime.read_text()):
        if "untested:!0" in options:
            continue
        end_of_life = date.fromisoformat(re.findall(r'endOfLife:new Date\("([\d-]+)"\)', options)[0])
        explicit = re.findall(r'endOfJsiiSupport:new Date\("([\d-]+)"\)', options)
        month = end_of_life.month + 6
        end = (
            date.fromisoformat(explicit[0])
            if explicit
            else end_of_life.replace(year=end_of_life.year + (month - 1) // 12, month=(month - 1) % 12 + 1)
        )
        if today < end:
            supported.add(int(major))
    return supported


def test_deploy_doc_names_the_node_versions_the_locked_jsii_supports() -> None:
    doc = (CDK_JSON.parent / "docs" / "deploy.md").read_text()
    [(first, second)] = re.findall(r"\*\*Node\.js (\d+)\s+or (\d+)\*\*", doc)
    assert {int(first), int(second)} == _jsii_supported_node_majors(date.today()), (
        "docs/deploy.md names Node versions the locked jsii does not support (or misses one it does)"
    )

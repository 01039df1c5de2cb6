"""Infra tests run the CDK through jsii, which starts one node process for the whole session.

Node 20 prints an end-of-life banner on every start unless told not to; the variable must be in
the environment before ``aws_cdk`` is first imported (that import starts node), so it is set
here, at collection, rather than in a fixture. It changes nothing but that banner.
"""

from __future__ import annotations

import json
import os
import zipfile
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from layers.build import LAYERS

if TYPE_CHECKING:
    from tests.infra.synth import Synth

os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")


def fake_layers(root: Path, architecture: str) -> Path:
    """What ``make layers`` leaves in ``layers/build/<arch>/`` (manifest and zips), tiny: the shape
    infra reads, so the template tests need no layer build. The real build is tests/layers'."""
    out = root / architecture
    out.mkdir(parents=True, exist_ok=True)
    layers = {}
    for name in LAYERS:
        with zipfile.ZipFile(out / f"{name}.zip", "w") as archive:
            archive.writestr(f"python/{name}_marker.py", f"LAYER = {name!r}\n")
        size = (out / f"{name}.zip").stat().st_size
        layers[name] = {
            "name": name,
            "zip_path": f"{name}.zip",
            "zipped_bytes": size,
            "unzipped_bytes": size,
            "distributions": [f"{name}==0"],
        }
    manifest = {"architecture": architecture, "python_version": "3.12", "bytecode": True, "layers": layers}
    (out / "manifest.json").write_text(json.dumps(manifest))
    return root


@pytest.fixture(scope="session")
def layers_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("layers")
    for architecture in ("arm64", "x86_64"):
        fake_layers(root, architecture)
    return root


@pytest.fixture(scope="session")
def synth(layers_dir: Path) -> Synth:
    """The stack as deployed by default: every template test of tests/infra/test_stack_*.py reads it."""
    from tests.infra.synth import synthesize  # aws_cdk starts node: after the variable above

    return synthesize({"layers_dir": str(layers_dir)})


@pytest.fixture(scope="session")
def athena_synth(layers_dir: Path) -> Synth:
    """The stack with an Athena table (tests/infra/test_deploy_*.py)."""
    from tests.infra.synth import synthesize, with_athena

    return synthesize(with_athena(layers_dir))

"""Deploying needs the built layers: each function gets exactly its own, for its architecture,
and a stack without them synthesizes but refuses to deploy.

Layers are the stand-ins of conftest's ``layers_dir``; tests/layers builds the real ones.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from aws_cdk import App, Stack
from layers.build import FUNCTION_LAYERS, LAYERS

from arcs import envvars
from tests.infra.synth import Synth, synthesize

pytestmark = pytest.mark.infra


# --- layers ----------------------------------------------------------------------------------------


def test_each_function_has_exactly_its_layers_for_its_architecture(athena_synth: Synth, layers_dir: Path) -> None:
    layers = athena_synth.of_type("AWS::Lambda::LayerVersion")
    by_name = {name: athena_synth.logical_id(layer) for name, layer in athena_synth.stack.layers.layers.items()}
    assert set(by_name) == set(LAYERS)
    assert set(layers) == set(by_name.values())
    for name, logical in by_name.items():
        props = layers[logical]["Properties"]
        assert props["CompatibleRuntimes"] == ["python3.12"]
        assert props["CompatibleArchitectures"] == ["arm64"]
        assert props["Description"].startswith(f"Arc Serverless {name}: {name}==0")
        # The asset is the build's own zip, byte for byte.
        asset = Path(athena_synth.app.outdir) / ("asset." + props["Content"]["S3Key"])
        assert asset.read_bytes() == (layers_dir / "arm64" / f"{name}.zip").read_bytes()
    for function, construct in athena_synth.functions().items():
        props = athena_synth.props(construct.function)
        # In CDK's order (sorted, with the recognizeLayerVersion flag): the layers' trees are disjoint.
        assert sorted(props["Layers"], key=json.dumps) == sorted(
            ({"Ref": by_name[name]} for name in FUNCTION_LAYERS[function]), key=json.dumps
        ), function
        assert props["Architectures"] == ["arm64"]
    assert "Rules" not in athena_synth.template or "LayersBuilt" not in json.dumps(athena_synth.template["Rules"])


def test_without_built_layers_synthesis_works_and_deployment_is_refused(tmp_path: Path) -> None:
    bare = synthesize({"layers_dir": str(tmp_path)})
    assert bare.of_type("AWS::Lambda::LayerVersion") == {}
    for function in bare.functions().values():
        assert "Layers" not in bare.props(function.function)
    [rule] = [r for name, r in bare.template["Rules"].items() if name.startswith("LayersLayersBuilt")]
    [assertion] = rule["Assertions"]
    assert assertion["Assert"] == {"Fn::Equals": ["not-built", "built"]}  # always false: never deploys
    assert "make layers ARCH=arm64" in assertion["AssertDescription"]
    warnings = [
        entry.data
        for construct in bare.stack.node.find_all()
        for entry in construct.node.metadata
        if entry.type == "aws:cdk:warning"
    ]
    assert any("make layers" in str(w) for w in warnings)


def test_parameters_reach_the_template(layers_dir: Path) -> None:
    custom = synthesize(
        {
            "layers_dir": str(layers_dir),
            "architecture": "x86_64",
            "query_memory_mb": "2048",
            "ingest_batch_size": "500",
            "ingest_batch_window_s": "20",
            "prefix": "tsdb",
            "stack_name": "Arcs-Test",
        }
    )
    assert custom.stack.stack_name == "Arcs-Test"
    for function in custom.functions().values():
        assert custom.props(function.function)["Architectures"] == ["x86_64"]
    for layer in custom.of_type("AWS::Lambda::LayerVersion").values():
        assert layer["Properties"]["CompatibleArchitectures"] == ["x86_64"]
    query = custom.props(custom.stack.query.query.function)
    assert query["MemorySize"] == 2048
    # DuckDB gets half the function's memory; results and the process keep the rest.
    assert query["Environment"]["Variables"][envvars.DUCKDB_MEMORY_LIMIT] == "1024MB"
    assert query["Environment"]["Variables"][envvars.PREFIX] == "tsdb"
    [mapping] = custom.of_type("AWS::Lambda::EventSourceMapping").values()
    assert mapping["Properties"]["BatchSize"] == 500
    assert mapping["Properties"]["MaximumBatchingWindowInSeconds"] == 20
    ingest_env = custom.props(custom.stack.ingest.ingest.function)["Environment"]["Variables"]
    assert ingest_env[envvars.INGEST_BATCH_MESSAGES] == "500"
    assert ingest_env[envvars.INGEST_BATCH_WINDOW_S] == "20"
    # The claim checks and quarantine follow the prefix.
    rules = custom.props(custom.stack.storage.bucket)["LifecycleConfiguration"]["Rules"]
    assert {r.get("Prefix") for r in rules} >= {"tsdb/_arcs/claims/", "tsdb/_arcs/quarantine/"}
    assert custom.props(custom.stack.athena.database)["DatabaseInput"]["Name"] == "arcs_test"


def test_unknown_architecture_is_refused(layers_dir: Path) -> None:
    with pytest.raises(ValueError, match="architecture"):
        synthesize({"layers_dir": str(layers_dir), "architecture": "riscv64"})


def test_layer_descriptions_name_whole_versions_within_lambdas_limit() -> None:
    from infra.layers import layer_description

    assert layer_description("core", ["arcs (src/arcs)"]) == "Arc Serverless core: arcs (src/arcs)"
    many = [f"package-{i}==1.{i}.0" for i in range(40)]
    text = layer_description("deps", many)
    assert len(text) <= 256
    *listed, last = text.removeprefix("Arc Serverless deps: ").split(", ")
    assert last == "..."
    assert listed == many[: len(listed)]  # whole entries, in order, as many as fit
    assert len(listed) > 5


def test_layers_built_for_another_architecture_are_refused(tmp_path: Path) -> None:
    from infra.layers import ArcsLayers

    from tests.infra.conftest import fake_layers

    fake_layers(tmp_path, "arm64")
    (tmp_path / "arm64").rename(tmp_path / "x86_64")  # an arm64 build where x86_64 is looked for
    with pytest.raises(ValueError, match="on arm64"):
        ArcsLayers(Stack(App(), "Probe"), "Layers", architecture="x86_64", build_dir=tmp_path)

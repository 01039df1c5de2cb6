"""The Lambda layers, from what ``make layers`` built into ``layers/build/<arch>/``.

Each layer's code is the deterministic zip the build wrote (so an unchanged ``uv.lock`` is an
unchanged asset and nothing redeploys). When the build output is absent (a fresh clone, CI) the
app still synthesizes, so the template can be tested and linted anywhere, but it cannot be
deployed: the functions then have no layers, synthesis warns, and a CloudFormation rule in the
template fails the deployment before anything is created, saying to run ``make layers``.
"""

from __future__ import annotations

from pathlib import Path

from aws_cdk import Annotations, CfnRule, CfnRuleAssertion, Fn
from aws_cdk import aws_lambda as lambda_
from constructs import Construct
from layers.build import BUILD_DIR, PYTHON_VERSION, Manifest, arch_dir

from infra.function import RUNTIME

ARCHITECTURES = {"arm64": lambda_.Architecture.ARM_64, "x86_64": lambda_.Architecture.X86_64}
_DESCRIPTION_LIMIT = 256  # Lambda's limit for a layer description


def missing_message(architecture: str, build_dir: Path) -> str:
    return (
        f"Lambda layers for {architecture} are not built ({arch_dir(architecture, build_dir)}): run "
        f"'make layers ARCH={architecture}' and deploy again"
    )


def layer_description(name: str, distributions: list[str]) -> str:
    """``Arc Serverless <name>: a==1, b==2, ...``: whole entries only, within Lambda's limit."""
    text = f"Arc Serverless {name}: "
    for i, entry in enumerate(distributions):
        candidate = text + (", " if i else "") + entry
        if len(candidate) > _DESCRIPTION_LIMIT - len(", ..."):
            return text + ", ..."
        text = candidate
    return text


class ArcsLayers(Construct):
    """``layers``: the built layers by name, or empty (and an undeployable template) when not built."""

    def __init__(self, scope: Construct, construct_id: str, *, architecture: str, build_dir: Path = BUILD_DIR) -> None:
        super().__init__(scope, construct_id)
        if architecture not in ARCHITECTURES:
            raise ValueError(f"architecture must be one of {sorted(ARCHITECTURES)}, not {architecture!r}")
        self.architecture = ARCHITECTURES[architecture]
        self.layers: dict[str, lambda_.ILayerVersion] = {}
        manifest_path = arch_dir(architecture, build_dir) / "manifest.json"
        if not manifest_path.is_file():
            message = missing_message(architecture, build_dir)
            Annotations.of(self).add_warning_v2("arcs:layers-not-built", message)
            # Evaluated by CloudFormation before any change: this template never deploys half-made.
            CfnRule(
                self,
                "LayersBuilt",
                assertions=[
                    CfnRuleAssertion(assert_=Fn.condition_equals("not-built", "built"), assert_description=message)
                ],
            )
            return
        manifest = Manifest.load(manifest_path)
        if manifest.architecture != architecture or manifest.python_version != PYTHON_VERSION:
            raise ValueError(f"{manifest_path} is for Python {manifest.python_version} on {manifest.architecture}")
        for name, info in manifest.layers.items():
            description = layer_description(name, info.distributions)
            self.layers[name] = lambda_.LayerVersion(
                self,
                name.capitalize(),
                code=lambda_.Code.from_asset(str(manifest_path.parent / info.zip_path)),
                compatible_runtimes=[RUNTIME],
                compatible_architectures=[self.architecture],
                description=description,
            )

    @property
    def built(self) -> bool:
        return bool(self.layers)

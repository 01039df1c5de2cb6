"""One synthesis of the app, and how the template tests read it: resources by type, a construct's
logical id and properties, the functions and their roles' statements.

conftest's ``synth`` (the default stack) and ``athena_synth`` (with an Athena table) make one each
per session; :func:`synthesize` makes others (a few seconds each on two cores).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aws_cdk import App, CfnElement
from aws_cdk.assertions import Template
from infra.app import build
from infra.function import FUNCTIONS_DIR
from infra.stack import ArcsStack

Json = dict[str, Any]
ATHENA_TABLES = {"metrics.cpu-load": {"host": "string", "usage": "float64", "procs": "int64", "up": "bool"}}


@dataclass(frozen=True)
class Synth:
    app: App
    stack: ArcsStack
    #: CDK's assertions on the template; ``template`` is the same template as JSON.
    assertions: Template
    template: Json

    @property
    def resources(self) -> dict[str, Json]:
        return self.template["Resources"]  # type: ignore[no-any-return]

    def of_type(self, cfn_type: str) -> dict[str, Json]:
        return {k: v for k, v in self.resources.items() if v["Type"] == cfn_type}

    def logical_id(self, construct: Any) -> str:
        element = construct if isinstance(construct, CfnElement) else construct.node.default_child
        return self.stack.get_logical_id(element)

    def props(self, construct: Any) -> Json:
        return self.resources[self.logical_id(construct)]["Properties"]  # type: ignore[no-any-return]

    def functions(self) -> dict[str, Any]:
        """The stack's functions (``ArcsFunction``) by name."""
        stack = self.stack
        return {
            "edge": stack.edge.edge,
            "ingest": stack.ingest.ingest,
            "query": stack.query.query,
            "authorizer": stack.authorizer.authorizer_function,
            "bootstrap": stack.bootstrap.bootstrap,
            "tasks": stack.tasks.tasks,
        }

    def tables(self) -> dict[str, Any]:
        """The stack's DynamoDB tables by name."""
        storage = self.stack.storage
        return {"tokens": storage.tokens_table, "catalog": storage.catalog_table, "leases": storage.leases_table}

    def statements(self, role: Any) -> list[Json]:
        """The statements of the policies attached to ``role``."""
        role_id = self.logical_id(role)
        return [
            statement
            for policy in self.of_type("AWS::IAM::Policy").values()
            if {"Ref": role_id} in policy["Properties"]["Roles"]
            for statement in policy["Properties"]["PolicyDocument"]["Statement"]
        ]


def synthesize(context: dict[str, Any], functions_dir: Path = FUNCTIONS_DIR) -> Synth:
    app, stack = build(App(context=context), functions_dir=functions_dir)
    assertions = Template.from_stack(stack)
    return Synth(app, stack, assertions, assertions.to_json())


def with_athena(layers_dir: Path) -> dict[str, Any]:
    """The context of a stack with ``ATHENA_TABLES``, on the stand-in layers of ``layers_dir``."""
    return {"layers_dir": str(layers_dir), "athena_tables": json.dumps(ATHENA_TABLES)}


def actions_of(statements: list[Json]) -> set[str]:
    """Every action the statements name."""
    out: set[str] = set()
    for statement in statements:
        action = statement["Action"]
        out.update([action] if isinstance(action, str) else action)
    return out

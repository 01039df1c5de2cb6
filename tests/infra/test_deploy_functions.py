"""The functions beyond the request path: the tasks function and its schedules, the bootstrap
admin token, and the query function from the container image.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
from aws_cdk import App, Stack
from aws_cdk import aws_events as events
from aws_cdk import aws_sqs as sqs
from cdk_nag import AwsSolutionsChecks
from infra.compact import TASKS, ArcsTasks
from infra.failures import AsyncFailures
from infra.function import FUNCTIONS_DIR, FunctionDefaults
from infra.storage import ArcsStorage

from arcs import envvars
from tests.infra.synth import Synth, actions_of, synthesize
from tests.infra.test_deploy_iam import EXPECTED_ACTIONS

pytestmark = pytest.mark.infra


# --- tasks and its schedules ----------------------------------------------------------------------


def test_tasks_function_runs_long_with_duckdb_disk_and_the_write_path(athena_synth: Synth) -> None:
    props = athena_synth.props(athena_synth.stack.tasks.tasks.function)
    assert props["Handler"] == "handler.handler"
    assert props["Timeout"] == 900
    assert props["EphemeralStorage"] == {"Size": 10240}
    assert props["MemorySize"] >= 2048
    env = props["Environment"]["Variables"]
    assert set(env) >= {envvars.BUCKET, envvars.CATALOG_TABLE, envvars.LEASES_TABLE, envvars.WORK_DIR}
    assert envvars.TOKENS_TABLE not in env
    # Continuous queries write their results through the write queue.
    assert env[envvars.QUEUE_URL] == {"Ref": athena_synth.logical_id(athena_synth.stack.ingest.queue)}


def _tasks_handler_tasks() -> set[str]:
    """The tasks ``functions/compact/handler.py`` runs (any other one it refuses)."""
    spec = importlib.util.spec_from_file_location("arcs_tasks_handler", FUNCTIONS_DIR / "compact" / "handler.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return {module.COMPACTION, module.CONTINUOUS_QUERIES, module.RETENTION}


def test_schedules_send_the_tasks_function_only_tasks_it_runs(athena_synth: Synth) -> None:
    function_arn = {"Fn::GetAtt": [athena_synth.logical_id(athena_synth.stack.tasks.tasks.function), "Arn"]}
    dlq_arn = {"Fn::GetAtt": [athena_synth.logical_id(athena_synth.stack.failures.queue), "Arn"]}
    rules = athena_synth.of_type("AWS::Events::Rule")
    assert len(rules) == len(TASKS) == 3
    seen = {}
    for rule in rules.values():
        props = rule["Properties"]
        assert props["State"] == "ENABLED"
        [target] = props["Targets"]
        assert target["Arn"] == function_arn
        assert target["RetryPolicy"] == {"MaximumEventAgeInSeconds": 3600, "MaximumRetryAttempts": 2}
        assert target["DeadLetterConfig"] == {"Arn": dlq_arn}
        event = json.loads(target["Input"])
        assert set(event) == {"task"}
        seen[event["task"]] = props["ScheduleExpression"]
    assert seen == {
        "compaction": "rate(15 minutes)",
        "continuous_queries": "rate(1 minute)",
        "retention": "cron(17 * * * ? *)",
    }
    assert set(seen) <= _tasks_handler_tasks()
    # EventBridge may invoke the function, and only its rules may.
    permissions = [
        p["Properties"]
        for p in athena_synth.of_type("AWS::Lambda::Permission").values()
        if p["Properties"]["Principal"] == "events.amazonaws.com"
    ]
    assert len(permissions) == len(TASKS)
    assert {json.dumps(p["SourceArn"]) for p in permissions} == {
        json.dumps({"Fn::GetAtt": [logical, "Arn"]}) for logical in rules
    }


def test_a_schedule_for_a_task_the_function_does_not_run_is_refused() -> None:
    stack = Stack(App(), "Probe")
    storage = ArcsStorage(stack, "Storage")
    with pytest.raises(ValueError, match="vacuum"):
        ArcsTasks(
            stack,
            "Tasks",
            storage=storage,
            defaults=FunctionDefaults(environment={}),
            write_queue=sqs.Queue(stack, "Writes"),
            failures=AsyncFailures(stack, "Failures"),
            schedules={"vacuum": events.Schedule.cron(hour="3", minute="17")},
        )


# --- the bootstrap admin token ----------------------------------------------------------------------


def test_admin_token_is_generated_into_secrets_manager_and_created_at_deploy(athena_synth: Synth) -> None:
    boot = athena_synth.stack.bootstrap
    secret_id = athena_synth.logical_id(boot.secret)
    secret = athena_synth.resources[secret_id]
    assert secret["DeletionPolicy"] == "Retain"
    generated = secret["Properties"]["GenerateSecretString"]
    assert generated["PasswordLength"] >= 32
    assert generated["ExcludePunctuation"] is True
    [custom] = athena_synth.of_type("Custom::ArcsBootstrapToken").values()
    assert custom["Properties"]["ServiceToken"] == {
        "Fn::GetAtt": [athena_synth.logical_id(boot.bootstrap.function), "Arn"]
    }
    assert custom["Properties"]["SecretArn"] == {"Ref": secret_id}
    # A new tokens table makes CloudFormation call the handler again, which fills it.
    assert custom["Properties"]["TokensTable"] == {
        "Ref": athena_synth.logical_id(athena_synth.stack.storage.tokens_table)
    }
    [read] = [
        s for s in athena_synth.statements(boot.bootstrap.role) if "secretsmanager:GetSecretValue" in actions_of([s])
    ]
    assert read["Resource"] == {"Ref": secret_id}
    handler = athena_synth.props(boot.bootstrap.function)
    assert handler["Handler"] == "handler.handler"
    assert (FUNCTIONS_DIR / "bootstrap" / "handler.py").is_file()


def test_outputs_name_the_api_the_secret_and_the_bucket(athena_synth: Synth) -> None:
    outputs = athena_synth.template["Outputs"]
    assert "ApiUrl" in outputs
    assert outputs["AdminTokenSecretArn"]["Value"] == {
        "Ref": athena_synth.logical_id(athena_synth.stack.bootstrap.secret)
    }
    assert "get-secret-value" in outputs["AdminTokenSecretArn"]["Description"]
    assert outputs["BucketName"]["Value"] == {"Ref": athena_synth.logical_id(athena_synth.stack.storage.bucket)}
    assert outputs["GlueDatabase"]["Value"] == "arcserverless"


# --- the query function from the container image (optional) ----------------------------------------


def test_query_function_can_run_the_container_image(layers_dir: Path) -> None:
    image = synthesize({"layers_dir": str(layers_dir), "query_image": "true"})
    query = image.props(image.stack.query.query.function)
    assert query["PackageType"] == "Image"
    assert "Layers" not in query
    assert "Runtime" not in query
    assert "Handler" not in query
    assert query["ImageConfig"] == {"Command": ["functions.query.handler.stream_handler"]}
    assert query["Architectures"] == ["arm64"]
    # The same environment and permissions as from layers; the image's entry point starts the
    # streaming runtime itself (container/entrypoint.sh), so no wrapper is named.
    env = query["Environment"]["Variables"]
    assert env[envvars.BACKEND] == "aws"
    assert envvars.AWS_LAMBDA_EXEC_WRAPPER not in env
    assert envvars.DUCKDB_MEMORY_LIMIT in env
    assert actions_of(image.statements(image.stack.query.query.role)) == EXPECTED_ACTIONS["query"]
    # The image asset is the repository's Dockerfile, built for the functions' architecture.
    assets = json.loads((Path(image.app.outdir) / f"{image.stack.stack_name}.assets.json").read_text())
    [docker] = assets["dockerImages"].values()
    assert docker["source"]["platform"] == "linux/arm64"
    staged = Path(image.app.outdir) / docker["source"]["directory"]
    assert (staged / "Dockerfile").read_bytes() == (FUNCTIONS_DIR.parent / "Dockerfile").read_bytes()
    assert not (staged / ".venv").exists()  # .dockerignore applies to the staged context
    assert not (staged / "layers" / "build").exists()
    # The other functions still run from their folders and layers.
    for name, function in image.functions().items():
        if name != "query":
            assert image.props(function.function)["Runtime"] == "python3.12", name
    report = AwsSolutionsChecks().validate_scope(image.stack)
    assert [v.rule_name for v in report.violations] == []

"""Where the data lives: quarantined files' expiry and Athena's tables over the hour layout."""

from __future__ import annotations

import re

import pytest
from aws_cdk import App, Stack
from infra.athena import ArcsAthena
from infra.storage import ArcsStorage

from tests.infra.synth import Synth

pytestmark = pytest.mark.infra


# --- storage ---------------------------------------------------------------------------------------


def test_quarantined_files_expire_after_90_days(athena_synth: Synth) -> None:
    rules = athena_synth.props(athena_synth.stack.storage.bucket)["LifecycleConfiguration"]["Rules"]
    [quarantine] = [r for r in rules if r.get("Prefix") == "_arcs/quarantine/"]
    assert quarantine["ExpirationInDays"] == 90
    assert quarantine["Status"] == "Enabled"
    # Nothing expires under a data prefix: every other rule is the system directory's or multipart aborts.
    for rule in rules:
        assert rule.get("Prefix", "_arcs/").startswith("_arcs/") or "ExpirationInDays" not in rule


# --- Athena ----------------------------------------------------------------------------------------


def test_glue_tables_project_the_hour_layout(athena_synth: Synth) -> None:
    database = athena_synth.props(athena_synth.stack.athena.database)
    assert database["DatabaseInput"]["Name"] == "arcserverless"
    [table] = athena_synth.of_type("AWS::Glue::Table").values()
    props = table["Properties"]
    assert props["DatabaseName"] == "arcserverless"
    table_input = props["TableInput"]
    assert table_input["Name"] == "metrics_cpu_load"
    assert table_input["TableType"] == "EXTERNAL_TABLE"
    assert table_input["PartitionKeys"] == [{"Name": "hour", "Type": "string"}]
    params = table_input["Parameters"]
    assert params["projection.enabled"] == "true"
    assert params["projection.hour.type"] == "date"
    assert params["projection.hour.format"] == "yyyy/MM/dd/HH"
    assert params["projection.hour.interval.unit"] == "HOURS"
    assert params["projection.hour.range"].endswith(",NOW")
    bucket = {"Ref": athena_synth.logical_id(athena_synth.stack.storage.bucket)}
    assert params["storage.location.template"] == {"Fn::Join": ["", ["s3://", bucket, "/metrics/cpu-load/${hour}/"]]}
    descriptor = table_input["StorageDescriptor"]
    assert descriptor["Location"] == {"Fn::Join": ["", ["s3://", bucket, "/metrics/cpu-load/"]]}
    assert descriptor["SerdeInfo"]["SerializationLibrary"].endswith("ParquetHiveSerDe")
    assert descriptor["Columns"] == [
        {"Name": "time", "Type": "timestamp"},
        {"Name": "host", "Type": "string"},
        {"Name": "usage", "Type": "double"},
        {"Name": "procs", "Type": "bigint"},
        {"Name": "up", "Type": "boolean"},
    ]


def test_projection_format_matches_the_storage_layout() -> None:
    from datetime import UTC, datetime

    from arcs import layout

    key = layout.data_key("", "metrics", "cpu", datetime(2026, 11, 22, 7, tzinfo=UTC), "f.parquet")
    assert re.search(r"/2026/11/22/07/", key), key  # yyyy/MM/dd/HH, as projected


@pytest.mark.parametrize(
    "tables",
    [{"nodot": {"a": "string"}}, {"metrics.cpu": {"a": "varchar"}}, {"1db.cpu": {"a": "string"}}],
)
def test_athena_tables_that_cannot_exist_are_refused(tables: dict[str, dict[str, str]]) -> None:
    stack = Stack(App(), "Probe")
    storage = ArcsStorage(stack, "Storage")
    with pytest.raises(ValueError, match="athena_tables"):
        ArcsAthena(
            stack, "Athena", bucket_name=storage.bucket.bucket_name, prefix="", database_name="probe", tables=tables
        )

"""Athena over the same Parquet: a Glue database, and one table per measurement named at deploy.

Measurements appear at run time, so the stack cannot know them all: it creates the database and
a table for each measurement given in the ``athena_tables`` context (``{"db.measurement":
{"column": "type", ...}}``, types as the API stores them). Every table uses partition projection
over the storage layout (``{db}/{measurement}/YYYY/MM/DD/HH/``): one partition column, ``hour``,
a string ``'YYYY/MM/DD/HH'`` of projection type ``date``; no crawler, no ``MSCK REPAIR``, and a
query that filters on ``hour`` reads only those folders. docs/athena.md shows the same table
as SQL, to add measurements without redeploying.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from aws_cdk import Stack
from aws_cdk import aws_glue as glue
from constructs import Construct

#: The stored types (README "Writing") as Athena (Hive) types.
ATHENA_TYPES = {
    "int64": "bigint",
    "float64": "double",
    "string": "string",
    "bool": "boolean",
    "timestamp": "timestamp",
}
PARTITION_COLUMN = "hour"
#: Projection of the layout's hour folders; Athena's date format is Java's.
PROJECTION_FORMAT = "yyyy/MM/dd/HH"
PROJECTION_START = "2000/01/01/00"
_PARQUET = {
    "input_format": "org.apache.hadoop.hive.ql.io.parquet.MapredParquetInputFormat",
    "output_format": "org.apache.hadoop.hive.ql.io.parquet.MapredParquetOutputFormat",
    "serde": "org.apache.hadoop.hive.ql.io.parquet.serde.ParquetHiveSerDe",
}
_NAME = re.compile(r"^[a-zA-Z][a-zA-Z0-9_-]*$")


def table_name(database: str, measurement: str) -> str:
    """Glue keeps names lower case; ``-`` would need quoting in every Athena query."""
    return f"{database}_{measurement}".lower().replace("-", "_")


def table_parameters(location: str) -> dict[str, str]:
    """The partition-projection properties of a measurement's table at ``location`` (ends with ``/``)."""
    return {
        "classification": "parquet",
        "EXTERNAL": "TRUE",
        "projection.enabled": "true",
        f"projection.{PARTITION_COLUMN}.type": "date",
        f"projection.{PARTITION_COLUMN}.format": PROJECTION_FORMAT,
        f"projection.{PARTITION_COLUMN}.range": f"{PROJECTION_START},NOW",
        f"projection.{PARTITION_COLUMN}.interval": "1",
        f"projection.{PARTITION_COLUMN}.interval.unit": "HOURS",
        "storage.location.template": f"{location}${{{PARTITION_COLUMN}}}/",
    }


class ArcsAthena(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        bucket_name: str,
        prefix: str,
        database_name: str,
        tables: Mapping[str, Mapping[str, str]],
    ) -> None:
        super().__init__(scope, construct_id)
        account = Stack.of(self).account
        self.database_name = database_name
        self.database = glue.CfnDatabase(
            self,
            "Database",
            catalog_id=account,
            database_input=glue.CfnDatabase.DatabaseInputProperty(
                name=database_name,
                description="Arc Serverless data (Parquet, hour partitions) for Athena; see docs/athena.md",
            ),
        )
        root = f"s3://{bucket_name}/{prefix + '/' if prefix else ''}"
        self.tables: dict[str, glue.CfnTable] = {}
        for qualified, columns in sorted(tables.items()):
            database, _, measurement = qualified.partition(".")
            if not (_NAME.match(database) and _NAME.match(measurement)):
                raise ValueError(f"athena_tables: {qualified!r} is not database.measurement")
            unknown = {t for t in columns.values() if t not in ATHENA_TYPES}
            if unknown:
                raise ValueError(
                    f"athena_tables: {qualified}: unknown types {sorted(unknown)}; use {list(ATHENA_TYPES)}"
                )
            location = f"{root}{database}/{measurement}/"
            name = table_name(database, measurement)
            table = glue.CfnTable(
                self,
                f"Table-{name}",
                catalog_id=account,
                database_name=database_name,
                table_input=glue.CfnTable.TableInputProperty(
                    name=name,
                    description=f"{qualified} (Arc Serverless measurement)",
                    table_type="EXTERNAL_TABLE",
                    parameters=table_parameters(location),
                    partition_keys=[glue.CfnTable.ColumnProperty(name=PARTITION_COLUMN, type="string")],
                    storage_descriptor=glue.CfnTable.StorageDescriptorProperty(
                        location=location,
                        input_format=_PARQUET["input_format"],
                        output_format=_PARQUET["output_format"],
                        serde_info=glue.CfnTable.SerdeInfoProperty(serialization_library=_PARQUET["serde"]),
                        columns=[
                            glue.CfnTable.ColumnProperty(name="time", type="timestamp"),
                            *(
                                glue.CfnTable.ColumnProperty(name=column, type=ATHENA_TYPES[kind])
                                for column, kind in columns.items()
                                if column != "time"
                            ),
                        ],
                    ),
                ),
            )
            table.node.add_dependency(self.database)
            self.tables[qualified] = table

"""The optional S3 Express One Zone directory bucket (context ``express_zone``, an AZ id such as
``use1-az4``): single-digit-millisecond reads for the functions placed near it.

When it exists it holds the data files (docs/express.md): ingest writes them, compaction rewrites
them, and the query function reads them and, for admins, deletes and rewrites them (a database
drop, a delete, a retention policy run). Directory buckets authorize with sessions
(``s3express:CreateSession``), not per-object actions, so those three functions open read-write
sessions; the others never touch the bucket. The functions learn the bucket from
``ARCS_EXPRESS_BUCKET``. Encryption is SSE-S3, and a directory bucket cannot be public nor have ACLs.
"""

from __future__ import annotations

from aws_cdk import RemovalPolicy
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_s3express as s3express
from constructs import Construct

from arcs import envvars


class ArcsExpress(Construct):
    def __init__(self, scope: Construct, construct_id: str, *, zone_id: str) -> None:
        super().__init__(scope, construct_id)
        self.bucket = s3express.CfnDirectoryBucket(
            self,
            "Bucket",
            data_redundancy="SingleAvailabilityZone",
            location_name=zone_id,
            bucket_encryption=s3express.CfnDirectoryBucket.BucketEncryptionProperty(
                server_side_encryption_configuration=[
                    s3express.CfnDirectoryBucket.ServerSideEncryptionRuleProperty(
                        server_side_encryption_by_default=s3express.CfnDirectoryBucket.ServerSideEncryptionByDefaultProperty(
                            sse_algorithm="AES256"
                        )
                    )
                ]
            ),
        )
        self.bucket.apply_removal_policy(RemovalPolicy.RETAIN)  # it holds data, like the main bucket
        self.bucket_name = self.bucket.ref

    def grant_sessions(self, function: lambda_.Function, role: iam.IRole) -> None:
        """Let ``function`` open read-write sessions on the bucket, and tell it the bucket's name."""
        role.add_to_principal_policy(
            iam.PolicyStatement(actions=["s3express:CreateSession"], resources=[self.bucket.attr_arn])
        )
        function.add_environment(envvars.EXPRESS_BUCKET, self.bucket_name)

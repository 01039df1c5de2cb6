"""The REST API: writes go to the edge function, everything else to the query function.

API Gateway REST (not HTTP API) because only it has API keys and usage plans, WAF and request
validation (DESIGN.md §5); both cap a request at 10 MB. Every body is passed to Lambda as binary (base64), so
MessagePack, gzip and zstd arrive byte for byte.
"""

from __future__ import annotations

from aws_cdk import aws_apigateway as apigw
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from constructs import Construct

from infra.nag import acknowledge

#: The write routes of API.md, all POST, all served by the edge function.
WRITE_PATHS: tuple[str, ...] = (
    "/api/v1/write/msgpack",
    "/api/v1/write/json",
    "/api/v1/write/line-protocol",
    "/write",
    "/api/v2/write",
)
#: Probes: the only routes without a token.
PUBLIC_PATHS: tuple[str, ...] = ("/health", "/ready")
BINARY_MEDIA_TYPES = ["*/*"]
# Errors the gateway itself answers (no/invalid token, throttled, too large, timeout) in API.md's shape.
_ERROR_TEMPLATE = '{"success": false, "error": $context.error.messageString}'


class ArcsApi(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        edge: lambda_.IFunction,
        query: lambda_.IFunction,
        authorizer: apigw.IAuthorizer,
        stage_name: str = "prod",
        throttling_rate_limit: int = 1000,
        throttling_burst_limit: int = 2000,
        cloud_watch_role: bool = True,
        log_retention: logs.RetentionDays = logs.RetentionDays.ONE_MONTH,
    ) -> None:
        super().__init__(scope, construct_id)
        self.access_logs = logs.LogGroup(self, "AccessLogs", retention=log_retention)
        self.api = apigw.RestApi(
            self,
            "Api",
            description="Arc Serverless: Arc's HTTP API (writes, queries, tokens) over Parquet on S3",
            endpoint_types=[apigw.EndpointType.REGIONAL],
            binary_media_types=BINARY_MEDIA_TYPES,
            # API Gateway needs an account-wide role to write any log; this creates it (one per region).
            cloud_watch_role=cloud_watch_role,
            deploy_options=apigw.StageOptions(
                stage_name=stage_name,
                throttling_rate_limit=throttling_rate_limit,
                throttling_burst_limit=throttling_burst_limit,
                access_log_destination=apigw.LogGroupLogDestination(self.access_logs),
                access_log_format=apigw.AccessLogFormat.json_with_standard_fields(
                    caller=True,
                    http_method=True,
                    ip=True,
                    protocol=True,
                    request_time=True,
                    resource_path=True,
                    response_length=True,
                    status=True,
                    user=True,
                ),
                logging_level=apigw.MethodLoggingLevel.ERROR,
                # Never on: it would log bodies and the tokens in headers and query strings.
                data_trace_enabled=False,
                metrics_enabled=True,
                tracing_enabled=True,
            ),
        )
        for response_type in (apigw.ResponseType.DEFAULT_4_XX, apigw.ResponseType.DEFAULT_5_XX):
            self.api.add_gateway_response(
                f"Gateway{response_type.response_type}",
                type=response_type,
                templates={"application/json": _ERROR_TEMPLATE},
            )

        # One invoke permission per function for this API (any stage, method, path), not one per method:
        # the API has ~20 methods and a function's resource policy is capped at 20 KB.
        self._edge = apigw.LambdaIntegration(edge, scope_permission_to_method=False)
        self._query = apigw.LambdaIntegration(query, scope_permission_to_method=False)
        self._authorizer = authorizer
        self._routed: set[str] = set()

        self._fallback(self.api.root)
        for path in WRITE_PATHS:
            resource = self._resource(path)
            resource.add_method("POST", self._edge, authorizer=authorizer)
        for path in PUBLIC_PATHS:
            resource = self._resource(path)
            method = resource.add_method("GET", self._query, authorization_type=apigw.AuthorizationType.NONE)
            acknowledge(method, "AwsSolutions-APIG4", "Health and readiness probes answer without a token (API.md).")

        acknowledge(
            self.api,
            "AwsSolutions-COG4",
            "Clients authenticate with Arc tokens (Bearer/Token/Basic header, x-api-key or ?p=), verified by "
            "the REQUEST Lambda authorizer; a Cognito user pool cannot speak InfluxDB/Arc client protocols.",
        )
        acknowledge(
            self.api,
            "AwsSolutions-APIG2",
            "Bodies are MessagePack, line protocol or JSON, possibly gzip/zstd: no gateway model can validate "
            "them. The edge function validates every request whole and answers 400 naming what is wrong.",
        )
        acknowledge(
            self.api,
            "AwsSolutions-APIG3",
            "No WAF web ACL by default (a per-request cost most deployments do not want); stage throttling "
            "limits abuse. Associate a web ACL with the stage where policy requires one.",
        )
        if cloud_watch_role:
            role = self.api.node.find_child("CloudWatchRole")
            acknowledge(
                role,
                "AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/"
                "AmazonAPIGatewayPushToCloudWatchLogs]",
                "The AWS-managed policy made for exactly this role: it lets API Gateway write the access and "
                "execution logs the stage is required to keep.",
            )

    def _resource(self, path: str) -> apigw.IResource:
        """The resource for ``path``; the resources above it fall back to the query function."""
        resource = self.api.root
        for part in path.strip("/").split("/"):
            self._fallback(resource)
            resource = resource.get_resource(part) or resource.add_resource(part)
        return resource

    def _fallback(self, resource: apigw.IResource) -> None:
        """Routes under ``resource`` not declared explicitly go to the query function, with a token.

        ``{proxy+}`` takes the tree below ``resource`` and ``ANY`` the resource itself, so that
        routing never depends on whether API Gateway falls back from a static resource (``/api``)
        to a greedy one higher up (``/{proxy+}``).
        """
        if resource.path in self._routed:
            return
        self._routed.add(resource.path)
        resource.add_method("ANY", self._query, authorizer=self._authorizer)
        resource.add_proxy(
            default_integration=self._query,
            default_method_options=apigw.MethodOptions(authorizer=self._authorizer),
            any_method=True,
        )

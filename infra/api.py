"""The REST API: writes go to the edge function, everything else to the query function.

API Gateway REST (not HTTP API) because only it has API keys and usage plans, WAF and request
validation; both cap a request at 10 MB. Every body is passed to Lambda as binary (base64), so
MessagePack, gzip and zstd arrive byte for byte.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field

from aws_cdk import Duration
from aws_cdk import aws_apigateway as apigw
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from constructs import Construct

from arcs.http.routes.health import HEALTH, PING_BUILD, PING_VERSION, PROBE_METHODS
from arcs.settings import AWS_TOO_LARGE_MESSAGE
from arcs.write.paths import WRITE_ROUTES, takes_cached_authorizer
from infra.nag import acknowledge

BINARY_MEDIA_TYPES = ["*/*"]
# Errors the gateway itself answers (no/invalid token, throttled, too large, timeout) in the API's error shape.
_ERROR_TEMPLATE = '{"success": false, "error": $context.error.messageString}'
#: The authorizers deny exactly one thing (any other refusal is a 401): a write declaring a body
#: larger than reaches the edge function on AWS (``functions/authorizer``). So ``ACCESS_DENIED``
#: is that write's 413, in the API's error shape, instead of the 500 API Gateway answers when
#: Lambda refuses the invoke. A static text: nothing of the request goes into it.
TOO_LARGE_STATUS = 413


@dataclass(frozen=True)
class Probe:
    status: int
    #: The mapping template of the answer; empty: no body.
    body: str = ""
    headers: Mapping[str, str] = field(default_factory=dict)


#: The probes, the only routes without a token, and what the gateway answers on each (a MOCK
#: integration, so an anonymous request never reaches a function, nor data): ``/health`` (InfluxDB's
#: shape) and ``/ready`` as ``arcs.http.routes.health`` does (without uptime: no process answers), ``/ping`` as
#: InfluxDB does (204 and its version header).
PROBES: Mapping[str, Probe] = {
    "/health": Probe(200, json.dumps({**HEALTH, "time": "$context.requestTime"})),
    "/ready": Probe(200, '{"status": "ready"}'),
    "/ping": Probe(204, headers={"X-Influxdb-Version": PING_VERSION, "X-Influxdb-Build": PING_BUILD}),
}
PUBLIC_PATHS: tuple[str, ...] = tuple(PROBES)
#: A probe usually has no body and no Content-Type (read as JSON); these are the types clients send.
_PROBE_REQUEST_TYPES = (
    "application/json",
    "text/plain",
    "application/octet-stream",
    "application/x-www-form-urlencoded",
)


class ArcsApi(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        edge: lambda_.IFunction,
        query: lambda_.IFunction,
        query_timeout: Duration,
        token_authorizer: apigw.IAuthorizer,
        request_authorizer: apigw.IAuthorizer,
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
        self.api.add_gateway_response(
            "GatewayACCESS_DENIED",
            type=apigw.ResponseType.ACCESS_DENIED,
            status_code=str(TOO_LARGE_STATUS),
            templates={"application/json": json.dumps({"success": False, "error": AWS_TOO_LARGE_MESSAGE})},
        )

        # One invoke permission per function for this API (any stage, method, path), not one per method:
        # the API has ~20 methods and a function's resource policy is capped at 20 KB.
        self._edge = apigw.LambdaIntegration(edge, scope_permission_to_method=False)
        # The query function's answers stream (InvokeWithResponseStream): a query may run past the
        # 29 s of a buffered integration, and a result may pass Lambda's 6 MB and the API's 10 MB.
        self._query = apigw.LambdaIntegration(
            query,
            scope_permission_to_method=False,
            response_transfer_mode=apigw.ResponseTransferMode.STREAM,
            timeout=query_timeout,
        )
        self._token_authorizer = token_authorizer
        self._request_authorizer = request_authorizer
        self._routed: set[str] = set()

        self._fallback(self.api.root)
        for path in WRITE_ROUTES:
            resource = self._resource(path)
            # Uncached: InfluxDB clients send the token in the query or the header, and the
            # authorizer checks each write's declared length.
            resource.add_method("POST", self._edge, authorizer=request_authorizer)
        for path, probe in PROBES.items():
            resource = self._resource(path)
            for verb in PROBE_METHODS:
                method = resource.add_method(
                    verb,
                    _probe_integration(probe),
                    authorization_type=apigw.AuthorizationType.NONE,
                    method_responses=[
                        apigw.MethodResponse(
                            status_code=str(probe.status),
                            response_parameters={f"method.response.header.{name}": True for name in _headers(probe)},
                        )
                    ],
                )
                acknowledge(
                    method,
                    "AwsSolutions-APIG4",
                    "Health, readiness and ping probes answer without a token, from API Gateway itself "
                    "(a MOCK integration): no function, no data.",
                )

        acknowledge(
            self.api,
            "AwsSolutions-COG4",
            "Clients authenticate with Arc tokens (Bearer/Token/Basic header, x-api-key or ?p=), verified by "
            "the REQUEST Lambda authorizers; a Cognito user pool cannot speak InfluxDB/Arc client protocols.",
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
        """Routes under ``resource`` not declared explicitly go to the query function, with a token:
        checked by the cached authorizer under ``/api/v1`` (Arc's API, Authorization header) but
        its write prefix, by the uncached one elsewhere (InfluxDB's paths, whose clients may send
        ``?u=&p=``, and wherever the authorizer may deny a write for its size).

        ``{proxy+}`` takes the tree below ``resource`` and ``ANY`` the resource itself, so that
        routing never depends on whether API Gateway falls back from a static resource (``/api``)
        to a greedy one higher up (``/{proxy+}``).
        """
        if resource.path in self._routed:
            return
        self._routed.add(resource.path)
        # Under the write prefix the authorizer may deny an oversized write: never cache that.
        cached = takes_cached_authorizer(resource.path + "/")
        authorizer = self._token_authorizer if cached else self._request_authorizer
        resource.add_method("ANY", self._query, authorizer=authorizer)
        resource.add_proxy(
            default_integration=self._query,
            default_method_options=apigw.MethodOptions(authorizer=authorizer),
            any_method=True,
        )


def _headers(probe: Probe) -> dict[str, str]:
    return {"Content-Type": "application/json", **probe.headers} if probe.body else dict(probe.headers)


def _probe_integration(probe: Probe) -> apigw.MockIntegration:
    """API Gateway's own answer to a probe. The request is read as text whatever its type (binary
    media types are ``*/*``), so the template that picks the status always applies."""
    return apigw.MockIntegration(
        content_handling=apigw.ContentHandling.CONVERT_TO_TEXT,
        passthrough_behavior=apigw.PassthroughBehavior.NEVER,
        request_templates={kind: json.dumps({"statusCode": probe.status}) for kind in _PROBE_REQUEST_TYPES},
        integration_responses=[
            apigw.IntegrationResponse(
                status_code=str(probe.status),
                response_parameters={
                    f"method.response.header.{name}": f"'{value}'" for name, value in _headers(probe).items()
                },
                response_templates={"application/json": probe.body} if probe.body else None,
            )
        ],
    )

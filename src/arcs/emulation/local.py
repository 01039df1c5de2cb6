"""``arcs local``: the serverless topology on a local AWS emulator, the Lambda handlers unchanged.

A moto server on loopback (or the emulator ``AWS_ENDPOINT_URL`` names, e.g. LocalStack) holds
the bucket, the write queue with its dead-letter queue, and the tokens, catalog and leases tables;
the process environment is set as the CDK stack sets the functions' environment, and only then
are the handlers loaded from ``functions/``. The handlers share one process, hence one runtime
(``lambda_runtime``), so the environment names all three tables; the stack gives each function
only the ones it uses (docs/deploy.md), and its IAM policies enforce that. API Gateway is
``arcs.emulation.gateway`` behind uvicorn, the SQS event source ``arcs.emulation.poller``.
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import sys
import tempfile
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import boto3

from arcs import envvars
from arcs.adapters.aws.wiring import AwsClients, AwsResources, create_resources
from arcs.emulation.functions import LambdaFunction, load_handler
from arcs.emulation.gateway import API_GATEWAY_PAYLOAD_LIMIT, API_GATEWAY_TIMEOUT_S, ApiGateway
from arcs.emulation.poller import SQS_RECEIVE_MAX, SqsPoller
from arcs.emulation.schedule import AsyncInvoker, EventBridgeRule
from arcs.http.streaming import QUERY_BUDGET_S, query_function_timeout_s
from arcs.settings import ConfigError, Settings

if TYPE_CHECKING:
    from moto.server import ThreadedMotoServer

logger = logging.getLogger(__name__)

# Knobs of the emulated infrastructure only (the functions never read them).
MAX_RECEIVE_COUNT = "ARCS_LOCAL_MAX_RECEIVE_COUNT"
VISIBILITY_TIMEOUT_S = "ARCS_LOCAL_VISIBILITY_TIMEOUT_S"
AUTHORIZER_CACHE_TTL_S = "ARCS_LOCAL_AUTHORIZER_CACHE_TTL_S"  # > 0: cache keyed on the Authorization header
CQ_SCHEDULE_S = "ARCS_LOCAL_CQ_SCHEDULE_S"  # the EventBridge rule's rate for continuous queries (0: off)
RETENTION_SCHEDULE_S = "ARCS_LOCAL_RETENTION_SCHEDULE_S"  # the rule's rate for retention policies (0: off)
# Names the bucket, the queues and the tables, so that several emulations share one emulator.
RESOURCE_PREFIX = "ARCS_LOCAL_RESOURCE_PREFIX"
# What S3 takes as a bucket name, less dots (the queues' and tables' names then fit too).
_RESOURCE_PREFIX = re.compile(r"[a-z0-9][a-z0-9-]{1,61}[a-z0-9]")

#: Dummy credentials: moto accepts any, and real ones must never be needed (or sent) here.
DUMMY_KEY = "testing"
API_TIMEOUT_S = API_GATEWAY_TIMEOUT_S  # the stack's timeout of the edge function (buffered)
#: The functions' names, as ``arcs local`` runs them (the stack's construct ids, lower case).
EDGE_FUNCTION = "arcs-edge"
TASKS_FUNCTION = "arcs-tasks"


@dataclass(frozen=True, slots=True)
class EmulationConfig:
    endpoint_url: str | None = None  # an external emulator; None starts a moto server
    dynamodb_endpoint_url: str | None = None  # DynamoDB on another emulator; None: as S3 and SQS
    moto_port: int = 0
    region: str = "us-east-1"
    bucket: str = "arcs-local"
    queue_name: str = "arcs-writes"
    dlq_name: str = "arcs-writes-dlq"
    table_prefix: str = "arcs-local"  # the tables are ``arcs.adapters.aws.wiring.table_names`` of it
    # The stack's optional S3 Express directory bucket: a plain bucket of that name here.
    express_bucket: str = ""
    max_receive_count: int = 5
    # AWS asks for at least six times the consuming function's timeout, so the emulated ingest
    # function gets a sixth of it: 10 s, time enough for a full batch on a loaded machine, while a
    # batch cut short is delivered again within a minute (the stack: 3 minutes and 18).
    visibility_timeout_s: int = 60
    # API Gateway's authorizer result cache: off, as the stack deploys it (infra/authorizer.py).
    authorizer_cache_ttl_s: int = 0
    # The EventBridge rule that runs continuous queries: every minute, as the stack schedules it.
    cq_schedule_s: int = 60
    # The rule that applies retention policies: hourly.
    retention_schedule_s: int = 3600

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, moto_port: int = 0) -> EmulationConfig:
        env = os.environ if env is None else env
        base = cls()

        def whole(name: str, default: int, least: int) -> int:
            raw = env.get(name) or str(default)
            if not raw.isdigit() or int(raw) < least:
                raise ConfigError(f"{name} must be a whole number of at least {least}, got {raw!r}")
            return int(raw)

        config = cls(
            endpoint_url=env.get(envvars.AWS_ENDPOINT_URL) or None,
            dynamodb_endpoint_url=env.get(envvars.AWS_ENDPOINT_URL_DYNAMODB) or None,
            moto_port=moto_port,
            region=env.get(envvars.AWS_REGION) or env.get("AWS_DEFAULT_REGION") or base.region,
            express_bucket=(env.get(envvars.EXPRESS_BUCKET) or "").strip(),
            max_receive_count=whole(MAX_RECEIVE_COUNT, base.max_receive_count, 1),
            visibility_timeout_s=whole(VISIBILITY_TIMEOUT_S, base.visibility_timeout_s, 1),
            authorizer_cache_ttl_s=whole(AUTHORIZER_CACHE_TTL_S, base.authorizer_cache_ttl_s, 0),
            cq_schedule_s=whole(CQ_SCHEDULE_S, base.cq_schedule_s, 0),
            retention_schedule_s=whole(RETENTION_SCHEDULE_S, base.retention_schedule_s, 0),
        )
        prefix = env.get(RESOURCE_PREFIX)
        if not prefix:
            return config
        if not _RESOURCE_PREFIX.fullmatch(prefix):
            raise ConfigError(
                f"{RESOURCE_PREFIX} must be 3 to 63 lowercase letters, digits or inner hyphens, got {prefix!r}"
            )
        return replace(
            config, bucket=prefix, queue_name=f"{prefix}-writes", dlq_name=f"{prefix}-writes-dlq", table_prefix=prefix
        )


def function_environment(resources: AwsResources, endpoint_url: str, region: str, work_dir: str) -> dict[str, str]:
    """The functions' environment: the stack's names of the resources, the region Lambda itself sets,
    the emulator's endpoint, and a work directory (``/tmp/arcs`` in Lambda). Not Arrow's pool: it
    is fixed as pyarrow loads, which in this process is before; the ``arcs`` command chose it."""
    return {
        envvars.BACKEND: "aws",
        envvars.BUCKET: resources["bucket"],
        envvars.QUEUE_URL: resources["queue_url"],
        envvars.TOKENS_TABLE: resources["tokens_table"],
        envvars.CATALOG_TABLE: resources["catalog_table"],
        envvars.LEASES_TABLE: resources["leases_table"],
        envvars.AWS_ENDPOINT_URL: endpoint_url,
        envvars.AWS_REGION: region,
        envvars.WORK_DIR: work_dir,
    }


@dataclass
class Emulation:
    """The running topology; ``close`` stops what ``start_emulation`` started, in reverse."""

    config: EmulationConfig
    endpoint_url: str
    resources: AwsResources
    settings: Settings
    gateway: ApiGateway
    poller: SqsPoller
    tasks: AsyncInvoker  # the tasks function's asynchronous queue: the trigger route and the rules
    rules: list[EventBridgeRule]
    clients: AwsClients
    work_dir: str
    moto: ThreadedMotoServer | None = None
    admin_token: str | None = None

    def close(self, grace_s: float = 3.0) -> None:
        """Stop the rules, the poller and the async queue, waiting at most ``grace_s`` for each.

        An invocation still running then is abandoned, as Lambda abandons one when its environment
        shuts down: a batch not deleted stays in SQS and comes back (the ingest protocol aborts the
        attempt it finds unfinished); a compaction cut short is finished by the next run.
        """
        for rule in self.rules:
            rule.stop(timeout=grace_s)
        self.poller.stop(timeout=grace_s)
        queues = {id(rule.target): rule.target for rule in self.rules}
        queues[id(self.tasks)] = self.tasks
        for queue in queues.values():
            queue.stop(timeout=grace_s)
        self.clients.close()
        if self.moto is not None:
            self.moto.stop()
        shutil.rmtree(self.work_dir, ignore_errors=True)
        logger.info("emulation stopped")


def event_source_batch_size(settings: Settings, env: Mapping[str, str] | None = None) -> int:
    """The event source mapping's batch size: Lambda takes more than 10 only with a batching window
    of at least 1 s, so with a shorter window ``arcs local`` batches 10 unless told otherwise, and
    refuses a batch size set explicitly that AWS would refuse."""
    env = os.environ if env is None else env
    size, window = settings.ingest_batch_messages, settings.ingest_batch_window_s
    if size <= SQS_RECEIVE_MAX or window >= 1:
        return size
    if env.get(envvars.INGEST_BATCH_MESSAGES):
        raise ConfigError(
            f"{envvars.INGEST_BATCH_MESSAGES}={size} needs {envvars.INGEST_BATCH_WINDOW_S} of at least 1 "
            f"(got {window:g}): Lambda's SQS event source takes more than 10 messages only with a 1 s window"
        )
    return SQS_RECEIVE_MAX


def start_moto(port: int) -> tuple[ThreadedMotoServer, str]:
    from moto.server import ThreadedMotoServer

    # One access-log line per AWS call drowns everything else.
    logging.getLogger("werkzeug").setLevel(logging.WARNING)
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    host, bound = server.get_host_and_port()
    return server, f"http://{host}:{bound}"


def start_emulation(config: EmulationConfig, set_env: Callable[[str, str], Any] = os.environ.__setitem__) -> Emulation:
    """Emulator, resources, environment, handlers, admin token, SQS poller; ``set_env`` is the seam for tests."""
    from arcs.http.api import lambda_app
    from arcs.runtime import lambda_runtime

    moto = None
    endpoint = config.endpoint_url
    if endpoint is None:
        moto, endpoint = start_moto(config.moto_port)
        set_env("AWS_ACCESS_KEY_ID", DUMMY_KEY)
        set_env("AWS_SECRET_ACCESS_KEY", DUMMY_KEY)
    else:
        # LocalStack and friends take any keys too; keep real ones if the user set them.
        for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
            if not os.environ.get(name):
                set_env(name, DUMMY_KEY)
    work_dir = tempfile.mkdtemp(prefix="arcs-local-")
    try:
        session = boto3.Session(
            aws_access_key_id=os.environ["AWS_ACCESS_KEY_ID"],
            aws_secret_access_key=os.environ["AWS_SECRET_ACCESS_KEY"],
            region_name=config.region,
        )
        clients = AwsClients.create(
            session, endpoint_url=endpoint, dynamodb_endpoint_url=config.dynamodb_endpoint_url, region=config.region
        )
        resources = create_resources(
            clients,
            bucket=config.bucket,
            queue_name=config.queue_name,
            dlq_name=config.dlq_name,
            table_prefix=config.table_prefix,
            max_receive_count=config.max_receive_count,
            visibility_timeout_s=config.visibility_timeout_s,
            express_bucket=config.express_bucket or None,
        )
        for name, value in function_environment(resources, endpoint, config.region, work_dir).items():
            set_env(name, value)
        if config.dynamodb_endpoint_url:
            set_env(envvars.AWS_ENDPOINT_URL_DYNAMODB, config.dynamodb_endpoint_url)
        if config.express_bucket:
            set_env(envvars.EXPRESS_BUCKET, config.express_bucket)  # as the stack sets it on query, ingest, tasks
        set_env(envvars.TASKS_FUNCTION, TASKS_FUNCTION)
        if not os.environ.get(envvars.QUERY_TIMEOUT_S):
            # As the stack sets it: a query stops with its own clear 503 before the stream idles out.
            set_env(envvars.QUERY_TIMEOUT_S, str(QUERY_BUDGET_S))
        # The environment is final: now the functions may load, as in a fresh container.
        lambda_runtime.cache_clear()
        lambda_app.cache_clear()
        settings = Settings.from_env()
        authorizer = LambdaFunction("arcs-authorizer", load_handler("authorizer"), timeout_s=10, region=config.region)
        # Each function has a container of its own, as on AWS: a query streaming for minutes holds
        # the query function only (each resolver keeps its requests apart: arcs.http.api).
        edge = LambdaFunction(
            EDGE_FUNCTION, load_handler("ingest", "edge.py"), timeout_s=API_TIMEOUT_S, region=config.region
        )
        # Invoked with a response stream, as the stack's STREAM integration invokes it.
        queries = LambdaFunction(
            "arcs-query",
            load_handler("query", attribute="stream_handler"),
            timeout_s=query_function_timeout_s(settings.query_max_result_bytes, settings.query_timeout_s),
            region=config.region,
        )
        ingest = LambdaFunction(
            "arcs-ingest",
            load_handler("ingest"),
            timeout_s=max(1.0, config.visibility_timeout_s / 6),
            memory_mb=2048,
            region=config.region,
        )
        gateway = ApiGateway(
            authorizer,
            edge,
            queries,
            cache_ttl_s=config.authorizer_cache_ttl_s,
            identity_sources=("header:Authorization",),
            region=config.region,
        )
        poller = SqsPoller(
            clients.sqs,
            resources["queue_url"],
            resources["queue_arn"],
            ingest,
            batch_size=event_source_batch_size(settings),
            batching_window_s=settings.ingest_batch_window_s,
            region=config.region,
        )
        tasks = AsyncInvoker(
            LambdaFunction(
                TASKS_FUNCTION,
                load_handler("compact"),
                timeout_s=900,
                memory_mb=3008,  # the stack's default (infra/params.py)
                ephemeral_storage_mb=10_240,
                region=config.region,
            )
        )
        rules = scheduled_rules(config, settings, tasks)
        runtime = lambda_runtime()
        runtime.use_invoker(tasks.invoke_async)  # the Lambda service, for the trigger route
        token = runtime.tokens.bootstrap(settings.bootstrap_token)
    except BaseException:
        if moto is not None:
            moto.stop()
        shutil.rmtree(work_dir, ignore_errors=True)
        raise
    emulation = Emulation(
        config, endpoint, resources, settings, gateway, poller, tasks, rules, clients, work_dir, moto, token
    )
    poller.start()
    tasks.start()
    for rule in rules:
        rule.start()
    return emulation


def scheduled_rules(config: EmulationConfig, settings: Settings, tasks: AsyncInvoker) -> list[EventBridgeRule]:
    """The stack's EventBridge rules (``infra/compact.py``): each sends the tasks function
    ``{"task": <task>}``, asynchronously. Lambda runs concurrent invocations in environments of
    their own, so each rule here has its own queue and container besides the trigger route's,
    and a long compaction does not hold continuous queries back."""
    every_s = settings.compaction.interval_s
    rules = [EventBridgeRule("arcs-compaction-schedule", tasks, every_s, {"task": "compaction"})]
    for task, every_s in (("continuous_queries", config.cq_schedule_s), ("retention", config.retention_schedule_s)):
        if every_s > 0:
            name = f"{TASKS_FUNCTION}-{task.replace('_', '-')}"
            target = AsyncInvoker(LambdaFunction(name, load_handler("compact"), timeout_s=900, region=config.region))
            target.start()
            rules.append(EventBridgeRule(f"arcs-{task.replace('_', '-')}-schedule", target, every_s, {"task": task}))
    return rules


#: How long a stopping ``arcs local`` waits for each part's work in flight before abandoning it.
STOP_GRACE_S = 3


def run_local(host: str, port: int, moto_port: int = 0, workers: int = 8) -> None:
    """Run until Ctrl-C or SIGTERM, then stop as a server does, within a few seconds: the listener
    closes, requests in flight get ``STOP_GRACE_S`` to finish, then the rules, the poller and the
    async queues stop, and the emulator. Invocations still running are abandoned, as Lambda
    abandons them when an environment shuts down: nothing acknowledged is lost (a write answered
    204 is in SQS; a batch not deleted is delivered again), and the process exits 0 without
    waiting for them."""
    from arcs.http.asgi import AsgiApp
    from arcs.http.limits import HttpLimits
    from arcs.http.server import run_http

    emulation = start_emulation(EmulationConfig.from_env(moto_port=moto_port))
    resources = emulation.resources
    print(
        json.dumps(
            {
                "event": "emulator",
                "endpoint": emulation.endpoint_url,
                "bucket": resources["bucket"],
                "express_bucket": emulation.config.express_bucket or None,
                "queue_url": resources["queue_url"],
                "dlq_url": resources["dlq_url"],
                "tables": [resources["tokens_table"], resources["catalog_table"], resources["leases_table"]],
            }
        ),
        flush=True,
    )
    settings = Settings.from_env()
    limits = replace(HttpLimits.of(settings, workers), max_request_bytes=API_GATEWAY_PAYLOAD_LIMIT)
    app = AsgiApp(emulation.gateway.handle, limits, screen=emulation.gateway.screen)
    try:
        run_http(
            app,
            host,
            port,
            emulation.admin_token,
            configured_token=settings.bootstrap_token is not None,
            graceful_s=STOP_GRACE_S,
        )
    finally:
        app.close(wait=False)
        emulation.close(grace_s=STOP_GRACE_S)
    abandoned = [t.name for t in threading.enumerate() if t.is_alive() and t.name.startswith("lambda-")]
    if abandoned:
        logger.warning("abandoned invocations still running: %s", ", ".join(abandoned))
    # The interpreter would join the request workers, each waiting on an abandoned invocation.
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)

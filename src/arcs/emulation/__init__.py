"""The local serverless emulation (``arcs local``): the Lambda handlers behind an emulated API
Gateway and SQS event source, on a moto server or another local AWS emulator."""

from arcs.emulation.functions import FakeLambdaContext, InvokeError, LambdaFunction, load_handler
from arcs.emulation.gateway import ApiGateway
from arcs.emulation.local import Emulation, EmulationConfig, run_local, start_emulation
from arcs.emulation.poller import SqsPoller, sqs_event
from arcs.emulation.schedule import AsyncInvoker, EventBridgeRule

__all__ = [
    "ApiGateway",
    "AsyncInvoker",
    "Emulation",
    "EmulationConfig",
    "EventBridgeRule",
    "FakeLambdaContext",
    "InvokeError",
    "LambdaFunction",
    "SqsPoller",
    "load_handler",
    "run_local",
    "sqs_event",
    "start_emulation",
]

"""The Lambda functions of ``functions/``, loaded and invoked the way the Lambda runtime does.

Each handler module is loaded from its file under a module name of its own (two of them are
called ``handler.py``), once, like a warm container. An invocation gets a fake ``LambdaContext``
and its event and result make the same JSON round trip, within the same 6 MB synchronous-invoke
limit, as they would in Lambda. One function runs one invocation at a time, like one container.
A function's configuration is checked against Lambda's ranges (memory, timeout, ``/tmp``), and
its timeout is enforced: the caller gets ``Sandbox.Timedout`` when it passes. A thread cannot be
killed, so the handler runs on in the background, holding the container until it returns (the
next invocation waits for it, as it would for a fresh container). docs/aws-limits.md lists them.

``invoke_stream`` is ``InvokeWithResponseStream``: the handler returns a ``StreamedResponse``
(``arcs.http.streaming``) and the caller reads its bytes as the handler makes them, within Lambda's
limits for a stream: 200 MB, the first 6 MB at full speed and the rest at 2 MB/s at most, and the
function's timeout; a stream that breaks one of them, or whose body fails midway, ends short.
"""

from __future__ import annotations

import importlib.util
import json
import logging
import queue
import sys
import threading
import time
import uuid
from collections.abc import Callable, Generator
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import arcs
from arcs.emulation.measure import measured
from arcs.http.runtime_api import answer_of
from arcs.http.streaming import LAMBDA_STREAM_BYTES_PER_S, LAMBDA_STREAM_MAX_BYTES, LAMBDA_STREAM_UNCAPPED_BYTES
from arcs.write.paths import LAMBDA_SYNC_PAYLOAD_BYTES

logger = logging.getLogger(__name__)

Handler = Callable[[dict[str, Any], Any], Any]

ACCOUNT_ID = "123456789012"
#: Synchronous invocation payload, request and response each (what API Gateway and SQS use): the
#: number the authorizer measures a write's room against.
LAMBDA_PAYLOAD_LIMIT = LAMBDA_SYNC_PAYLOAD_BYTES
#: Asynchronous invocation payload (``InvocationType=Event``; 256 KB until October 2025).
ASYNC_PAYLOAD_LIMIT = 1024 * 1024
MEMORY_MB_RANGE = (128, 10_240)
MAX_TIMEOUT_S = 900
EPHEMERAL_STORAGE_MB_RANGE = (512, 10_240)


def functions_dir() -> Path:
    """``functions/`` of the source tree the running ``arcs`` package comes from."""
    path = Path(arcs.__file__).resolve().parents[2] / "functions"
    if not path.is_dir():
        raise FileNotFoundError(f"no Lambda handlers at {path}: run 'arcs local' from a source checkout")
    return path


def load_handler(function: str, file: str = "handler.py", attribute: str = "handler") -> Handler:
    """Import ``functions/<function>/<file>`` as Lambda does, under a unique module name."""
    path = functions_dir() / function / file
    name = f"arcs_lambda_{function}_{Path(file).stem}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load the Lambda handler {path}")
    module: ModuleType = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    handler: Handler = getattr(module, attribute)
    return handler


@dataclass
class FakeLambdaContext:
    """What the Lambda runtime passes as ``context``: the fields Powertools Logger reads, and a deadline."""

    function_name: str
    memory_limit_in_mb: int
    invoked_function_arn: str
    deadline: float  # time.monotonic() at which Lambda would stop the invocation
    aws_request_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    function_version: str = "$LATEST"
    log_group_name: str = ""
    log_stream_name: str = "local"
    identity: Any = None
    client_context: Any = None
    tenant_id: str | None = None

    def __post_init__(self) -> None:
        self.log_group_name = self.log_group_name or f"/aws/lambda/{self.function_name}"

    def get_remaining_time_in_millis(self) -> int:
        return max(0, int((self.deadline - time.monotonic()) * 1000))


class InvokeError(Exception):
    """The invocation failed as Lambda would report it (the function raised, or a payload was too big)."""

    def __init__(self, error_type: str, message: str) -> None:
        super().__init__(f"{error_type}: {message}")
        self.error_type = error_type
        self.message = message


class StreamCut(Exception):
    """A streamed response ended before its end: what reached the caller is all there is."""


#: Pieces a streaming handler may have made ahead of its reader: memory stays bounded.
_STREAM_AHEAD = 4
_END = object()


class LambdaFunction:
    """One function: its handler, its configuration, and one container's worth of concurrency."""

    def __init__(
        self,
        name: str,
        handler: Handler,
        *,
        timeout_s: float,
        memory_mb: int = 1024,
        ephemeral_storage_mb: int = 512,
        region: str = "us-east-1",
        lock: threading.Lock | None = None,
    ) -> None:
        # What Lambda's CreateFunction refuses, refused here too.
        if not 0 < timeout_s <= MAX_TIMEOUT_S:
            raise ValueError(f"{name}: a Lambda timeout is 1 to {MAX_TIMEOUT_S} s, got {timeout_s}")
        if not MEMORY_MB_RANGE[0] <= memory_mb <= MEMORY_MB_RANGE[1]:
            low, high = MEMORY_MB_RANGE
            raise ValueError(f"{name}: Lambda memory is {low} to {high} MB, got {memory_mb}")
        if not EPHEMERAL_STORAGE_MB_RANGE[0] <= ephemeral_storage_mb <= EPHEMERAL_STORAGE_MB_RANGE[1]:
            low, high = EPHEMERAL_STORAGE_MB_RANGE
            raise ValueError(f"{name}: Lambda's /tmp is {low} to {high} MB, got {ephemeral_storage_mb}")
        self.ephemeral_storage_mb = ephemeral_storage_mb
        self.name = name
        self.handler = handler
        self.timeout_s = timeout_s
        self.memory_mb = memory_mb
        self.arn = f"arn:aws:lambda:{region}:{ACCOUNT_ID}:function:{name}"
        # Functions whose modules share state (one resolver) share a lock: they share a container.
        self.lock = lock or threading.Lock()

    def _check_request(self, event: dict[str, Any]) -> str:
        request = json.dumps(event)
        if len(request) > LAMBDA_PAYLOAD_LIMIT:
            raise InvokeError(
                "RequestEntityTooLargeException",
                f"the event is {len(request)} bytes; a Lambda function takes at most {LAMBDA_PAYLOAD_LIMIT}",
            )
        return request

    def invoke_stream(
        self,
        event: dict[str, Any],
        idle_s: float | None = None,
        bytes_per_s: float = LAMBDA_STREAM_BYTES_PER_S,
    ) -> Generator[bytes, None, None]:
        """``InvokeWithResponseStream``: the bytes the handler writes, as it writes them.

        An error before the first byte (the event too large, the handler failing, the timeout) is an
        ``InvokeError`` at the first ``next``; after it, ``StreamCut``. ``idle_s``: how long the
        reader waits for the next piece (API Gateway's idle timeout), ``StreamCut`` past it.
        """
        request = self._check_request(event)
        if not self.lock.acquire(timeout=self.timeout_s):
            raise InvokeError("TooManyRequestsException", f"{self.name} was busy for {self.timeout_s:g} s")
        started = time.monotonic()
        context = FakeLambdaContext(self.name, self.memory_mb, self.arn, started + self.timeout_s)
        pieces: queue.Queue[object] = queue.Queue(_STREAM_AHEAD)
        abandoned = threading.Event()

        def put(item: object) -> None:
            while not abandoned.is_set():
                try:
                    pieces.put(item, timeout=0.1)
                    return
                except queue.Full:
                    continue

        def run() -> None:
            try:
                with measured(self.name):
                    for piece in answer_of(self.handler(json.loads(request), context)).encoded():
                        put(piece)
                        if abandoned.is_set():
                            break
                put(_END)
            except Exception as exc:
                put(exc)
            finally:
                self.lock.release()

        threading.Thread(target=run, name=f"lambda-{self.name}", daemon=True).start()
        return self._read_stream(pieces, abandoned, started, idle_s, bytes_per_s)

    def _read_stream(
        self,
        pieces: queue.Queue[object],
        abandoned: threading.Event,
        started: float,
        idle_s: float | None,
        bytes_per_s: float,
    ) -> Generator[bytes, None, None]:
        sent = 0
        capped_since: float | None = None
        capped_from = LAMBDA_STREAM_UNCAPPED_BYTES
        try:
            while True:
                deadline = started + self.timeout_s
                wait = deadline - time.monotonic()
                if idle_s is not None:
                    wait = min(wait, idle_s)
                try:
                    item = pieces.get(timeout=max(0.0, wait))
                except queue.Empty:
                    if time.monotonic() >= deadline:
                        message = f"Task timed out after {self.timeout_s:.2f} seconds"
                        if not sent:
                            raise InvokeError("Sandbox.Timedout", message) from None
                        raise StreamCut(message) from None
                    raise StreamCut(f"no byte for {idle_s:g} s: the stream idled out") from None
                if item is _END:
                    return
                if isinstance(item, Exception):
                    if not sent:
                        raise InvokeError(type(item).__name__, str(item)) from item
                    raise StreamCut(f"the function failed midway: {type(item).__name__}: {item}") from item
                if not isinstance(item, bytes):
                    raise StreamCut(f"the function wrote {type(item).__name__}, not bytes")
                if sent + len(item) > LAMBDA_STREAM_MAX_BYTES:
                    raise StreamCut(f"the response passed Lambda's {LAMBDA_STREAM_MAX_BYTES} bytes for a stream")
                # Lambda's bandwidth: past the first 6 MB, at most 2 MB/s.
                for start in range(0, len(item), 256 * 1024):
                    part = item[start : start + 256 * 1024]
                    if sent + len(part) > LAMBDA_STREAM_UNCAPPED_BYTES:
                        if capped_since is None:
                            capped_since, capped_from = time.monotonic(), max(sent, LAMBDA_STREAM_UNCAPPED_BYTES)
                        due = capped_since + (sent + len(part) - capped_from) / bytes_per_s
                        time.sleep(max(0.0, due - time.monotonic()))
                    sent += len(part)
                    yield part
        finally:
            abandoned.set()

    def invoke(self, event: dict[str, Any], wait_s: float | None = None) -> Any:
        """Run the handler on a JSON copy of ``event``; a raise becomes ``InvokeError`` ("Unhandled").

        The function's timeout ends the invocation (``Sandbox.Timedout``); ``wait_s``, shorter, is
        how long the caller waits for it (API Gateway's integration timeout): ``IntegrationTimeout``.
        """
        request = self._check_request(event)
        called = time.monotonic()
        # The container is busy until its last invocation returns, even one timed out.
        if not self.lock.acquire(timeout=-1 if wait_s is None else wait_s):
            raise InvokeError("IntegrationTimeout", f"{self.name} was busy for {wait_s:g} s")
        started = time.monotonic()
        context = FakeLambdaContext(self.name, self.memory_mb, self.arn, started + self.timeout_s)
        outcome: list[Any] = []
        done = threading.Event()

        def run() -> None:
            try:
                with measured(self.name):
                    outcome.append(self.handler(json.loads(request), context))
            except Exception as exc:
                outcome.append(exc)
            finally:
                done.set()
                self.lock.release()
                elapsed = time.monotonic() - started
                if elapsed > self.timeout_s:
                    logger.warning("%s returned after %.1f s, past its timeout", self.name, elapsed)

        threading.Thread(target=run, name=f"lambda-{self.name}", daemon=True).start()
        waited = self.timeout_s if wait_s is None else max(0.0, min(wait_s - (started - called), self.timeout_s))
        if not done.wait(waited):
            if waited < self.timeout_s:
                raise InvokeError("IntegrationTimeout", f"{self.name} did not answer within {wait_s:g} s")
            raise InvokeError("Sandbox.Timedout", f"Task timed out after {self.timeout_s:.2f} seconds")
        (result,) = outcome
        if isinstance(result, Exception):
            raise InvokeError(type(result).__name__, str(result)) from result
        try:
            response = json.dumps(result)
        except (TypeError, ValueError) as exc:
            raise InvokeError("Runtime.MarshalError", f"the result is not JSON: {exc}") from exc
        if len(response) > LAMBDA_PAYLOAD_LIMIT:
            raise InvokeError(
                "ResponseSizeTooLarge",
                f"the response is {len(response)} bytes; a Lambda function returns at most {LAMBDA_PAYLOAD_LIMIT}",
            )
        return json.loads(response)

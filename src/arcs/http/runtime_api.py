"""A Lambda runtime that streams: the query function's, in place of the Python runtime's own.

Lambda streams a response for Node.js natively; for other languages through a runtime that
speaks the Runtime API's streaming mode. Lambda's Python runtime answers buffered only, so the
stack starts this one instead (``AWS_LAMBDA_EXEC_WRAPPER``: ``lambda_streaming_runtime`` next to
this module execs the interpreter Lambda passes it on ``python -m arcs.http.runtime_api``). It is the
Runtime API's loop (https://docs.aws.amazon.com/lambda/latest/dg/runtimes-api.html): take the next
event, call the handler (``_HANDLER``, e.g. ``handler.stream_handler``, which returns a
``StreamedResponse``), and post its answer with ``Lambda-Runtime-Function-Response-Mode:
streaming`` in HTTP/1.1 chunks, the connection closed after the last one. A handler that fails
before answering is reported on the ``error`` endpoint; one whose body fails midway ends its
stream with the error trailers (``Lambda-Runtime-Function-Error-Type`` and ``-Body``), and API
Gateway cuts the client's response short.
"""

from __future__ import annotations

import base64
import http.client
import importlib
import json
import logging
import os
import sys
import time
import traceback
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from arcs.http.streaming import StreamedResponse, from_proxy_result

logger = logging.getLogger(__name__)

API_VERSION = "2018-06-01"
#: API Gateway's streamed proxy format (metadata, delimiter, body) as the runtime declares it.
HTTP_INTEGRATION_RESPONSE = "application/vnd.awslambda.http-integration-response"
ERROR_TYPE_TRAILER = "Lambda-Runtime-Function-Error-Type"
ERROR_BODY_TRAILER = "Lambda-Runtime-Function-Error-Body"

StreamHandler = Callable[[dict[str, Any], Any], Any]


@dataclass
class Context:
    """Lambda's context object, from the invocation's headers and the function's environment."""

    aws_request_id: str
    invoked_function_arn: str
    deadline_ms: int
    function_name: str = field(default_factory=lambda: os.environ.get("AWS_LAMBDA_FUNCTION_NAME", ""))
    function_version: str = field(default_factory=lambda: os.environ.get("AWS_LAMBDA_FUNCTION_VERSION", "$LATEST"))
    memory_limit_in_mb: int = field(default_factory=lambda: int(os.environ.get("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "0")))
    log_group_name: str = field(default_factory=lambda: os.environ.get("AWS_LAMBDA_LOG_GROUP_NAME", ""))
    log_stream_name: str = field(default_factory=lambda: os.environ.get("AWS_LAMBDA_LOG_STREAM_NAME", ""))
    identity: Any = None
    client_context: Any = None

    def get_remaining_time_in_millis(self) -> int:
        return max(0, self.deadline_ms - int(time.time() * 1000))


class RuntimeApi:
    """The Runtime API at ``address`` (``AWS_LAMBDA_RUNTIME_API``: host and port)."""

    def __init__(self, address: str) -> None:
        host, _, port = address.rpartition(":")
        self.host, self.port = host, int(port)
        self.base = f"/{API_VERSION}/runtime"

    def _connection(self) -> http.client.HTTPConnection:
        # No timeout: the next event may be hours away while the environment is frozen.
        return http.client.HTTPConnection(self.host, self.port)

    def next_invocation(self) -> tuple[dict[str, Any], Context]:
        connection = self._connection()
        try:
            connection.request("GET", f"{self.base}/invocation/next")
            response = connection.getresponse()
            body = response.read()
            if response.status != 200:
                raise RuntimeError(
                    f"the Runtime API answered {response.status} for the next invocation: {body[:200]!r}"
                )
            headers = response.headers
        finally:
            connection.close()
        trace = headers.get("Lambda-Runtime-Trace-Id")
        if trace:
            os.environ["_X_AMZN_TRACE_ID"] = trace  # where X-Ray's SDK and Powertools read it
        context = Context(
            aws_request_id=headers["Lambda-Runtime-Aws-Request-Id"],
            invoked_function_arn=headers.get("Lambda-Runtime-Invoked-Function-Arn", ""),
            deadline_ms=int(headers.get("Lambda-Runtime-Deadline-Ms", "0")),
        )
        return json.loads(body), context

    def post_error(self, path: str, exc: BaseException) -> None:
        """An error before anything of the answer was sent (``/init/error`` or an invocation's ``/error``)."""
        document = {
            "errorMessage": str(exc),
            "errorType": type(exc).__name__,
            "stackTrace": traceback.format_exception(exc)[-20:],
        }
        connection = self._connection()
        try:
            connection.request(
                "POST",
                f"{self.base}/{path}",
                body=json.dumps(document).encode(),
                headers={"Content-Type": "application/json", ERROR_TYPE_TRAILER: "Unhandled"},
            )
            connection.getresponse().read()
        finally:
            connection.close()

    def post_stream(self, request_id: str, pieces: Iterator[bytes]) -> None:
        """The answer in chunks as they come; an error midway ends it with the error trailers. A
        connection that breaks loses this answer only: the runtime goes on with the next event."""
        connection = self._connection()
        try:
            connection.putrequest("POST", f"{self.base}/invocation/{request_id}/response", skip_accept_encoding=True)
            connection.putheader("Content-Type", HTTP_INTEGRATION_RESPONSE)
            connection.putheader("Lambda-Runtime-Function-Response-Mode", "streaming")
            connection.putheader("Transfer-Encoding", "chunked")
            connection.putheader("Trailer", f"{ERROR_TYPE_TRAILER}, {ERROR_BODY_TRAILER}")
            connection.endheaders()
            trailers = b""
            while True:
                try:
                    piece = next(pieces)
                except StopIteration:
                    break
                except Exception as exc:
                    logger.exception("the response failed after it started")
                    detail = json.dumps({"errorMessage": str(exc), "errorType": type(exc).__name__}).encode()
                    trailers = (
                        f"{ERROR_TYPE_TRAILER}: Function.{type(exc).__name__}\r\n"
                        f"{ERROR_BODY_TRAILER}: {base64.b64encode(detail).decode()}\r\n"
                    ).encode()
                    break
                if piece:
                    connection.send(b"%x\r\n" % len(piece) + piece + b"\r\n")
            connection.send(b"0\r\n" + trailers + b"\r\n")
            response = connection.getresponse()
            answer = response.read()
            if response.status >= 300:
                logger.error("the Runtime API refused the response (%d): %r", response.status, answer[:200])
        except (OSError, http.client.HTTPException) as exc:
            logger.error("the response to %s broke off: %s", request_id, exc)
        finally:
            connection.close()  # as the streaming mode asks, once the response is written


def load_handler(spec: str, task_root: str) -> StreamHandler:
    """``module.attribute`` (``_HANDLER``) from the function's code in ``task_root``."""
    module_name, _, attribute = spec.rpartition(".")
    if task_root not in sys.path:
        sys.path.insert(0, task_root)
    handler: StreamHandler = getattr(importlib.import_module(module_name), attribute)
    return handler


def answer_of(result: Any) -> StreamedResponse:
    """A handler's result as a stream: a ``StreamedResponse`` as it is, a proxy response in one piece."""
    if isinstance(result, StreamedResponse):
        return result
    if isinstance(result, Mapping) and "statusCode" in result:
        return from_proxy_result(result)
    raise TypeError(f"a streaming handler returns a StreamedResponse or a proxy response, not {type(result).__name__}")


def serve(api: RuntimeApi, handler: StreamHandler, invocations: int | None = None) -> None:
    """Answer invocations, forever or ``invocations`` of them."""
    served = 0
    while invocations is None or served < invocations:
        event, context = api.next_invocation()
        served += 1
        try:
            answer = answer_of(handler(event, context))
            pieces = answer.encoded()
            first = next(pieces)  # the metadata: a failure this early is the invocation's error
        except Exception as exc:
            logger.exception("the handler failed")
            api.post_error(f"invocation/{context.aws_request_id}/error", exc)
            continue
        api.post_stream(context.aws_request_id, _prepend(first, pieces))


def _prepend(first: bytes, rest: Iterator[bytes]) -> Iterator[bytes]:
    yield first
    yield from rest


def main(env: Mapping[str, str] | None = None) -> None:
    env = os.environ if env is None else env
    api = RuntimeApi(env["AWS_LAMBDA_RUNTIME_API"])
    try:
        handler = load_handler(env["_HANDLER"], env.get("LAMBDA_TASK_ROOT", os.getcwd()))
    except Exception as exc:
        api.post_error("init/error", exc)
        raise SystemExit(1) from exc
    serve(api, handler)


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO)
    main()

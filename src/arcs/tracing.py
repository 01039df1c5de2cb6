"""X-Ray tracing inside the Lambda functions, through Powertools Tracer.

The stack turns on active tracing (infra/function.py, infra/api.py), so Lambda already records a
segment per invocation. This adds what only the code knows:

- annotations, which X-Ray indexes: a trace is found by what it did, e.g. the filter expression
  ``annotation.database = "metrics" AND annotation.status = "500"`` (the query and ingest use
  cases put them on their own subsegments, ``## query`` and ``## ingest``);
- a subsegment for each AWS call (botocore is patched: the catalog's DynamoDB calls, S3 listings
  and writes, SQS) and named ones for the steps those do not show, such as DuckDB's run of a
  query, whose S3 reads go through httpfs rather than botocore.

Outside Lambda (no ``LAMBDA_TASK_ROOT``) there is no Tracer at all, so the standalone server and
``arcs local`` never look for an X-Ray daemon nor import its SDK (a fifth of a second of the
interpreter, on the first write's path): every function here is then a no-op. Inside, it is made
on first use, not on import: importing X-Ray's SDK and patching botocore is no part of loading a
handler (tests/unit/test_lazy_imports.py).
"""

from __future__ import annotations

import functools
import numbers
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from aws_lambda_powertools import Tracer


@functools.cache
def tracer() -> Tracer | None:
    """The process's Tracer; None outside Lambda, where Tracer would only disable itself."""
    if "LAMBDA_TASK_ROOT" not in os.environ:
        return None
    from aws_lambda_powertools import Tracer

    # botocore only: the core makes no other call X-Ray's SDK knows how to trace.
    return Tracer(service="arcs", patch_modules=("botocore",))


Annotation = str | numbers.Number | bool
Annotate = Callable[..., None]
Handler = TypeVar("Handler", bound=Callable[..., Any])


def _ignore(**values: Annotation | None) -> None:
    return None


@contextmanager
def subsegment(name: str) -> Iterator[Annotate]:
    """Time the block as its own subsegment of the invocation's trace; yields a function that
    indexes that subsegment by keyword values (None: left out).

    Annotations go on a subsegment of ours, never on the invocation's own segment: Lambda owns
    that one, and X-Ray's SDK refuses to change it.
    """
    traced = tracer()
    if traced is None or traced.disabled:
        yield _ignore
        return
    with traced.provider.in_subsegment(name) as segment:

        def annotate(**values: Annotation | None) -> None:
            if segment is None:  # no trace to add to (X-Ray's SDK logs why)
                return
            for key, value in values.items():
                if value is not None:
                    segment.put_annotation(key, value)

        yield annotate


def traced_handler(handler: Handler) -> Handler:
    """A Lambda handler as a subsegment with the ColdStart annotation. The response is not
    recorded (a query's result would not fit a segment); an exception is."""
    wrapped: Callable[..., Any] | None = None

    @functools.wraps(handler)
    def traced(event: Any, context: Any) -> Any:
        nonlocal wrapped
        if wrapped is None:
            recorder = tracer()
            wrapped = handler if recorder is None else recorder.capture_lambda_handler(handler, capture_response=False)
        return wrapped(event, context)

    return traced  # type: ignore[return-value]

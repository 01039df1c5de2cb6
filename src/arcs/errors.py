"""The one exception hierarchy of the core.

Every failure a caller can cause is an ``ArcsError`` subclass carrying its HTTP status; the
single place that turns them into responses is ``arcs.http.api``. Library errors (boto, DuckDB,
pyarrow) are translated where they are raised, with ``raise ... from exc``.
"""

from __future__ import annotations

from arcs import envvars


class ArcsError(Exception):
    status: int = 500
    #: Client mistakes are logged as warnings, our faults as errors.
    client_error: bool = False

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class BadRequest(ArcsError):
    status = 400
    client_error = True


class Unauthorized(ArcsError):
    status = 401
    client_error = True


class Forbidden(ArcsError):
    status = 403
    client_error = True


class NotFound(ArcsError):
    status = 404
    client_error = True


class Conflict(ArcsError):
    status = 409
    client_error = True


class PayloadTooLarge(ArcsError):
    status = 413
    client_error = True


class RequestTimeout(ArcsError):
    """The request's body did not arrive within the time a server gives it (a stalled sender)."""

    status = 408
    client_error = True


class ResultTooLarge(ArcsError):
    """A query's result is larger than ``ARCS_QUERY_MAX_RESULT_BYTES``: refused before it is built whole.

    400 like a result over the row limit: the request was fine, what it asks for is too much.
    """

    status = 400
    client_error = True

    def __init__(self, max_bytes: int) -> None:
        super().__init__(
            f"the result is larger than {max_bytes} bytes ({envvars.QUERY_MAX_RESULT_BYTES}); select fewer or "
            "narrower columns, add a LIMIT or aggregate"
        )
        self.max_bytes = max_bytes


class UnsupportedMediaType(ArcsError):
    status = 415
    client_error = True


class QueryTimeout(ArcsError):
    """A query ran longer than ``ARCS_QUERY_TIMEOUT_S`` and was interrupted.

    503, not 408: 408 says the *request* was not received in time (and clients, browsers among
    them, resend it on their own), while here the request was whole and the server gave up on the
    work. Unlike ``ServiceUnavailable`` it carries no ``Retry-After``: the same query would run as
    long again. Logged as a warning: an expensive query is the caller's, not a fault of ours.
    """

    status = 503
    client_error = True


class ServiceUnavailable(ArcsError):
    """503 with ``Retry-After``: the same request may succeed later."""

    status = 503

    def __init__(self, message: str, retry_after_s: int = 1) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


#: Retry-After (seconds) when the disk is full: room comes back as ingest retires spool segments.
DISK_FULL_RETRY_S = 10


class StorageFault(ServiceUnavailable):
    """A dependency (object store, queue, catalog, the disk) failed; the request may be retried,
    and the answer says when (``Retry-After``)."""


class DiskFull(StorageFault):
    """The local disk has no room (``ENOSPC``, ``EDQUOT``): nothing the request or write did. Ingest
    keeps such writes queued without counting the attempt against them (docs/ingest.md)."""

    def __init__(self, message: str) -> None:
        super().__init__(message, DISK_FULL_RETRY_S)


class TooManyRequests(ServiceUnavailable):
    """429: the caller should slow down; carries ``Retry-After`` as ``ServiceUnavailable`` does."""

    status = 429
    client_error = True

"""turnledger — the Python client of the turnledger coordination API.

Standard library only. :class:`Client` has one method per route (named after
the OpenAPI operationIds in snake_case); :class:`Worker` claims an agent's
Turns and runs a handler for each with claim renewal, stop requests and
graceful shutdown; :meth:`Client.follow` iterates over a feed's event stream
and resumes after a broken connection; :mod:`turnledger.aio` is the asyncio
variant. See README.md.
"""

from ._transport import Abort, Request, Response, Transport, default_transport
from .client import IDEMPOTENCY_HEADER, Client, Feed, new_idempotency_key, parse_time
from .errors import (
    Cancelled,
    ConflictError,
    Error,
    FencingError,
    ForbiddenError,
    InternalError,
    InvariantError,
    NotFoundError,
    Retry,
    TooManyRequestsError,
    UnauthorizedError,
    UnavailableError,
    ValidationError,
    refused_for_good,
    retryable,
)
from .worker import Handler, Job, Result, Worker, retry_keyed

__version__ = "0.1.0"

__all__ = [
    "Abort", "Request", "Response", "Transport", "default_transport",
    "IDEMPOTENCY_HEADER", "Client", "Feed", "new_idempotency_key", "parse_time",
    "Cancelled", "ConflictError", "Error", "FencingError", "ForbiddenError", "InternalError",
    "InvariantError", "NotFoundError", "Retry", "TooManyRequestsError", "UnauthorizedError",
    "UnavailableError", "ValidationError", "refused_for_good", "retryable",
    "Handler", "Job", "Result", "Worker", "retry_keyed",
]

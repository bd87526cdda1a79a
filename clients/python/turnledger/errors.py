"""Errors: a refused request is a :class:`Error` with the HTTP status and the
service's ``error`` name and ``message``; one subclass per error name."""

from __future__ import annotations

import email.utils
import http.client
import json
import time
from typing import Optional

__all__ = [
    "Error",
    "UnauthorizedError",
    "ForbiddenError",
    "NotFoundError",
    "ConflictError",
    "FencingError",
    "InvariantError",
    "ValidationError",
    "TooManyRequestsError",
    "UnavailableError",
    "InternalError",
    "Retry",
    "Cancelled",
    "retryable",
    "refused_for_good",
]


class Error(Exception):
    """A request the service refused.

    ``status`` is the HTTP status, ``error`` the service's error name (e.g.
    ``"ConflictError"``), ``message`` its text for people, ``retry_after``
    the seconds of the service's ``Retry-After`` (sent with 503 and 429), or
    ``None``. Catch a subclass to test the error name.
    """

    def __init__(self, status: int, error: str, message: str, retry_after: Optional[float] = None) -> None:
        super().__init__(f"turnledger: {status} {error}: {message}")
        self.status = status
        self.error = error
        self.message = message
        self.retry_after = retry_after


class UnauthorizedError(Error):
    """401: missing, wrong, expired or revoked credentials."""


class ForbiddenError(Error):
    """403: the caller may not do this (read policy, grants)."""


class NotFoundError(Error):
    """404: no such project, agent, Turn or credential."""


class ConflictError(Error):
    """409: the state does not allow it (e.g. a Turn already finished)."""


class FencingError(Error):
    """409: the claim is not (or no longer) the live one of the Turn."""


class InvariantError(Error):
    """422: an invariant of the domain refuses the request."""


class ValidationError(Error):
    """422: the request is malformed (a bad field, query or header)."""


class TooManyRequestsError(Error):
    """429: throttled (e.g. failed authentications); see retry_after."""


class UnavailableError(Error):
    """503: the service cannot answer now; retry after retry_after."""


class InternalError(Error):
    """500: a bug or an unexpected failure of the service."""


_BY_NAME: dict[str, type[Error]] = {
    "UnauthorizedError": UnauthorizedError,
    "ForbiddenError": ForbiddenError,
    "NotFoundError": NotFoundError,
    "ConflictError": ConflictError,
    "FencingError": FencingError,
    "InvariantError": InvariantError,
    "ValidationError": ValidationError,
    "TooManyRequestsError": TooManyRequestsError,
    "ServiceUnavailableError": UnavailableError,
    "InternalError": InternalError,
}

_BY_STATUS: dict[int, type[Error]] = {
    401: UnauthorizedError,
    403: ForbiddenError,
    404: NotFoundError,
    429: TooManyRequestsError,
    503: UnavailableError,
    500: InternalError,
}

_STATUS_OF_NAME: dict[str, int] = {
    "UnauthorizedError": 401,
    "ForbiddenError": 403,
    "NotFoundError": 404,
    "ConflictError": 409,
    "FencingError": 409,
    "InvariantError": 422,
    "ValidationError": 422,
    "TooManyRequestsError": 429,
    "ServiceUnavailableError": 503,
    "InternalError": 500,
}


def parse_retry_after(value: Optional[str]) -> Optional[float]:
    """Reads Retry-After: delay-seconds or an HTTP date."""
    if not value:
        return None
    try:
        n = int(value)
        return float(n) if n > 0 else None
    except ValueError:
        pass
    try:
        t = email.utils.parsedate_to_datetime(value).timestamp()
    except (TypeError, ValueError):
        return None
    return max(t - time.time(), 0.0)


def make_error(status: int, error: str, message: str, retry_after: Optional[float] = None) -> Error:
    cls = _BY_NAME.get(error) or _BY_STATUS.get(status) or Error
    return cls(status, error, message, retry_after)


def error_from(status: int, body: bytes, retry_after: Optional[str]) -> Error:
    """Decodes an error answer; a body that is not the error shape still gives
    an Error with the status."""
    name, message = "", ""
    try:
        v = json.loads(body)
        if isinstance(v, dict) and isinstance(v.get("error"), str):
            name, message = v["error"], str(v.get("message", ""))
    except ValueError:
        pass
    if not name:
        name = http.client.responses.get(status, f"HTTP {status}")
        message = body.decode("utf-8", "replace")
        if len(message) > 200:
            message = message[:200] + "…"
    return make_error(status, name, message, parse_retry_after(retry_after))


def error_of_event(data: str) -> Error:
    """The error of an ``event: error`` inside a stream, with the status a page
    would have answered."""
    name, message = "StreamError", data
    try:
        v = json.loads(data)
        if isinstance(v, dict) and v.get("error"):
            name, message = str(v["error"]), str(v.get("message", ""))
    except ValueError:
        pass
    return make_error(_STATUS_OF_NAME.get(name, 400), name, message)


class Retry(Exception):
    """Raised by a worker's handler to ask for another attempt: the Turn is
    finished with outcome ``failed`` and ``retry: true``; the service queues
    it again after its backoff, or ends it as ``dead`` when its
    ``max_attempts`` are spent."""


class Cancelled(Exception):
    """Raised by ``Job.raise_if_cancelled()``: the job was cancelled, its
    ``cause`` says why (``"stop_requested"``, ``"claim_lost"`` or
    ``"shutdown"``)."""

    def __init__(self, cause: str) -> None:
        super().__init__(f"turnledger: job cancelled: {cause}")
        self.cause = cause


def _transient_status(status: int) -> bool:
    return status >= 500 or status in (408, 429)


def retryable(exc: BaseException) -> bool:
    """Whether a call that raised exc may be sent again with the same
    Idempotency-Key: its answer was lost (a network error) or the service was
    unavailable or shedding load (429, 502, 503, 504). Any other refusal is an
    answer, and a retry would get it again."""
    if isinstance(exc, Error):
        return exc.status in (429, 502, 503, 504)
    return isinstance(exc, (OSError, http.client.HTTPException))


def refused_for_good(exc: BaseException) -> bool:
    """Whether the service answered with a refusal that asking again would
    not change: an Error other than a 5xx, a 408 or a 429."""
    return isinstance(exc, Error) and not _transient_status(exc.status)
